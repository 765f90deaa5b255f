"""The lab's apt proxy: apt-cacher-ng on the root end of the lab veth.

Lab VMs have no route out of the machine; the only address outside the namespace they reach
is the uplink's root end (``plan.host_uplink_address``). apt on the VMs (cloud-init and the
`common` role set ``settings.apt_proxy``) goes through this proxy, which forwards to the
Debian archive only: requests for any other origin get 403 and HTTPS tunnels (CONNECT) are
refused, so a role that fetches from a vendor repository fails visibly instead of escaping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from provisioner.exceptions import NotReady, ProvisionerError
from provisioner.lab.netns import pid_alive, terminate
from provisioner.lab.plan import LabPlan

PORT = 3142
EXECUTABLE = "apt-cacher-ng"
SUPPORT_DIR = Path("/usr/lib/apt-cacher-ng")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
START_TIMEOUT_S = 20.0


class LabAptProxyError(ProvisionerError):
    """The lab's apt proxy (apt-cacher-ng) did not start or does not answer."""


@dataclass(frozen=True)
class AptProxy:
    """Where the lab's apt proxy listens and keeps its files."""

    address: str
    port: int
    root: Path  # <state dir>/aptproxy
    mirror: str

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    @property
    def conf_file(self) -> Path:
        return self.conf_dir / "acng.conf"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def pid_file(self) -> Path:
        return self.root / "pid"

    @property
    def start_log(self) -> Path:
        return self.log_dir / "start.log"


def debian_mirror() -> str:
    """The Debian archive the proxy forwards to: the one the lab image is built from."""
    mirror = os.environ.get("PROVISIONER_DEBIAN_MIRROR", "").strip() or DEFAULT_MIRROR
    return mirror.rstrip("/")


def apt_proxy(plan: LabPlan) -> AptProxy:
    """The apt proxy of the lab described by ``plan``."""
    return AptProxy(
        address=str(plan.host_uplink_address),
        port=PORT,
        root=plan.state_dir / "aptproxy",
        mirror=debian_mirror(),
    )


def config_text(proxy: AptProxy) -> str:
    """acng.conf: the Debian archive (and its security suite) as the only backends."""
    parts = urlsplit(proxy.mirror)
    base = f"{parts.netloc}{parts.path}"  # e.g. deb.debian.org/debian
    security = f"{parts.scheme}://{parts.netloc}{parts.path}-security/"
    prefixes = sorted({base, "deb.debian.org/debian", "ftp.debian.org/debian"})
    sec_prefixes = sorted(
        {
            f"{base}-security",
            "deb.debian.org/debian-security",
            "security.debian.org/debian-security",
        }
    )
    return (
        f"# written by `provision lab up` for {proxy.url}; rewritten on every `lab up`\n"
        f"Remap-debrep: {' '.join(prefixes)} ; {proxy.mirror}/\n"
        f"Remap-secdeb: {' '.join(sec_prefixes)} ; {security}\n"
        # Only the remapped Debian origins: another host in the request URL gets 403.
        "ForceManaged: 1\n"
        # No CONNECT tunnels (HTTPS repositories): nothing matches an empty host:port.
        "PassThroughPattern: ^$\n"
        "ExThreshold: 4\n"
    )


def argv(proxy: AptProxy) -> list[str]:
    """The daemon's command line: every per-lab path and the address on it.

    The paths are on the command line (not only in acng.conf) so that `lab down` finds a
    proxy left behind by a crash through its sweep of processes naming the state dir.
    """
    return [
        EXECUTABLE,
        "-c", str(proxy.conf_dir),
        "ForeGround=0",
        f"BindAddress={proxy.address}",
        f"Port={proxy.port}",
        f"CacheDir={proxy.cache_dir}",
        f"LogDir={proxy.log_dir}",
        f"PidFile={proxy.pid_file}",
        # No unix socket (its default path is shared by every instance), and without one a
        # failed TCP bind makes the daemon exit instead of running deaf.
        "SocketPath=",
        f"SupportDir={SUPPORT_DIR}",
    ]  # fmt: skip


def running_pid(proxy: AptProxy) -> int | None:
    """The pid of this lab's running proxy, or None."""
    try:
        pid = int(proxy.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if str(proxy.conf_dir).encode() in cmdline else None


def answers(proxy: AptProxy, *, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections on the proxy's address and port."""
    try:
        with socket.create_connection((proxy.address, proxy.port), timeout=timeout_s):
            return True
    except OSError:
        return False


def ensure(plan: LabPlan) -> int:
    """Start the lab's apt proxy, or keep the running one if nothing changed; return its pid."""
    proxy = apt_proxy(plan)
    if shutil.which(EXECUTABLE) is None:
        raise NotReady(
            f"{EXECUTABLE} is not installed (the lab VMs' apt proxy)",
            hint="run scripts/install-deps, or apt-get install apt-cacher-ng",
        )
    for d in (proxy.conf_dir, proxy.cache_dir, proxy.log_dir):
        d.mkdir(parents=True, exist_ok=True)
    text = config_text(proxy)
    changed = not proxy.conf_file.exists() or proxy.conf_file.read_text() != text
    if changed:
        proxy.conf_file.write_text(text)
    pid = running_pid(proxy)
    if pid is not None and not changed and _cmdline(pid) == argv(proxy) and answers(proxy):
        return pid
    stop(plan)
    return _start(proxy)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0")[:-1]]


def _start(proxy: AptProxy) -> int:
    proxy.pid_file.unlink(missing_ok=True)
    with open(proxy.start_log, "wb") as log:
        # The daemon forks and the parent exits; a file (not a pipe) takes its output, so no
        # open pipe end in the daemon keeps this call waiting.
        res = subprocess.run(
            argv(proxy), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, check=False
        )
    if res.returncode != 0:
        raise LabAptProxyError(
            f"{EXECUTABLE} did not start on {proxy.url} (exit {res.returncode}): "
            f"{_tail(proxy.start_log)}",
            hint=f"is port {proxy.port} taken (`ss -ltnp sport = :{proxy.port}`)? "
            f"logs: {proxy.log_dir}",
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        pid = running_pid(proxy)
        if pid is not None and answers(proxy):
            return pid
        time.sleep(0.2)
    raise LabAptProxyError(
        f"{EXECUTABLE} did not answer on {proxy.url} within {START_TIMEOUT_S:.0f} s: "
        f"{_tail(proxy.start_log)}",
        hint=f"logs: {proxy.log_dir}",
    )


def stop(plan: LabPlan, *, grace_s: float = 5.0) -> int | None:
    """Stop the lab's apt proxy if it runs; return the pid it had."""
    proxy = apt_proxy(plan)
    pid = running_pid(proxy)
    if pid is None:
        return None
    terminate([pid], grace_s=grace_s)
    proxy.pid_file.unlink(missing_ok=True)
    return pid


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return " | ".join(text[-lines:]) or "no output"
