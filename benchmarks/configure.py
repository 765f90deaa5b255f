"""Configuring hosts after their install, at the size of a rack: pinning their SSH host keys.

A loopback fleet of real sshd daemons (provisioner/testing/sshfleet.py: 16 addresses per sshd,
127.1.x.y, all on lo: no traffic leaves this machine) stands for N freshly installed hosts. One
more address accepts connections and never answers: a host whose sshd hangs.

- before: the keys pinned one host after another, ``ssh-keyscan -T 30`` up to 3 attempts per
  host (what `provision rack` did before site.yml until #33);
- after: every host at once (``pin_host_keys``: ``ssh-keyscan -T 10``, one retry, 32 at a
  time), which is what the rack runner now does for each host as it comes up; the silent host is
  among them and fails with its reason.

Prints per size the wall time of both, and ends with one ``RESULT`` line:
``keys_N_before_s``, ``keys_N_after_s`` (the silent host included: it bounds the wall time at
2 x 10 s, whatever N) and ``silent_before_s`` (what the silent host alone cost before).

    python benchmarks/configure.py [--hosts 16 64 256] [--no-before]

Needs root (sshd's privilege separation) and openssh-server (scripts/deps).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.testing.sshfleet import SSHD, Recordings, SshFleet  # noqa: E402
from provisioner.workflow.configure import (  # noqa: E402
    KeyTarget,
    pin_host_keys,
    replace_known_hosts,
    scan_host_key,
)

SILENT = "127.2.0.1"  # outside the fleet's 127.1.x.y


@contextlib.contextmanager
def silent_host() -> Iterator[KeyTarget]:
    """An address that accepts TCP connections (the kernel's backlog) and never says a word."""
    with socket.socket() as s:
        s.bind((SILENT, 0))
        port = int(s.getsockname()[1])
        s.listen(64)
        yield KeyTarget("silent", SILENT, port)


def before(known: Path, targets: list[KeyTarget]) -> float:
    """The keys pinned as before: one host after another, -T 30, 3 attempts."""
    t0 = time.perf_counter()
    scanned = {}
    for t in targets:
        lines = scan_host_key(t, timeout_s=30, attempts=3)
        if lines:
            scanned[t.known_hosts_name] = lines
    replace_known_hosts(known, scanned)
    return time.perf_counter() - t0


def after(known: Path, targets: list[KeyTarget]) -> tuple[float, list[str]]:
    """The keys pinned as now: all hosts at once, -T 10, one retry."""
    t0 = time.perf_counter()
    missing = pin_host_keys(known, targets)
    return time.perf_counter() - t0, missing


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--no-before", action="store_true", help="skip the sequential runs")
    args = p.parse_args()
    if os.geteuid() != 0 or not SSHD.exists() or shutil.which("ssh-keyscan") is None:
        print("needs root, /usr/sbin/sshd and ssh-keyscan (./scripts/install-deps)",
              file=sys.stderr)
        return 5
    if not all(1 <= n <= 4000 for n in args.hosts):
        p.error("--hosts: 1 to 4000")
    result: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-configure-") as tmp:
        work = Path(tmp)
        with silent_host() as silent:
            for n in args.hosts:
                with SshFleet(work / f"fleet-{n}", n, Recordings()) as fleet:
                    hosts = [KeyTarget(f"host{i:03d}", a, fleet.port)
                             for i, a in enumerate(fleet.addresses)]
                    if not args.no_before:
                        wall = before(work / f"known-{n}-before", hosts)
                        result[f"keys_{n}_before_s"] = f"{wall:.2f}"
                        print(f"{n} hosts, one after another: {wall:.1f} s", file=sys.stderr)
                    wall, missing = after(work / f"known-{n}-after", [*hosts, silent])
                    result[f"keys_{n}_after_s"] = f"{wall:.2f}"
                    pinned = len((work / f"known-{n}-after").read_text().splitlines())
                    print(f"{n} hosts + 1 silent, at once: {wall:.1f} s, {pinned} keys pinned, "
                          f"{len(missing)} without: {'; '.join(missing)}", file=sys.stderr)
                    if pinned != n or [m.split(":")[0] for m in missing] != ["silent"]:
                        print("error: not every host was pinned", file=sys.stderr)
                        return 1
            if not args.no_before:
                t0 = time.perf_counter()
                scan_host_key(silent, timeout_s=30, attempts=3)
                result["silent_before_s"] = f"{time.perf_counter() - t0:.2f}"
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
