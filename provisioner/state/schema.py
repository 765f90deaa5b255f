"""The state file's tables, and the upgrade of a file written by an older provisioner."""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 2

# Events that change a host's state: kept forever (a retention policy drops the rest).
STATE_CHANGE_KINDS = ("transition", "enrolled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    last_error TEXT,
    facts TEXT NOT NULL DEFAULT '{}',
    updated_at REAL NOT NULL,
    step TEXT NOT NULL DEFAULT '',
    goal TEXT NOT NULL DEFAULT ''
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
-- Events are an append-only log: never edited; only events that are not state changes may
-- be dropped, by the retention policy (`provision state prune`).
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_keep_state_changes BEFORE DELETE ON events
    WHEN OLD.kind IN ('transition', 'enrolled')
    BEGIN SELECT RAISE(ABORT, 'events are append-only: state changes are kept'); END;
"""

# What each state says about the last step a host finished, for files from before steps were
# recorded (a failed host is read from its history below).
_STEP_OF_STATE = {"deployed": "installed", "configured": "configured", "validated": "configured"}


def upgrade(conn: sqlite3.Connection, version: int) -> None:
    """Bring a version-1 file to this version, inside the caller's write transaction."""
    if version < 2:
        conn.execute("ALTER TABLE hosts ADD COLUMN step TEXT NOT NULL DEFAULT ''")
        conn.execute("ALTER TABLE hosts ADD COLUMN goal TEXT NOT NULL DEFAULT ''")
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        for name, state in conn.execute("SELECT name, state FROM hosts").fetchall():
            step = _STEP_OF_STATE.get(state)
            if step is None and state == "failed":
                step = _step_from_history(conn, name)
            if step:
                conn.execute("UPDATE hosts SET step=? WHERE name=?", (step, name))


def _step_from_history(conn: sqlite3.Connection, name: str) -> str:
    """The step a failed host had finished, from its last install-related transition."""
    row = conn.execute(
        "SELECT to_state FROM events WHERE host=? AND kind='transition' AND to_state IN "
        "('enrolled', 'deploying', 'deployed', 'configured', 'validated') ORDER BY id DESC LIMIT 1",
        (name,),
    ).fetchone()
    return _STEP_OF_STATE.get(row[0], "") if row else ""
