"""Who may act on a site and its hosts at once: a site lock, a lock per host, and the deploy
server's lock, all byte ranges of one lock file beside the site's state.

- per-host work (reimage, power, bios apply, firmware update, health of a host) holds the site
  lock *shared* and an exclusive lock on each of its hosts: runs on different hosts of one
  site go on at once, a second run on the same host is refused;
- site-wide work (rewriting the lab's site file, restoring the state file) holds the site lock
  *exclusive*: it waits for no one and is refused while any per-host run is going on;
- the embedded deploy server (its HTTP port, dnsmasq and its reservations) is one per site: a run
  that needs it waits for the run that has it, while holding its own hosts.

Locks are Linux open-file-description locks (``F_OFD_SETLK``): one file descriptor per run
whatever the number of hosts (4,096 per-host files would exceed the usual open-files limit),
owned by that descriptor (two runs in one process exclude each other, closing another
descriptor of the file releases nothing), and released by the kernel when the process dies.
Each run also writes a small record (command, pid, user, since, hosts) under ``<site>.runs/``,
itself locked while the run lives, so that a refusal names who holds the host.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import hashlib
import json
import os
import socket
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from provisioner.exceptions import SiteLocked
from provisioner.state.errors import state_unavailable

SITE_BYTE = 0
DEPLOY_SERVER_BYTE = 1
HOST_BASE = 1 << 32  # hosts' bytes lie above the fixed ones
_HOST_SPAN = 1 << 56  # a 56-bit name hash: no two of 10^5 hosts collide in practice

# struct flock on Linux (x86_64, aarch64): short l_type, short l_whence, off_t l_start,
# off_t l_len, pid_t l_pid (native alignment pads to 32 bytes)
_FLOCK = "hhqqi4x"


def host_byte(name: str) -> int:
    """The byte of the lock file that stands for host ``name`` (stable across processes)."""
    digest = hashlib.blake2b(name.encode(), digest_size=7).digest()
    return HOST_BASE + int.from_bytes(digest, "big") % _HOST_SPAN


def _ofd(fd: int, kind: int, start: int, *, wait: bool = False) -> bool:
    """Take (or with F_UNLCK release) a lock on byte ``start``; False if another holds it."""
    cmd = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
    try:
        fcntl.fcntl(fd, cmd, struct.pack(_FLOCK, kind, os.SEEK_SET, start, 1, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _is_locked(fd: int, start: int) -> bool:
    """Whether another open file description holds a lock on byte ``start``."""
    probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, 1, 0)
    got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe)
    return struct.unpack(_FLOCK, got)[0] != fcntl.F_UNLCK


@dataclass(frozen=True)
class Holder:
    """A run that holds locks of a site, as its record says."""

    command: str
    pid: int
    host: str
    user: str
    since: float
    hosts: tuple[str, ...] = ()
    site_wide: bool = False
    deploy_server: bool = False

    def describe(self) -> str:
        """e.g. "`provision reimage gpu-a` (pid 123 on laptop, user ops, since 12:00:03 UTC)"."""
        since = datetime.fromtimestamp(self.since, tz=UTC).strftime("%H:%M:%S UTC")
        return (
            f"`{self.command}` (pid {self.pid} on {self.host}, user {self.user}, since {since})"
        )


UNKNOWN_HOLDER = "another run (its record could not be read)"


@dataclass
class Lease:
    """The locks one run holds; release() (or the process's end) gives them back."""

    locks: SiteLocks
    command: str
    fd: int
    record_fd: int
    record_path: Path
    site_wide: bool
    hosts: list[str] = field(default_factory=list)
    busy: dict[str, str] = field(default_factory=dict)  # host -> who holds it
    deploy_server: bool = False
    locks_since: float = field(default_factory=time.time)

    def hold_deploy_server(self, on_wait: Callable[[str], None] | None = None) -> None:
        """Hold the site's deploy server; wait (calling ``on_wait(holder)`` once) while another
        run has it. Waiting holds nothing another run could need: no deadlock."""
        if self.deploy_server:
            return
        if not _ofd(self.fd, fcntl.F_WRLCK, DEPLOY_SERVER_BYTE):
            if on_wait is not None:
                held_by = self.locks.holders(deploy_server=True)
                on_wait(held_by[0].describe() if held_by else UNKNOWN_HOLDER)
            _ofd(self.fd, fcntl.F_WRLCK, DEPLOY_SERVER_BYTE, wait=True)
        self.deploy_server = True
        self._write_record()

    def release_deploy_server(self) -> None:
        """Let the next run start its deploy server (this run's hosts stay held)."""
        if self.deploy_server:
            _ofd(self.fd, fcntl.F_UNLCK, DEPLOY_SERVER_BYTE)
            self.deploy_server = False
            self._write_record()

    def release_hosts(self, names: Iterable[str]) -> None:
        """Give back some hosts before the run ends (they are done)."""
        for name in set(names) & set(self.hosts):
            _ofd(self.fd, fcntl.F_UNLCK, host_byte(name))
            self.hosts.remove(name)
        self._write_record()

    def release(self) -> None:
        """Give back every lock of this run (idempotent)."""
        if self.fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            self.record_path.unlink()
        os.close(self.record_fd)
        os.close(self.fd)  # closing the description drops all its byte locks at once
        self.fd = self.record_fd = -1

    def _write_record(self) -> None:
        doc = {
            "command": self.command,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "user": _user(),
            "since": self.locks_since,
            "hosts": sorted(self.hosts),
            "site_wide": self.site_wide,
            "deploy_server": self.deploy_server,
        }
        data = json.dumps(doc).encode()
        try:
            os.ftruncate(self.record_fd, 0)
            os.pwrite(self.record_fd, data, 0)
        except OSError as exc:  # a full disk: the locks hold, only the names are missing
            if exc.errno != errno.ENOSPC:
                raise

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class SiteLocks:
    """The lock file of one site (``<state dir>/<site>.lock``) and its run records."""

    def __init__(self, state_dir: Path, site: str) -> None:
        self.site = site
        self.path = state_dir / f"{site}.lock"
        self.runs_dir = state_dir / f"{site}.runs"

    # -- taking locks -----------------------------------------------------------------------

    def acquire(
        self,
        command: str,
        hosts: Sequence[str] = (),
        *,
        site_wide: bool = False,
        partial: bool = True,
    ) -> Lease:
        """Lock the site (shared, or exclusive with ``site_wide``) and each of ``hosts``.

        Hosts another run holds are left out and named in ``lease.busy`` when ``partial``;
        SiteLocked when the site itself is held against us, when every host is busy, or (not
        ``partial``) when any is. Never waits.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise state_unavailable(self.path, exc, "lock the site") from None
        try:
            lease = self._lease(fd, command, hosts, site_wide=site_wide, partial=partial)
        except BaseException:
            os.close(fd)
            raise
        return lease

    def _lease(
        self, fd: int, command: str, hosts: Sequence[str], *, site_wide: bool, partial: bool
    ) -> Lease:
        if not _ofd(fd, fcntl.F_WRLCK if site_wide else fcntl.F_RDLCK, SITE_BYTE):
            raise self._refusal(command, site_wide=site_wide)
        held: list[str] = []
        busy: list[str] = []
        for name in dict.fromkeys(hosts):
            (held if _ofd(fd, fcntl.F_WRLCK, host_byte(name)) else busy).append(name)
        if busy and (not partial or not held):
            raise self._busy_refusal(busy, total=len(held) + len(busy))
        record_fd, record_path = self._new_record()
        lease = Lease(self, command, fd, record_fd, record_path, site_wide, held)
        try:
            lease._write_record()
        except BaseException:
            lease.release()
            raise
        if busy:
            who = self._who_holds(busy)
            lease.busy = {name: who.get(name, UNKNOWN_HOLDER) for name in busy}
        return lease

    def _new_record(self) -> tuple[int, Path]:
        """A run record, locked before it becomes visible (a reader never takes a run being
        born for a dead one)."""
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.runs_dir / f".{os.getpid()}-{time.monotonic_ns()}.tmp"
            rfd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise state_unavailable(self.runs_dir, exc, "record this run") from None
        _ofd(rfd, fcntl.F_WRLCK, 0)
        final = tmp.with_name(tmp.name[1:-4] + ".json")
        os.rename(tmp, final)
        return rfd, final

    # -- who holds what -----------------------------------------------------------------------

    def holders(self, *, deploy_server: bool = False) -> list[Holder]:
        """The live runs of this site (only the deploy server's with ``deploy_server``);
        records of runs that died are removed on the way."""
        found: list[Holder] = []
        if not self.runs_dir.is_dir():
            return found
        for path in sorted(self.runs_dir.glob("*.json")):
            holder = self._read_live(path)
            if holder is not None and (holder.deploy_server or not deploy_server):
                found.append(holder)
        return found

    def _read_live(self, path: Path) -> Holder | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not _is_locked(fd, 0):
                with contextlib.suppress(OSError):
                    path.unlink()  # its run died (the kernel released its lock)
                return None
            doc = json.loads(os.pread(fd, 1 << 20, 0).decode() or "{}")
            return Holder(
                command=str(doc["command"]), pid=int(doc["pid"]), host=str(doc["host"]),
                user=str(doc["user"]), since=float(doc["since"]),
                hosts=tuple(doc.get("hosts") or ()), site_wide=bool(doc.get("site_wide")),
                deploy_server=bool(doc.get("deploy_server")),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, OSError):
            return None
        finally:
            os.close(fd)

    def _who_holds(self, names: Sequence[str]) -> dict[str, str]:
        wanted = set(names)
        who: dict[str, str] = {}
        for holder in self.holders():
            for name in wanted.intersection(holder.hosts):
                who[name] = holder.describe()
        return who

    def _refusal(self, command: str, *, site_wide: bool) -> SiteLocked:
        runs = self.holders()
        if site_wide:
            names = "; ".join(h.describe() for h in runs) or UNKNOWN_HOLDER
            return SiteLocked(
                f"site {self.site!r} is in use by {names}: `{command}` needs the whole site",
                hint="wait for those runs to finish, or stop them; read-only commands "
                "(status, history, hosts) work meanwhile",
            )
        wide = [h for h in runs if h.site_wide]
        names = "; ".join(h.describe() for h in wide) or UNKNOWN_HOLDER
        return SiteLocked(
            f"site {self.site!r} is being changed as a whole by {names}",
            hint="wait for it to finish, or stop it; read-only commands (status, history, "
            "hosts) work meanwhile",
        )

    def _busy_refusal(self, busy: Sequence[str], *, total: int) -> SiteLocked:
        who = self._who_holds(busy)
        lines = "; ".join(f"{n}: {who.get(n, UNKNOWN_HOLDER)}" for n in busy[:5])
        more = f" (and {len(busy) - 5} more)" if len(busy) > 5 else ""
        what = "the host is" if total == 1 else f"{len(busy)} of the {total} hosts are"
        return SiteLocked(
            f"{what} in use by another run: {lines}{more}",
            hint="wait for it to finish, or name other hosts; read-only commands (status, "
            "history, hosts) work meanwhile",
        )
