"""How long the store keeps what: the newest health runs whole, older ones as verdicts only for
30 days, events other than state changes for 30 days, state changes forever; `provision state
prune` applies it and compacts the file; a file an older provisioner wrote is upgraded."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.state import NodeState, StateStore, Step

S = NodeState
DAY = 86400.0


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore(tmp_path / "t.sqlite", site="t")
    s.ensure_hosts(["h1", "h2"])
    return s


def runs(store: StateStore, host: str, n: int, *, keep: int) -> None:
    for i in range(n):
        verdict = "needs-attention" if i % 2 else "healthy"
        store.record_health(host, f"r{i}", verdict, [{"id": "gpu.ecc", "status": "pass",
                                                     "blob": "x" * 2000}], keep_runs=keep)


def test_each_run_keeps_the_newest_runs_whole_and_older_ones_as_verdicts(store: StateStore) -> None:
    runs(store, "h1", 6, keep=3)
    history = store.health_history("h1", limit=10)
    assert [r.run_id for r in history] == ["r5", "r4", "r3", "r2", "r1", "r0"]
    assert [bool(r.results) for r in history] == [True, True, True, False, False, False]
    assert [r.verdict for r in history][-1] == "healthy"  # the verdict stays
    assert store.latest_health(["h1", "h2"])["h1"].run_id == "r5"
    assert "h2" not in store.latest_health(["h1", "h2"])
    since = datetime.now(UTC) - timedelta(days=30)
    verdicts = store.health_verdicts(["h1", "h2"], since=since)
    assert [v for _, v in verdicts["h1"]] == ["healthy", "needs-attention"] * 3
    assert verdicts["h2"] == []


def test_prune_drops_old_history_but_never_a_state_change(store: StateStore) -> None:
    for st in (S.DISCOVERED, S.DEPLOYING, S.DEPLOYED):
        store.transition("h1", st)
    store.record_facts("h1", {"serial": "A"})
    store.record_event("h1", "deploy.pxe", "booting")
    runs(store, "h1", 5, keep=50)
    runs(store, "h2", 2, keep=50)
    report = store.prune(keep_runs=2, keep_days=30, now=time.time() + 31 * DAY)
    # h1: 3 runs beyond the newest 2 summarised, then (older than 30 days) removed; the newest
    # 2 of each host stay whatever their age
    assert (report.runs_summarised, report.runs_deleted) == (3, 3)
    assert [r.run_id for r in store.health_history("h1", limit=10)] == ["r4", "r3"]
    assert [r.run_id for r in store.health_history("h2", limit=10)] == ["r1", "r0"]
    kinds = [e.kind for e in store.events("h1")]
    assert kinds == ["enrolled", "transition", "transition", "transition"]
    assert report.events_deleted >= 2 + 5  # facts, deploy.pxe, the health events
    with pytest.raises(sqlite3.IntegrityError, match="state changes are kept"):
        store._conn().execute("DELETE FROM events WHERE kind='transition'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store._conn().execute("UPDATE events SET message='x'")
    # nothing old enough: a second pass with today's clock removes nothing more
    assert store.prune(keep_runs=2, keep_days=30) == type(report)(0, 0, 0)


def test_vacuum_gives_the_space_back(store: StateStore) -> None:
    runs(store, "h1", 200, keep=500)
    before = store.size_bytes()
    store.prune(keep_runs=1, keep_days=1, now=time.time() + 2 * DAY)
    shrunk = store.vacuum()
    assert shrunk > before // 2 and store.size_bytes() < before // 2
    assert store.integrity_ok()


def test_the_prune_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path))
    store = StateStore(tmp_path / "example.sqlite", site="example")
    store.ensure_hosts(["gpu-r01-u03"])
    runs(store, "gpu-r01-u03", 3, keep=50)
    res = CliRunner().invoke(app, ["state", "prune", "--site", "example", "--keep-runs", "1"])
    assert res.exit_code == 0, res.output
    assert "pruned: 2 health runs kept as verdicts only" in res.output
    assert "compacted: " in res.output
    assert [bool(r.results) for r in store.health_history("gpu-r01-u03")] == [True, False, False]


V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE hosts (name TEXT PRIMARY KEY, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
    last_error TEXT, facts TEXT NOT NULL DEFAULT '{}', updated_at REAL NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, host TEXT NOT NULL, ts REAL NOT NULL,
    kind TEXT NOT NULL, from_state TEXT, to_state TEXT, message TEXT NOT NULL DEFAULT '', data TEXT);
CREATE TABLE health_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, host TEXT NOT NULL,
    run_id TEXT NOT NULL, ts REAL NOT NULL, verdict TEXT NOT NULL, results TEXT NOT NULL);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
INSERT INTO meta VALUES ('schema_version', '1');
"""


def test_a_file_from_before_steps_is_upgraded_with_the_steps_its_history_shows(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(V1_SCHEMA)
    now = time.time()
    hosts = {"dep": "deployed", "cfg": "validated", "bad-cfg": "failed", "bad-new": "failed",
             "new": "enrolled"}
    for name, state in hosts.items():
        conn.execute("INSERT INTO hosts(name, state, updated_at) VALUES (?, ?, ?)",
                     (name, state, now))
    history = {"bad-cfg": ["deploying", "deployed", "failed"], "bad-new": ["deploying", "failed"]}
    for name, states in history.items():
        for to in states:
            conn.execute("INSERT INTO events(host, ts, kind, to_state) VALUES (?, ?, "
                         "'transition', ?)", (name, now, to))
    conn.commit()
    conn.close()
    # a read-only command reads it as it is, without upgrading it
    old = StateStore(db, site="t", readonly=True)
    assert {r.name: r.step for r in old.all()}["dep"] is Step.NONE
    store = StateStore(db, site="t")
    steps = {r.name: r.step for r in store.all()}
    assert steps == {"dep": Step.INSTALLED, "cfg": Step.CONFIGURED, "bad-cfg": Step.INSTALLED,
                     "bad-new": Step.NONE, "new": Step.NONE}
    version = store._conn().execute("SELECT value FROM meta WHERE key='schema_version'")
    assert version.fetchone()[0] == "2"
    store.record_event("new", "facts", "x")
    assert store.prune(keep_days=0.0001, now=time.time() + DAY).events_deleted == 1
