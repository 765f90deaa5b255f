"""libvirtd and virtlogd: started by the lab when nothing runs them (there is no systemd on
the lab machines), and stopped by `lab down` only if the lab started them and no VM is left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from provisioner.exceptions import NotReady
from provisioner.lab.netns import pid_alive, terminate
from provisioner.lab.plan import STATE_ROOT

# Shared by every lab on the machine: which daemons a lab started (pid per daemon).
MARKER = STATE_ROOT / "daemons.json"
DAEMONS = ("virtlogd", "libvirtd")
SOCKET = Path("/var/run/libvirt/libvirt-sock")


def find_pids(name: str) -> list[int]:
    """Pids of processes whose executable name is ``name`` (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm == name and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def missing_tools(firmware: str = "bios") -> list[str]:
    """What the lab needs and this machine lacks, as "what (package)" strings."""
    needs = {
        "ip": "iproute2",
        "qemu-system-x86_64": "qemu-system-x86",
        "qemu-img": "qemu-utils",
        "libvirtd": "libvirt-daemon-system",
        "virtlogd": "libvirt-daemon-system",
    }
    missing = [f"{cmd} ({pkg})" for cmd, pkg in needs.items() if shutil.which(cmd) is None]
    if not Path("/usr/lib/ipxe/qemu/pxe-virtio.rom").exists():
        missing.append("/usr/lib/ipxe/qemu/pxe-virtio.rom (ipxe-qemu)")
    if firmware == "uefi" and not Path("/usr/share/OVMF/OVMF_CODE_4M.fd").exists():
        missing.append("/usr/share/OVMF/OVMF_CODE_4M.fd (ovmf)")
    if not Path("/dev/net/tun").exists():
        missing.append("/dev/net/tun (the tun kernel module)")
    try:
        import libvirt  # noqa: F401
    except ImportError:
        missing.append("Python module libvirt (pip: libvirt-python, needs libvirt-dev)")
    try:
        import sushy_tools  # noqa: F401
    except ImportError:
        missing.append("Python module sushy_tools (pip: sushy-tools)")
    return missing


def require_tools(firmware: str = "bios") -> None:
    """Raise NotReady listing everything the lab needs that is missing."""
    if os.geteuid() != 0:
        raise NotReady(
            "the virtual lab needs root (network namespaces, libvirt, qemu)",
            hint="run the command as root, e.g. `sudo provision lab up`",
        )
    missing = missing_tools(firmware)
    if missing:
        raise NotReady(
            "the lab cannot start; missing: " + ", ".join(missing),
            hint="run `sudo scripts/install-deps` on a Debian 12 machine",
        )


def _read_marker() -> dict[str, int]:
    try:
        data = json.loads(MARKER.read_text())
    except (OSError, ValueError):
        return {}
    return {k: int(v) for k, v in data.items() if isinstance(v, int)}


def _write_marker(data: dict[str, int]) -> None:
    MARKER.parent.mkdir(parents=True, exist_ok=True)
    if data:
        MARKER.write_text(json.dumps(data))
    elif MARKER.exists():
        MARKER.unlink()


def ensure_daemons(timeout_s: float = 30.0) -> list[str]:
    """Start virtlogd and libvirtd if they do not run; return the names the lab started."""
    started: list[str] = []
    marker = _read_marker()
    for d in ("/var/log/libvirt", "/var/run/libvirt"):
        Path(d).mkdir(parents=True, exist_ok=True)
    for name in DAEMONS:
        if find_pids(name):
            continue
        _start(name)
        started.append(name)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if SOCKET.exists() and all(find_pids(n) for n in DAEMONS):
            break
        time.sleep(0.2)
    else:
        raise NotReady(
            f"libvirtd did not come up (no {SOCKET})",
            hint="run `libvirtd` in a terminal to see why; logs are in /var/log/libvirt/",
        )
    for name in started:
        marker[name] = find_pids(name)[0]
    _write_marker(marker)
    return started


def _start(name: str) -> None:
    """Run ``name -d``; its output goes to a file, since a daemon that kept an inherited pipe
    open would make waiting for the output hang."""
    if shutil.which(name) is None:
        raise NotReady(f"{name} is not installed", hint="run `sudo scripts/install-deps`")
    with tempfile.TemporaryFile() as err:
        try:
            res = subprocess.run(
                [name, "-d"], stdin=subprocess.DEVNULL, stdout=err, stderr=err, timeout=60
            )
        except subprocess.TimeoutExpired as exc:
            raise NotReady(f"`{name} -d` did not return within 60 s") from exc
        if res.returncode != 0:
            err.seek(0)
            detail = err.read().decode(errors="replace").strip().splitlines()
            raise NotReady(
                f"`{name} -d` failed with exit status {res.returncode}: "
                + (detail[-1] if detail else "no output"),
                hint=f"run `{name}` in a terminal to see why; logs are in /var/log/libvirt/",
            )


def started_by_lab() -> dict[str, int]:
    """The daemons a lab started and that still run (name -> pid)."""
    return {n: p for n, p in _read_marker().items() if pid_alive(p)}


def stop_lab_daemons(grace_s: float = 10.0) -> list[str]:
    """Stop the daemons a lab started (libvirtd first); return their names."""
    marker = _read_marker()
    stopped = []
    for name in reversed(DAEMONS):
        pid = marker.pop(name, None)
        if pid is None or not pid_alive(pid):
            continue
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm != name:  # the pid was reused by something else
            continue
        terminate([pid], grace_s=grace_s)
        stopped.append(name)
    _write_marker(marker)
    return stopped
