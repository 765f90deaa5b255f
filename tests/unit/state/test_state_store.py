"""The node state store: transitions, events, concurrency, the orchestrator lock, crashes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from provisioner.exceptions import IllegalTransition, SiteLocked, StateError
from provisioner.state import TRANSITIONS, NodeState, StateStore

S = NodeState


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore(tmp_path / "site.sqlite", site="t")
    s.ensure_hosts(["h1", "h2"])
    return s


def test_every_state_has_a_row_in_the_table() -> None:
    assert set(TRANSITIONS) == set(NodeState)


def test_wal_mode(store: StateStore) -> None:
    assert store._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_happy_path_and_events(store: StateStore) -> None:
    for st in (S.DISCOVERED, S.DEPLOYING, S.DEPLOYED, S.CONFIGURED, S.VALIDATED):
        store.transition("h1", st, reason=f"to {st.value}")
    rec = store.get("h1")
    assert rec.state == S.VALIDATED and rec.reason == "to validated"
    kinds = [(e.kind, e.from_state, e.to_state) for e in store.events("h1")]
    assert kinds[0] == ("enrolled", None, S.ENROLLED)
    assert kinds[-1] == ("transition", S.CONFIGURED, S.VALIDATED)
    assert len(kinds) == 6


def test_last_entered_finds_the_newest_transition_into_the_states(store: StateStore) -> None:
    assert store.last_entered("h1", [S.DEPLOYING, S.ENROLLED]) is None  # enrolment is no transition
    for st in (S.DISCOVERED, S.DEPLOYING, S.DEPLOYED, S.DEPLOYING, S.DEPLOYED):
        store.transition("h1", st)
    deploying = [e for e in store.events("h1") if e.to_state is S.DEPLOYING]
    assert store.last_entered("h1", [S.DEPLOYING, S.ENROLLED]) == deploying[-1].ts
    assert store.last_entered("h1", [S.VALIDATED]) is None
    assert store.last_entered("h2", [S.DEPLOYING]) is None


def test_illegal_transition_refused(store: StateStore) -> None:
    with pytest.raises(IllegalTransition, match="cannot go from enrolled to deployed"):
        store.transition("h1", S.DEPLOYED)
    assert store.get("h1").state == S.ENROLLED


def test_maintenance_needs_force(store: StateStore) -> None:
    store.transition("h1", S.MAINTENANCE, reason="PSU swap")
    with pytest.raises(IllegalTransition) as exc:
        store.transition("h1", S.DEPLOYING)
    assert "PSU swap" in str(exc.value) and "--force" in str(exc.value)
    store.transition("h1", S.DEPLOYING, force=True, reason="forced redeploy")
    last = store.events("h1")[-1]
    assert last.data == {"forced": True}


def test_failed_keeps_error(store: StateStore) -> None:
    store.transition("h1", S.DISCOVERED)
    store.transition("h1", S.FAILED, reason="deploy failed", error="no disk matches serial X")
    rec = store.get("h1")
    assert rec.last_error == "no disk matches serial X"
    store.transition("h1", S.DEPLOYING)
    assert store.get("h1").last_error is None


def test_record_discovery_does_not_demote_a_deployed_host(store: StateStore) -> None:
    store.record_discovery("h1", {"serial": "ABC"})
    assert store.get("h1").state == S.DISCOVERED
    for st in (S.DEPLOYING, S.DEPLOYED):
        store.transition("h1", st)
    store.record_discovery("h1", {"serial": "ABC", "bios": "2.1"})
    rec = store.get("h1")
    assert rec.state == S.DEPLOYED and rec.facts == {"serial": "ABC", "bios": "2.1"}


def test_unknown_host(store: StateStore) -> None:
    with pytest.raises(StateError, match="not in the state store"):
        store.get("nope")


def test_events_are_append_only(store: StateStore) -> None:
    conn = store._conn()
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM events")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET message='x'")


def test_health_history(store: StateStore) -> None:
    store.record_health("h1", "r1", "healthy", [{"check": "gpu_count", "status": "pass"}])
    store.record_health("h1", "r2", "needs-attention", [{"check": "xid", "status": "fail"}])
    runs = store.health_history("h1")
    assert [r.run_id for r in runs] == ["r2", "r1"]
    assert runs[0].results[0]["check"] == "xid"


def test_concurrent_writers_from_threads(store: StateStore) -> None:
    names = [f"n{i}" for i in range(16)]
    store.ensure_hosts(names)
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            for i in range(20):
                store.record_facts(name, {"i": i})
                store.record_event(name, "tick", f"tick {i}")
            store.transition(name, S.DISCOVERED)
        except BaseException as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in names:
        assert store.get(n).facts == {"i": 19}
        assert store.get(n).state == S.DISCOVERED
        assert sum(1 for e in store.events(n) if e.kind == "tick") == 20


HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from provisioner.state import StateStore
    s = StateStore(sys.argv[1], site="t")
    s.acquire_lock("provision rack --site t")
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_second_orchestrator_is_refused_and_lock_dies_with_its_holder(tmp_path: Path) -> None:
    db = tmp_path / "site.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        other = StateStore(db, site="t")
        with pytest.raises(SiteLocked) as exc:
            other.acquire_lock("provision rack")
        msg = str(exc.value)
        assert f"pid {proc.pid}" in msg and "provision rack --site t" in msg
    finally:
        proc.kill()
        proc.wait()
    # the kernel released the dead holder's flock
    with other.orchestrator_lock("provision rack"):
        pass


CRASH_WRITER = textwrap.dedent(
    """
    import sys
    from provisioner.state import NodeState, StateStore
    s = StateStore(sys.argv[1], site="t")
    names = [f"h{i}" for i in range(50)]
    s.ensure_hosts(names)
    print("ready", flush=True)
    i = 0
    while True:
        n = names[i % 50]
        s.record_facts(n, {"counter": i, "blob": "x" * 2000})
        s.transition(n, NodeState.FAILED if i % 2 else NodeState.DISCOVERED, reason=f"step {i}")
        i += 1
    """
)


def test_kill_9_mid_write_leaves_a_consistent_store(tmp_path: Path) -> None:
    db = tmp_path / "site.sqlite"
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", CRASH_WRITER, str(db)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.4 + 0.3 * round_)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = StateStore(db, site="t")
        assert store.integrity_ok()
        for rec in store.all():
            # the host row and its last transition event were written in one transaction
            last = [e for e in store.events(rec.name) if e.kind == "transition"]
            if last:
                assert last[-1].to_state == rec.state
                assert last[-1].message == rec.reason
        # the store keeps working after the crash: a re-run resumes
        store.transition("h0", NodeState.DISCOVERED, reason="resumed")
        store.close()
