"""The node state store: one SQLite file per site, where the state package persists everything.

SQLite in WAL mode with full fsync: a crash (even ``kill -9`` mid-write) leaves the last
committed transaction and nothing half-written, and a re-run resumes from there. Every state
change writes the host row and its event in one transaction. Worker threads each get their own
connection; writers queue on SQLite's lock (``busy_timeout``). Read-only commands open the file
read-only (they never write, never wait for a writer, and work in a read-only directory). Who
may act on which host is the lock file's business (state/locks.py). A damaged, read-only or
full file is a typed error naming the file and the way out (state/errors.py).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from provisioner.exceptions import IllegalTransition, StateError
from provisioner.state.errors import damaged, full, state_unavailable, translate
from provisioner.state.locks import Lease, SiteLocks
from provisioner.state.schema import SCHEMA, SCHEMA_VERSION, STATE_CHANGE_KINDS, upgrade
from provisioner.state.states import NodeState, allowed
from provisioner.state.steps import Step, step_after

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

# Health runs kept whole per host (a golden streak and the last reports read them); older runs
# keep their verdict for KEEP_DAYS (incidents over 30 days), then go. Events that are not state
# changes are kept KEEP_DAYS; state changes forever.
KEEP_RUNS = 50
KEEP_DAYS = 30.0

_HOST_COLUMNS = "name, state, reason, last_error, facts, updated_at, step, goal"

P = ParamSpec("P")
R = TypeVar("R")


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
    step: Step = Step.NONE  # the last step finished since its current install began
    goal: Step = Step.NONE  # the step the run that started that install aimed at

    @property
    def unfinished(self) -> bool:
        """Whether the run that installed this host stopped before reaching its goal."""
        return bool(self.goal) and self.step != self.goal


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
    """One health-check run of one host (``results`` empty once retention summarised it)."""

    run_id: str
    host: str
    ts: datetime
    verdict: str
    results: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class PruneReport:
    """What a retention pass removed."""

    runs_deleted: int
    runs_summarised: int
    events_deleted: int


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def _guarded(
    action: str,
) -> Callable[[Callable[Concatenate[StateStore, P], R]], Callable[Concatenate[StateStore, P], R]]:
    """Turn SQLite's and the filesystem's errors into the store's typed errors."""

    def wrap(func: Callable[Concatenate[StateStore, P], R]) -> Callable[Concatenate[StateStore, P], R]:
        @functools.wraps(func)
        def run(self: StateStore, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return func(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise translate(self.path, exc, action) from None
            except OSError as exc:
                raise state_unavailable(self.path, exc, action) from None

        return run

    return wrap


class StateStore:
    """Per-site SQLite store of host states, facts, events and health results."""

    def __init__(self, path: Path | str, *, site: str | None = None, readonly: bool = False) -> None:
        self.path = Path(path)
        self.site = site or self.path.stem
        self.readonly = readonly
        self._local = threading.local()
        self._lease: Lease | None = None
        self._columns = _HOST_COLUMNS
        self._open()

    @classmethod
    def for_site(cls, site: Site | str, *, readonly: bool = False) -> StateStore:
        """The store of a site, in the default state directory (``readonly``: for commands
        that only read; a site without a state file reads as empty)."""
        name = site if isinstance(site, str) else site.name
        return cls(default_state_dir() / f"{name}.sqlite", site=name, readonly=readonly)

    # -- connections and transactions -------------------------------------------------------

    @_guarded("open the state file")
    def _open(self) -> None:
        self._refuse_empty()
        if self.readonly:
            conn = self._conn()
            cols = {r[1] for r in conn.execute("PRAGMA table_info(hosts)")}
            if "step" not in cols:  # a file an older provisioner wrote, read as it is
                self._columns = _HOST_COLUMNS.replace("step, goal", "'' AS step, '' AS goal")
            self._check_version(conn)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._conn()
        conn.executescript(SCHEMA)
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            version = self._check_version(c)
            if version < SCHEMA_VERSION:
                upgrade(c, version)
                c.execute(
                    "UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),)
                )

    def _refuse_empty(self) -> None:
        """A state file cut to nothing would read as a site with no hosts installed: every host
        would look new. Refuse it rather than start over silently."""
        wal = self.path.with_name(self.path.name + "-wal")
        if (
            self.path.is_file()
            and self.path.stat().st_size == 0
            and not (wal.is_file() and wal.stat().st_size > 0)
        ):
            raise damaged(self.path, "the file is empty: truncated?", "read the site's state")

    def _check_version(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise StateError(
                f"state file {self.path} has schema version {version}, newer than this "
                f"provisioner ({SCHEMA_VERSION})",
                hint="upgrade provisioner",
            )
        return version

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect_readonly() if self.readonly else self._connect()
            self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _connect_readonly(self) -> sqlite3.Connection:
        if not self.path.exists():
            # no state yet: an empty store, so that reading a new site shows every host enrolled
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.executescript(SCHEMA)
            return conn
        uri = self.path.resolve().as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # a read-only directory where SQLite cannot make the WAL index: no writer can be
            # writing there either, so the file is read as it stands
            conn.close()
            conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise StateError(
                "the state store was opened read-only", hint="a bug: open it writable to change it"
            )
        conn = self._conn()
        if conn.in_transaction:  # inside batch(): its one commit covers this write too
            yield conn
            return
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

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make the writes inside one transaction: one commit (one fsync) for many hosts' results,
        all or none of them kept."""
        with self._tx():
            yield

    def close(self) -> None:
        """Close this thread's connection and release the site lock if held."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        self.release_lock()

    # -- locks -------------------------------------------------------------------------------

    @property
    def locks(self) -> SiteLocks:
        """The site's lock file: the site lock, a lock per host, the deploy server's."""
        return SiteLocks(self.path.parent, self.site)

    @property
    def lock_path(self) -> Path:
        return self.locks.path

    def hold(self, command: str, hosts: Sequence[str], *, partial: bool = True) -> Lease:
        """Lock ``hosts`` for per-host work (the site shared); busy hosts are named in
        ``lease.busy`` (SiteLocked if all are, or any without ``partial``)."""
        return self.locks.acquire(command, hosts, partial=partial)

    def acquire_lock(self, command: str) -> None:
        """Hold the whole site (site-wide work); SiteLocked names the runs in the way."""
        if self._lease is None:
            self._lease = self.locks.acquire(command, site_wide=True)

    def release_lock(self) -> None:
        """Give up the site-wide lock."""
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    @contextmanager
    def orchestrator_lock(self, command: str) -> Iterator[StateStore]:
        """Hold the whole site for the duration of a command (site-wide work only: per-host
        work takes its hosts' locks with hold())."""
        self.acquire_lock(command)
        try:
            yield self
        finally:
            self.release_lock()

    # -- hosts --------------------------------------------------------------------------------

    @_guarded("enrol hosts")
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
        row = c.execute(f"SELECT {self._columns} FROM hosts WHERE name=?", (name,)).fetchone()
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
            step=Step(row[6]),
            goal=Step(row[7]),
        )

    @_guarded("read a host")
    def get(self, name: str) -> HostRecord:
        """The stored record of one host."""
        return self._record(self._row(self._conn(), name))

    @_guarded("read the hosts")
    def all(self) -> list[HostRecord]:
        """Every host the store knows, by name."""
        rows = self._conn().execute(f"SELECT {self._columns} FROM hosts ORDER BY name")
        return [self._record(tuple(r)) for r in rows]

    @_guarded("read the hosts")
    def records(self, names: Sequence[str]) -> list[HostRecord]:
        """The records of ``names`` in that order; a host the store has not met yet reads as
        enrolled (nothing is written: read-only commands use this)."""
        known = {r.name: r for r in self.all()}
        never = _dt(0)
        return [
            known.get(n) or HostRecord(n, NodeState.ENROLLED, "", None, {}, never) for n in names
        ]

    @_guarded("change a host's state")
    def transition(
        self,
        name: str,
        state: NodeState,
        *,
        reason: str = "",
        error: str | None = None,
        force: bool = False,
        data: dict[str, Any] | None = None,
        goal: Step | None = None,
    ) -> HostRecord:
        """Move a host to ``state``; IllegalTransition unless allowed (or ``force``).

        The host's finished step follows the state (steps.step_after); ``goal`` records what
        the run that starts an install aims at.
        """
        with self._tx() as c:
            return self._move(c, name, state, reason=reason, error=error, force=force,
                              data=data, goal=goal)  # fmt: skip

    def _move(
        self,
        c: sqlite3.Connection,
        name: str,
        state: NodeState,
        *,
        reason: str,
        error: str | None = None,
        force: bool = False,
        data: dict[str, Any] | None = None,
        goal: Step | None = None,
        restore: bool = False,
    ) -> HostRecord:
        now = time.time()
        row = self._row(c, name)
        src = NodeState(row[1])
        legal = allowed(src, state) or restore
        if not legal and not force:
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
        step = step_after(state, Step(row[6]))
        c.execute(
            "UPDATE hosts SET state=?, reason=?, last_error=?, updated_at=?, step=?, goal=? "
            "WHERE name=?",
            (state.value, reason, last_error, now, step.value,
             (goal if goal is not None else Step(row[7])).value, name),
        )  # fmt: skip
        payload = dict(data or {})
        if not legal:
            payload["forced"] = True
        if error:
            payload["error"] = error
        c.execute(
            "INSERT INTO events(host, ts, kind, from_state, to_state, message, data) "
            "VALUES (?, ?, 'transition', ?, ?, ?, ?)",
            (name, now, src.value, state.value, reason, json.dumps(payload) if payload else None),
        )
        return self._record(self._row(c, name))

    @_guarded("take a host out of maintenance")
    def leave_maintenance(self, name: str, *, reason: str = "") -> tuple[HostRecord, NodeState]:
        """Return a host in maintenance to the state it had before; also return that state.

        An install that maintenance cut short is no install: such a host returns as
        ``discovered`` (its next run installs it whole). A host whose earlier state is not in
        its history returns as ``discovered`` too.
        """
        with self._tx() as c:
            row = self._row(c, name)
            if NodeState(row[1]) is not NodeState.MAINTENANCE:
                raise IllegalTransition(f"host {name!r} is not in maintenance ({row[1]})")
            before = c.execute(
                "SELECT from_state FROM events WHERE host=? AND kind='transition' "
                "AND to_state='maintenance' AND from_state!='maintenance' ORDER BY id DESC LIMIT 1",
                (name,),
            ).fetchone()
            had = NodeState(before[0]) if before and before[0] else NodeState.DISCOVERED
            back = NodeState.DISCOVERED if had is NodeState.DEPLOYING else had
            rec = self._move(c, name, back, reason=reason or f"back from maintenance ({had.value})",
                             data={"restored": had.value}, restore=True)  # fmt: skip
            return rec, had

    @_guarded("record facts")
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
        ``provision rack`` think it needs installing again (nor does a failed host's finished
        step change: a configured host that failed stays one to ask about before reinstalling).
        """
        self.record_facts(name, facts)
        rec = self.get(name)
        if rec.state in (NodeState.ENROLLED, NodeState.FAILED, NodeState.DISCOVERED):
            return self.transition(name, NodeState.DISCOVERED, reason="BMC discovered")
        return rec

    @_guarded("record an event")
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

    @_guarded("read a host's history")
    def events(self, name: str, *, limit: int | None = None) -> list[Event]:
        """A host's history, oldest first (the last ``limit`` entries when given)."""
        self._row(self._conn(), name)
        sql = (
            "SELECT id, host, ts, kind, from_state, to_state, message, data FROM events "
            "WHERE host=? ORDER BY id DESC"
        )
        args: tuple[Any, ...] = (name,)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        rows = list(self._conn().execute(sql, args))
        rows.reverse()
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

    @_guarded("read a host's history")
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

    @_guarded("record a health run")
    def record_health(
        self,
        name: str,
        run_id: str,
        verdict: str,
        results: list[dict[str, Any]],
        *,
        keep_runs: int = KEEP_RUNS,
    ) -> None:
        """Store one health run of a host and an event that points at it; runs beyond the
        newest ``keep_runs`` keep only their verdict (the retention policy, per host)."""
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
            _summarise_runs(c, name, keep_runs)

    @_guarded("read health runs")
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

    @_guarded("read health runs")
    def latest_health(self, names: Sequence[str]) -> dict[str, HealthRun]:
        """The newest health run of each of ``names`` that has one, in one query."""
        rows = self._conn().execute(
            "SELECT run_id, host, ts, verdict, results FROM health_runs WHERE id IN "
            "(SELECT max(id) FROM health_runs GROUP BY host)"
        )
        wanted = set(names)
        return {
            r[1]: HealthRun(r[0], r[1], _dt(r[2]), r[3], json.loads(r[4]))
            for r in rows
            if r[1] in wanted
        }

    @_guarded("read health runs")
    def health_verdicts(
        self, names: Sequence[str], *, since: datetime
    ) -> dict[str, list[tuple[datetime, str]]]:
        """Each host's (time, verdict) of its runs since ``since``, oldest first: what a count
        of incidents needs, without reading any run's results."""
        out: dict[str, list[tuple[datetime, str]]] = {n: [] for n in names}
        rows = self._conn().execute(
            "SELECT host, ts, verdict FROM health_runs WHERE ts >= ? ORDER BY id",
            (since.timestamp(),),
        )
        for host, ts, verdict in rows:
            if host in out:
                out[host].append((_dt(ts), verdict))
        return out

    # -- retention and upkeep ------------------------------------------------------------------

    @_guarded("prune the state file")
    def prune(
        self, *, keep_runs: int = KEEP_RUNS, keep_days: float = KEEP_DAYS, now: float | None = None
    ) -> PruneReport:
        """Apply the retention policy to every host: whole health runs beyond the newest
        ``keep_runs`` keep only their verdict, and go once older than ``keep_days``; events
        older than ``keep_days`` go too, except state changes (kept forever). One transaction:
        all or nothing."""
        cutoff = (now if now is not None else time.time()) - keep_days * 86400
        runs = summarised = 0
        with self._tx() as c:
            for (host,) in c.execute("SELECT DISTINCT host FROM health_runs").fetchall():
                oldest_kept = _oldest_kept(c, host, keep_runs)
                summarised += _summarise_runs(c, host, keep_runs)
                runs += c.execute(
                    "DELETE FROM health_runs WHERE host=? AND id<? AND ts<?",
                    (host, oldest_kept, cutoff),
                ).rowcount
            marks = ", ".join("?" * len(STATE_CHANGE_KINDS))
            events = c.execute(
                f"DELETE FROM events WHERE ts < ? AND kind NOT IN ({marks})",
                (cutoff, *STATE_CHANGE_KINDS),
            ).rowcount
        return PruneReport(runs_deleted=runs, runs_summarised=summarised, events_deleted=events)

    @_guarded("compact the state file")
    def vacuum(self) -> int:
        """Rewrite the file without its free pages (after a prune); return bytes it shrank.

        VACUUM is one transaction (a crash leaves the old file whole) and needs room for a
        second copy: refused with the figures when the filesystem lacks it.
        """
        before = self.size_bytes()
        if shutil.disk_usage(self.path.parent).free < 2 * before + (16 << 20):
            raise full(self.path, f"compact it (VACUUM needs about {2 * before >> 20} MiB free)")
        conn = self._conn()
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return before - self.size_bytes()

    def size_bytes(self) -> int:
        """The state file's size with its write-ahead log."""
        wal = self.path.with_name(self.path.name + "-wal")
        return sum(p.stat().st_size for p in (self.path, wal) if p.is_file())

    @_guarded("check the state file")
    def integrity_problems(self) -> list[str]:
        """SQLite's integrity check: [] when the file is whole, else what is wrong."""
        rows = [r[0] for r in self._conn().execute("PRAGMA integrity_check(20)")]
        return [] if rows == ["ok"] else rows

    @_guarded("read the state file")
    def counts(self) -> dict[str, int]:
        """Rows per table: hosts, events, health_runs."""
        c = self._conn()
        return {t: int(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("hosts", "events", "health_runs")}  # fmt: skip

    @_guarded("copy the state file")
    def copy_to(self, target: sqlite3.Connection) -> None:
        """Copy the whole file into ``target`` as one consistent snapshot (SQLite's backup)."""
        self._conn().backup(target)

    def integrity_ok(self) -> bool:
        """Whether SQLite's integrity check passes."""
        return not self.integrity_problems()


def _oldest_kept(c: sqlite3.Connection, host: str, keep: int) -> int:
    """The id of the oldest of ``host``'s newest ``keep`` health runs (0: it has fewer)."""
    row = c.execute(
        "SELECT id FROM health_runs WHERE host=? ORDER BY id DESC LIMIT 1 OFFSET ?",
        (host, max(keep, 1) - 1),
    ).fetchone()
    return int(row[0]) if row else 0


def _summarise_runs(c: sqlite3.Connection, host: str, keep: int) -> int:
    """Drop the results of ``host``'s runs beyond the newest ``keep`` (their verdicts stay)."""
    return c.execute(
        "UPDATE health_runs SET results='[]' WHERE host=? AND id<? AND results!='[]'",
        (host, _oldest_kept(c, host, keep)),
    ).rowcount
