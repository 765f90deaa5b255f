"""A fleet of SSH "hosts" on loopback for tests and benchmarks/health.py.

Real OpenSSH servers listen on 127.1.x.y addresses (one sshd per 16 addresses, sshd's limit),
each address one host; every session's PATH starts with a shim folder whose ``nvidia-smi``,
``lspci``, ``ibstat``, ``dmesg``... print recorded outputs of a real HGX host. Nothing leaves
loopback. Start it with ``with SshFleet(...) as fleet:``; it stops what it started.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from provisioner.testing.redfish_peers import free_port

SSHD = Path("/usr/sbin/sshd")
PER_DAEMON = 16  # sshd's MAX_LISTEN_SOCKS
START_TIMEOUT_S = 60.0


def fleet_addresses(count: int) -> list[str]:
    """127.1.0.1, 127.1.0.2, ... (never 127.0.0.1, which other tests listen on)."""
    return [f"127.1.{i // 250}.{i % 250 + 1}" for i in range(count)]


@dataclass
class Recordings:
    """What the shims print: a file per command (None: the tool is not installed)."""

    nvsmi: Path | None = None
    nvlink_status: Path | None = None
    nvlink_errors: Path | None = None
    topo: Path | None = None
    lspci: Path | None = None
    ibstat: Path | None = None
    kernel_log: Path | None = None
    dcgm_metrics: Path | None = None
    docker_info: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)  # tool name -> its whole shim script


def _shim(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


def _cat(file: Path | None) -> str:
    return f"exec cat {shlex.quote(str(file))}" if file else "exit 127"


def write_shims(folder: Path, rec: Recordings) -> None:
    """The shim commands for ``rec`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if rec.nvsmi or rec.nvlink_status or rec.topo:
        _shim(folder / "nvidia-smi", f"""case "$*" in
  "-q") {_cat(rec.nvsmi)} ;;
  "nvlink --status") {_cat(rec.nvlink_status)} ;;
  "nvlink -e") {_cat(rec.nvlink_errors)} ;;
  "topo -m") {_cat(rec.topo)} ;;
  *) echo "nvidia-smi (recorded): no recording for: $*" >&2; exit 2 ;;
esac""")
    if rec.lspci:
        _shim(folder / "lspci", _cat(rec.lspci))
    if rec.ibstat:
        _shim(folder / "ibstat", _cat(rec.ibstat))
    if rec.kernel_log:
        # dmesg --level=err... (the kernel.log check) prints nothing: the recording is judged by
        # the Xid check; a full kernel log read twice would be judged twice.
        _shim(folder / "dmesg", f'case "$*" in *--level*) exit 0 ;; *) {_cat(rec.kernel_log)} ;; esac')
    if rec.dcgm_metrics:
        _shim(folder / "curl", _cat(rec.dcgm_metrics))
    if rec.docker_info:
        _shim(folder / "docker", _cat(rec.docker_info))
    for name, body in rec.extra.items():
        _shim(folder / name, body)


def _listening(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


class SshFleet:
    """``count`` SSH hosts on loopback, served by ceil(count / 16) real sshd daemons."""

    def __init__(self, workdir: Path, count: int, recordings: Recordings,
                 *, log_level: str = "ERROR") -> None:
        if not SSHD.exists() or shutil.which("ssh-keygen") is None:
            raise RuntimeError("the SSH fleet needs openssh-server and openssh-client")
        self.dir = workdir
        self.addresses = fleet_addresses(count)
        self.recordings = recordings
        self.log_level = log_level
        self.port = 0
        self.client_key = workdir / "client_key"
        self.known_hosts = workdir / "known_hosts"
        self.shims = workdir / "shims"
        self.logs: list[Path] = []
        self._procs: list[subprocess.Popen[bytes]] = []

    def _config(self, index: int, addresses: list[str]) -> Path:
        d = self.dir
        cfg = d / f"sshd_config.{index}"
        listen = "".join(f"ListenAddress {a}\n" for a in addresses)
        cfg.write_text(
            f"Port {self.port}\n{listen}HostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
            f"PidFile {d}/sshd.{index}.pid\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
            # a whole fleet connects at once: sshd's default 10:30:100 would drop most of it
            "MaxStartups 1000:30:2000\n"
            f"SetEnv PATH={self.shims}:/usr/sbin:/usr/bin:/sbin:/bin\n"
            f"LogLevel {self.log_level}\n")
        return cfg

    def __enter__(self) -> SshFleet:
        d = self.dir
        d.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "client_key"):
            if not (d / key).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)],
                               check=True)
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        write_shims(self.shims, self.recordings)
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        self.port = free_port()
        try:
            for i in range(0, len(self.addresses), PER_DAEMON):
                group = self.addresses[i:i + PER_DAEMON]
                log = d / f"sshd.{i // PER_DAEMON}.log"
                self.logs.append(log)
                with log.open("wb") as out:
                    self._procs.append(subprocess.Popen(
                        [str(SSHD), "-D", "-e", "-f", str(self._config(i // PER_DAEMON, group))],
                        stdout=subprocess.DEVNULL, stderr=out))
            self._wait()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S  # a guard against hangs, not a pace
        for i, address in enumerate(self.addresses):
            proc = self._procs[i // PER_DAEMON]
            while not _listening(address, self.port):
                if proc.poll() is not None:
                    raise RuntimeError(f"sshd for {address} exited {proc.returncode}: "
                                       f"{self.logs[i // PER_DAEMON].read_text()[-500:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd did not listen on {address}:{self.port}")
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop every sshd this fleet started (and only those)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def site_yaml(self, *, profile: dict[str, object], health: dict[str, object],
                  name: str = "fleet") -> str:
        """A site file naming every fleet host (racks of 40, U1..40), reachable as root; every
        host has the profile ``fleet`` (``profile``: its keys, e.g. gpus, nvswitch)."""
        import yaml

        racks = []
        for r in range(0, len(self.addresses), 40):
            hosts = [{"u": i + 1, "vars": {"ansible_host": a, "ansible_port": self.port}}
                     for i, a in enumerate(self.addresses[r:r + 40])]
            racks.append({"name": f"r{r // 40 + 1}", "index": r // 40 + 1, "units": 42,
                          "location": {"room": "lab", "row": "A"},
                          "host_name_template": "node-{rack}-u{u:02d}",
                          "defaults": {"profile": "fleet",
                                       "bmc": {"vendor": "generic", "credentials": "fake"}},
                          "hosts": hosts})
        doc = {
            "site": name,
            "settings": {"ssh_user": "root", "ssh_private_key": str(self.client_key),
                         "golden_after": 2,
                         "health": {"known_hosts": str(self.known_hosts), **health}},
            "networks": {"provisioning": {"cidr": "198.18.0.0/16",
                                          "reserved": ["198.18.0.0-198.18.0.9"]},
                         "bmc": {"cidr": "198.19.0.0/16"}},
            "credentials": {"fake": {"username": "root",
                                     "password": {"env": "PROVISIONER_TEST_UNUSED"}}},
            "profiles": {"fleet": {"provisioning_nic": {"rule": "first-onboard-up"}, **profile}},
            "racks": racks,
        }
        return yaml.safe_dump(doc, sort_keys=False)

    def logins(self) -> int:
        """Authenticated SSH logins to the whole fleet, from the daemons' logs (log_level
        VERBOSE: "Accepted publickey for ..."; readiness probes connect without logging in).
        Not per address: a log names the client's port, and two connections to different
        addresses of one daemon can come from the same client port, so the line that would
        tie a login to its address is ambiguous (a test that counted per address flaked so)."""
        return sum(line.startswith("Accepted publickey")
                   for log in self.logs
                   for line in log.read_text(errors="replace").splitlines())
