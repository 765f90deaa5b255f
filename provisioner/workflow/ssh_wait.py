"""Waiting for a freshly installed host to answer SSH with the site's key."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from provisioner.exceptions import DeployError

SSH_OPTIONS = (
    "-o", "BatchMode=yes",
    "-o", "ConnectTimeout=5",
    # A re-imaged host has a new host key: pinning it here would fail every re-image.
    "-o", "StrictHostKeyChecking=no",
    "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR",
)  # fmt: skip


def ssh_command(address: str, user: str, key: Path | None, *remote: str) -> list[str]:
    """The ssh argv that runs ``remote`` on a host."""
    argv = ["ssh", *SSH_OPTIONS]
    if key is not None:
        argv += ["-i", str(key), "-o", "IdentitiesOnly=yes"]
    return [*argv, f"{user}@{address}", *remote]


def wait_for_ssh(
    address: str, user: str, key: Path | None, timeout_s: float, *, interval_s: float = 3.0
) -> float:
    """Block until ``ssh user@address true`` succeeds; return the seconds it took."""
    start = time.monotonic()
    last = ""
    while True:
        res = subprocess.run(
            ssh_command(address, user, key, "true"),
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if res.returncode == 0:
            return time.monotonic() - start
        lines = (res.stderr or res.stdout).strip().splitlines()
        last = lines[-1] if lines else f"exit {res.returncode}"
        if time.monotonic() - start > timeout_s:
            raise DeployError(
                f"no SSH to {user}@{address} after {timeout_s:.0f}s (last: {last})",
                hint="check the host's console log and that the deploy wrote the SSH key",
            )
        time.sleep(interval_s)
