"""Waiting on an event a test cannot be told of directly: poll the condition itself, with a
deadline that only stops a hung test (never one a loaded machine could reach)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# No event the suite waits for comes near this, even on a 2-core machine four times
# oversubscribed; reaching it means the awaited thing will not happen.
HANG_S = 120.0


def wait_until(cond: Callable[[], T], what: str, limit_s: float = HANG_S,
               poll_s: float = 0.02) -> T:
    """Returns cond()'s first truthy value; fails naming `what` if none comes within limit_s."""
    deadline = time.monotonic() + limit_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {limit_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on host:port now."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def wait_for_port(port: int, what: str, host: str = "127.0.0.1",
                  proc: subprocess.Popen[bytes] | None = None,
                  limit_s: float = HANG_S) -> None:
    """Waits until `what` listens on host:port; fails at once if `proc` (its process) exits."""

    def listening() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode} before listening")
        return port_open(host, port)

    wait_until(listening, f"{what} to listen on {host}:{port}", limit_s, poll_s=0.05)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel just handed out and nothing holds now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
