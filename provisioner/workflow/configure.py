"""Running the site playbook on freshly deployed hosts and reading its recap per host."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from provisioner.exceptions import NotReady

RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)"
)


@dataclass(frozen=True)
class HostRecap:
    """One host's line of Ansible's PLAY RECAP."""

    host: str
    ok: int
    changed: int
    unreachable: int
    failed: int

    @property
    def success(self) -> bool:
        return self.unreachable == 0 and self.failed == 0


def parse_recap(output: str) -> dict[str, HostRecap]:
    """Per-host recap from ansible-playbook's output."""
    recaps: dict[str, HostRecap] = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            m = RECAP_RE.match(line.strip())
            if m:
                recaps[m["host"]] = HostRecap(
                    m["host"], int(m["ok"]), int(m["changed"]), int(m["unreachable"]), int(m["failed"])
                )
    return recaps


def repo_root() -> Path:
    """The checkout holding playbooks/ and ansible.cfg."""
    return Path(__file__).resolve().parents[2]


def run_playbook(
    site_path: Path,
    hosts: list[str],
    *,
    playbook: str = "playbooks/site.yml",
    log_file: Path | None = None,
    extra_args: tuple[str, ...] = (),
) -> tuple[int, dict[str, HostRecap], str]:
    """Run ``playbook`` against ``hosts`` of the site; return exit code, recaps and output."""
    root = repo_root()
    exe = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or shutil.which(
        "ansible-playbook"
    )
    if exe is None:
        raise NotReady("ansible-playbook not found", hint="run ./scripts/install-deps")
    argv = [exe, "-i", str(site_path.parent), str(root / playbook), "--limit", ",".join(hosts)]
    argv += list(extra_args)
    env = {**os.environ, "ANSIBLE_CONFIG": str(root / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    res = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)
    output = res.stdout + res.stderr
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.write_text(output)
    return res.returncode, parse_recap(res.stdout), output
