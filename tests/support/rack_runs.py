"""A scripted deploy backend, a progress recorder and a site with pinned MACs: the rack runner's
decisions tested alone and fast (the real backends are tested against real peers)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from provisioner.deploy.base import DeployBackend, DeployOutcome, DeployRequest, ProgressFn
from provisioner.inventory import Site, load_site
from provisioner.workflow.rack import HostResult

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example" / "site.yml"


class ScriptedBackend(DeployBackend):
    """Deploys instantly; ``fail_times`` fails a host that many times first; ``before`` runs in
    each deploy first (a test holds a host there until an event)."""

    name = "scripted"
    drives_power = False

    def __init__(
        self,
        fail_times: dict[str, int] | None = None,
        before: Callable[[str], None] | None = None,
    ) -> None:
        self.fail_times = dict(fail_times or {})
        self.before = before
        self.deployed: list[str] = []
        self.released: list[str] = []
        self.prepared: list[str] = []
        self.closed = 0
        self.concurrent = 0
        self.max_concurrent = 0
        self._lock = threading.Lock()

    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        self.prepared = [r.host.name for r in requests]

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        with self._lock:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            name = request.host.name
            if self.before is not None:
                self.before(name)
            progress(name, "pxe", "booting")
            with self._lock:
                self.deployed.append(name)
                left = self.fail_times.get(name, 0)
                if left:
                    self.fail_times[name] = left - 1
            if left:
                return DeployOutcome(name, False, "no disk matches the root-disk hint")
            return DeployOutcome(name, True, phases={"install": 1.0})
        finally:
            with self._lock:
                self.concurrent -= 1

    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        self.released.append(request.host.name)

    def close(self) -> None:
        self.closed += 1


class Recorder:
    """Keeps the runner's progress: (host, phase) in order, and each host's final result."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, str]] = []
        self.results: list[HostResult] = []
        self._lock = threading.Lock()

    def phase(self, host: str, phase: str, message: str) -> None:
        with self._lock:
            self.phases.append((host, phase))

    def finished(self, result: HostResult) -> None:
        with self._lock:
            self.results.append(result)


def pinned_mac_site(tmp_path: Path) -> Site:
    """The example site with every host's provisioning MAC pinned (no BMC needed)."""
    lines = []
    for line in EXAMPLE.read_text().splitlines():
        lines.append(line)
        if line.startswith("      - u: "):
            u = int(line.split(":")[1])
            lines.append(f"        provisioning_mac: 'b8:3f:d2:00:{len(lines) % 256:02x}:{u:02x}'")
    (tmp_path / "site.yml").write_text("\n".join(lines) + "\n")
    return load_site(tmp_path / "site.yml")


def fake_playbook(tmp_path: Path, failing: Sequence[str] = ()) -> Path:
    """A stand-in ansible-playbook: one task, the hosts of --limit pass (those in ``failing``
    fail), and the recap; each run's --limit is appended to ``<tmp>/playbook-runs``."""
    import sys

    runs = tmp_path / "playbook-runs"
    fake = tmp_path / "ansible-playbook"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "hosts = sys.argv[sys.argv.index('--limit') + 1].split(',')\n"
        f"failing = {list(failing)!r}\n"
        f"open({str(runs)!r}, 'a').write(','.join(hosts) + '\\n')\n"
        "print('PLAY [all] ***')\nprint('TASK [common : ntp] ***')\n"
        "for h in hosts:\n"
        "    print(f'fatal: [{h}]: FAILED! => ' if h in failing else f'changed: [{h}]')\n"
        "print()\nprint('PLAY RECAP ***')\n"
        "for h in hosts:\n"
        "    bad = int(h in failing)\n"
        "    print(f'{h} : ok={1 - bad} changed={1 - bad} unreachable=0 failed={bad}')\n"
        "sys.exit(2 if any(h in failing for h in hosts) else 0)\n"
    )
    fake.chmod(0o755)
    return fake
