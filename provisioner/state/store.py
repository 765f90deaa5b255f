"""The node state store: one SQLite file per site, the only module that persists anything.

SQLite in WAL mode with full fsync: a crash (even ``kill -9`` mid-write) leaves the last
committed transaction and nothing half-written, and a re-run resumes from there. Every state
change writes the host row and its event in one transaction. Worker threads each get their own
connection; writers queue on SQLite's lock (``busy_timeout``). One orchestrator per site holds
an exclusive ``flock`` on a lock file beside the database; the kernel drops it if the process dies.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.exceptions import IllegalTransition, SiteLocked, StateError
from provisioner.state.states import NodeState, allowed

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    last_error TEXT,
    facts TEXT NOT NULL DEFAULT '{}',
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT,
    message TEXT NOT NULL DEFAULT '',
    data TEXT
);
CREATE INDEX IF NOT EXISTS events_host ON events(host, id);
CREATE TABLE IF NOT EXISTS health_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    run_id TEXT NOT NULL,
    ts REAL NOT NULL,
    verdict TEXT NOT NULL,
    results TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS health_host ON health_runs(host, id);
-- Events are an append-only log: refuse edits at the database level too.
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""


def default_state_dir() -> Path:
    """Where state files live unless PROVISIONER_STATE_DIR says otherwise (outside git)."""
    env = os.environ.get("PROVISIONER_STATE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "provisioner"


@dataclass(frozen=True)
class HostRecord:
    """A host as the store knows it."""

    name: str
    state: NodeState
    reason: str
    last_error: str | None
    facts: dict[str, Any]
    updated_at: datetime


@dataclass(frozen=True)
class Event:
    """One entry of a host's append-only history."""

    id: int
    host: str
    ts: datetime
    kind: str
    from_state: NodeState | None
    to_state: NodeState | None
    message: str
    data: dict[str, Any] | None


@dataclass(frozen=True)
class HealthRun:
    """One health-check run of one host."""

    run_id: str
    host: str
    ts: datetime
    verdict: str
    results: list[dict[str, Any]] = field(default_factory=list)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


class StateStore:
    """Per-site SQLite store of host states, facts, events and health results."""

    def __init__(self, path: Path | str, *, site: str | None = None) -> None:
        self.path = Path(path)
        self.site = site or self.path.stem
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._lock_fd: int | None = None
        conn = self._conn()
        conn.executescript(_SCHEMA)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        version = int(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StateError(
                f"state file {self.path} has schema version {version}, newer than this "
                f"provisioner ({SCHEMA_VERSION})",
                hint="upgrade provisioner",
            )

    @classmethod
    def for_site(cls, site: Site | str) -> StateStore:
        """The store of a site, in the default state directory."""
        name = site if isinstance(site, str) else site.name
        return cls(default_state_dir() / f"{name}.sqlite", site=name)

    # -- connections and transactions -------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        # IMMEDIATE takes the write lock up front, so concurrent writers queue instead of
        # failing with "database is locked" on upgrade from a read lock.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection and release the orchestrator lock if held."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        self.release_lock()

    # -- the orchestrator lock ---------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.path.with_suffix(".lock")

    def acquire_lock(self, command: str) -> None:
        """Become the site's only orchestrator; SiteLocked names the holder otherwise."""
        if self._lock_fd is not None:
            return
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = "another process"
            try:
                info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
                since = datetime.fromtimestamp(info["since"], tz=UTC).strftime("%H:%M:%S UTC")
                holder = (
                    f"`{info['command']}` (pid {info['pid']} on {info['host']}, user "
                    f"{info['user']}, since {since})"
                )
            except (ValueError, KeyError, OSError):
                pass
            os.close(fd)
            raise SiteLocked(
                f"site {self.site!r} is being run by {holder}",
                hint="wait for it to finish, or stop it; read-only commands (status, history) "
                "work meanwhile",
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "user": getpass.getuser(),
            "command": command,
            "since": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._lock_fd = fd

    def release_lock(self) -> None:
        """Give up the orchestrator lock."""
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextmanager
    def orchestrator_lock(self, command: str) -> Iterator[StateStore]:
        """Hold the site's orchestrator lock for the duration of a command."""
        self.acquire_lock(command)
        try:
            yield self
        finally:
            self.release_lock()

    # -- hosts --------------------------------------------------------------------------------

    def ensure_hosts(self, names: Sequence[str]) -> None:
        """Enrol hosts the store does not know yet (state ``enrolled``)."""
        now = time.time()
        with self._tx() as c:
            for name in names:
                cur = c.execute(
                    "INSERT OR IGNORE INTO hosts(name, state, updated_at) VALUES (?, ?, ?)",
                    (name, NodeState.ENROLLED.value, now),
                )
                if cur.rowcount:
                    c.execute(
                        "INSERT INTO events(host, ts, kind, to_state, message) "
                        "VALUES (?, ?, 'enrolled', ?, 'added from the inventory')",
                        (name, now, NodeState.ENROLLED.value),
                    )

    def _row(self, c: sqlite3.Connection, name: str) -> tuple[Any, ...]:
        row = c.execute(
            "SELECT name, state, reason, last_error, facts, updated_at FROM hosts WHERE name=?",
            (name,),
        ).fetchone()
        if row is None:
            raise StateError(
                f"host {name!r} is not in the state store of site {self.site!r}",
                hint="it is enrolled by the first command that targets it (e.g. `provision discover`)",
            )
        return tuple(row)

    @staticmethod
    def _record(row: tuple[Any, ...]) -> HostRecord:
        return HostRecord(
            name=row[0],
            state=NodeState(row[1]),
            reason=row[2],
            last_error=row[3],
            facts=json.loads(row[4]),
            updated_at=_dt(row[5]),
        )

    def get(self, name: str) -> HostRecord:
        """The stored record of one host."""
        return self._record(self._row(self._conn(), name))

    def all(self) -> list[HostRecord]:
        """Every host the store knows, by name."""
        rows = self._conn().execute(
            "SELECT name, state, reason, last_error, facts, updated_at FROM hosts ORDER BY name"
        )
        return [self._record(tuple(r)) for r in rows]

    def transition(
        self,
        name: str,
        state: NodeState,
        *,
        reason: str = "",
        error: str | None = None,
        force: bool = False,
        data: dict[str, Any] | None = None,
    ) -> HostRecord:
        """Move a host to ``state``; IllegalTransition unless allowed (or ``force``)."""
        now = time.time()
        with self._tx() as c:
            row = self._row(c, name)
            src = NodeState(row[1])
            if not allowed(src, state) and not force:
                hint = None
                if src == NodeState.MAINTENANCE:
                    hint = (
                        f"{name} is in maintenance ({row[2] or 'no reason given'}); take it out "
                        "with `provision maintenance --off` or pass --force"
                    )
                raise IllegalTransition(
                    f"host {name!r} cannot go from {src.value} to {state.value}", hint=hint
                )
            last_error = error if state == NodeState.FAILED else None
            c.execute(
                "UPDATE hosts SET state=?, reason=?, last_error=?, updated_at=? WHERE name=?",
                (state.value, reason, last_error, now, name),
            )
            payload = dict(data or {})
            if force and not allowed(src, state):
                payload["forced"] = True
            if error:
                payload["error"] = error
            c.execute(
                "INSERT INTO events(host, ts, kind, from_state, to_state, message, data) "
                "VALUES (?, ?, 'transition', ?, ?, ?, ?)",
                (name, now, src.value, state.value, reason, json.dumps(payload) if payload else None),
            )
            return self._record(self._row(c, name))

    def record_facts(self, name: str, facts: dict[str, Any]) -> None:
        """Merge ``facts`` into the host's facts (top-level keys replace)."""
        now = time.time()
        with self._tx() as c:
            row = self._row(c, name)
            merged = json.loads(row[4])
            merged.update(facts)
            c.execute(
                "UPDATE hosts SET facts=?, updated_at=? WHERE name=?",
                (json.dumps(merged, default=str, sort_keys=True), now, name),
            )
            c.execute(
                "INSERT INTO events(host, ts, kind, message, data) VALUES (?, ?, 'facts', ?, ?)",
                (name, now, "facts updated: " + ", ".join(sorted(facts)), None),
            )

    def record_discovery(self, name: str, facts: dict[str, Any]) -> HostRecord:
        """Store discovered facts; an enrolled or failed host becomes ``discovered``.

        A host that is already deployed keeps its state: re-reading its BMC must not make
        ``provision rack`` think it needs installing again.
        """
        self.record_facts(name, facts)
        rec = self.get(name)
        if rec.state in (NodeState.ENROLLED, NodeState.FAILED, NodeState.DISCOVERED):
            return self.transition(name, NodeState.DISCOVERED, reason="BMC discovered")
        return rec

    def record_event(
        self, name: str, kind: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        """Append an event to a host's history."""
        with self._tx() as c:
            self._row(c, name)
            c.execute(
                "INSERT INTO events(host, ts, kind, message, data) VALUES (?, ?, ?, ?, ?)",
                (name, time.time(), kind, message, json.dumps(data, default=str) if data else None),
            )

    def events(self, name: str, *, limit: int | None = None) -> list[Event]:
        """A host's history, oldest first (the last ``limit`` entries when given)."""
        self._row(self._conn(), name)
        sql = (
            "SELECT id, host, ts, kind, from_state, to_state, message, data FROM events "
            "WHERE host=? ORDER BY id"
        )
        rows = list(self._conn().execute(sql, (name,)))
        if limit is not None:
            rows = rows[-limit:]
        return [
            Event(
                id=r[0],
                host=r[1],
                ts=_dt(r[2]),
                kind=r[3],
                from_state=NodeState(r[4]) if r[4] else None,
                to_state=NodeState(r[5]) if r[5] else None,
                message=r[6],
                data=json.loads(r[7]) if r[7] else None,
            )
            for r in rows
        ]

    def last_entered(self, name: str, states: Iterable[NodeState]) -> datetime | None:
        """When the host last moved into one of ``states`` (None if it never did)."""
        wanted = [s.value for s in states]
        row = self._conn().execute(
            "SELECT ts FROM events WHERE host=? AND kind='transition' AND to_state IN "
            f"({', '.join('?' * len(wanted))}) ORDER BY id DESC LIMIT 1",
            (name, *wanted),
        ).fetchone()
        return _dt(row[0]) if row else None

    # -- health ------------------------------------------------------------------------------

    def record_health(
        self, name: str, run_id: str, verdict: str, results: list[dict[str, Any]]
    ) -> None:
        """Store one health run of a host, and an event that points at it."""
        now = time.time()
        with self._tx() as c:
            self._row(c, name)
            c.execute(
                "INSERT INTO health_runs(host, run_id, ts, verdict, results) VALUES (?, ?, ?, ?, ?)",
                (name, run_id, now, verdict, json.dumps(results, default=str)),
            )
            c.execute(
                "INSERT INTO events(host, ts, kind, message, data) VALUES (?, ?, 'health', ?, ?)",
                (name, now, f"health run {run_id}: {verdict}", None),
            )

    def health_history(self, name: str, limit: int = 20) -> list[HealthRun]:
        """A host's last ``limit`` health runs, newest first."""
        rows = self._conn().execute(
            "SELECT run_id, host, ts, verdict, results FROM health_runs WHERE host=? "
            "ORDER BY id DESC LIMIT ?",
            (name, limit),
        )
        return [
            HealthRun(run_id=r[0], host=r[1], ts=_dt(r[2]), verdict=r[3], results=json.loads(r[4]))
            for r in rows
        ]

    def integrity_ok(self) -> bool:
        """Whether SQLite's integrity check passes."""
        return self._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
