"""Helpers for code that works inside the lab's network namespace (deploy dnsmasq, captures).

Other areas use these instead of spelling ``ip netns exec`` themselves, so the namespace name
override ($PROVISIONER_LAB_NETNS) and the "is the lab up?" check live in one place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from provisioner.exceptions import NotReady, ProvisionerError
from provisioner.lab.plan import PROVISIONING_BRIDGE, lab_netns

NETNS_DIR = Path("/run/netns")


class CommandFailed(ProvisionerError):
    """A system command the lab depends on failed; carries its stderr."""


def netns_exists(name: str) -> bool:
    """Whether the named network namespace exists (``ip netns add`` made it)."""
    return (NETNS_DIR / name).exists()


def require_lab(netns: str | None = None) -> str:
    """Return the lab namespace name, or raise NotReady when the lab is not up."""
    name = netns or lab_netns()
    if os.geteuid() != 0:
        raise NotReady(
            "the virtual lab needs root (network namespaces, libvirt)",
            hint="run the command as root, e.g. with sudo",
        )
    if not netns_exists(name):
        raise NotReady(
            f"the lab network namespace {name!r} does not exist",
            hint="run `provision lab up` first (or set PROVISIONER_LAB_NETNS to the lab's name)",
        )
    if not _link_in_netns(name, PROVISIONING_BRIDGE):
        raise NotReady(
            f"the lab namespace {name!r} has no {PROVISIONING_BRIDGE} bridge (half-built lab)",
            hint="run `provision lab up` again to repair it",
        )
    return name


def _link_in_netns(netns: str, link: str) -> bool:
    res = subprocess.run(
        ["ip", "-n", netns, "link", "show", link], capture_output=True, text=True, check=False
    )
    return res.returncode == 0


def in_netns(argv: Sequence[str], netns: str | None = None) -> list[str]:
    """The argv that runs ``argv`` inside the lab namespace."""
    return ["ip", "netns", "exec", netns or lab_netns(), *argv]


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float | None = 120,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing output; raise CommandFailed (with its stderr) when asked."""
    if shutil.which(argv[0]) is None:
        raise NotReady(
            f"command not found: {argv[0]}",
            hint="run scripts/install-deps (as root) to install the lab's packages",
        )
    try:
        res = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            input=input_text,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"`{' '.join(argv)}` did not finish within {timeout} s") from exc
    if check and res.returncode != 0:
        detail = (res.stderr or res.stdout).strip().splitlines()
        raise CommandFailed(
            f"`{' '.join(argv)}` failed with exit status {res.returncode}: "
            + (detail[-1] if detail else "no output")
        )
    return res


def run_in_netns(
    argv: Sequence[str],
    *,
    netns: str | None = None,
    check: bool = True,
    timeout: float | None = 120,
) -> subprocess.CompletedProcess[str]:
    """Run a command inside the lab namespace (which must exist) and capture its output."""
    return run(in_netns(argv, require_lab(netns)), check=check, timeout=timeout)


def popen_in_netns(
    argv: Sequence[str], *, netns: str | None = None, **kwargs: Any
) -> subprocess.Popen[Any]:
    """Start a long-running process (dnsmasq, tcpdump) inside the lab namespace."""
    return subprocess.Popen(in_netns(argv, require_lab(netns)), **kwargs)


def netns_pids(netns: str) -> list[int]:
    """Process ids living in the namespace (``ip netns pids``); empty when it does not exist."""
    if not netns_exists(netns):
        return []
    res = subprocess.run(
        ["ip", "netns", "pids", netns], capture_output=True, text=True, check=False
    )
    return [int(p) for p in res.stdout.split() if p.isdigit()]


def kill_netns_processes(netns: str, *, grace_s: float = 5.0) -> list[int]:
    """Terminate every process inside the namespace (SIGTERM, then SIGKILL); return their ids."""
    pids = netns_pids(netns)
    terminate(pids, grace_s=grace_s)
    return pids


def terminate(pids: Sequence[int], *, grace_s: float = 5.0) -> None:
    """SIGTERM the processes, give them ``grace_s`` to exit, then SIGKILL the survivors."""
    import time

    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if pid_alive(pid):
            _signal(pid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the parenthesised command name.
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
