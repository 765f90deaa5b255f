"""store.batch(): many writes, one transaction (one commit), all of them or none."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.state import NodeState, StateStore
from provisioner.workflow.discover import RECORD_BATCH, DiscoveryResult, record_results


def _commits(store: StateStore) -> list[str]:
    seen: list[str] = []
    store._conn().set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


def test_writes_in_a_batch_commit_once(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite", site="t")
    store.ensure_hosts(["a", "b"])
    commits = _commits(store)
    with store.batch():
        store.transition("a", NodeState.DISCOVERED)
        store.record_event("b", "note", "one")
        assert store.get("a").state is NodeState.DISCOVERED  # the batch reads its own writes
    assert commits == ["COMMIT"]


def test_a_batch_that_fails_keeps_none_of_its_writes(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite", site="t")
    store.ensure_hosts(["a"])
    with pytest.raises(RuntimeError), store.batch():
        store.transition("a", NodeState.DISCOVERED)
        raise RuntimeError("the run stops")
    assert store.get("a").state is NodeState.ENROLLED


def test_discovery_results_are_written_in_batches(tmp_path: Path) -> None:
    # one commit per host made a 4,096-BMC discovery spend ~48 s writing after the reads
    store = StateStore(tmp_path / "s.sqlite", site="t")
    n = RECORD_BATCH + 10
    results = [DiscoveryResult(f"h{i:04d}", reason="unreachable", error="no route") for i in range(n)]
    commits = _commits(store)
    record_results(store, results)
    assert len(commits) == 1 + 2  # enrolment, then two batches
    assert all(r.state is NodeState.FAILED for r in store.all())
    assert len(store.all()) == n
