"""Bulk BMC operations' bookkeeping: each host's history says what was done and how it ended."""

from __future__ import annotations

from pathlib import Path

from provisioner.state import StateStore
from provisioner.workflow.bulk import ActionResult, record_outcomes


def test_each_outcome_is_an_event_in_its_hosts_history(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite", site="t")
    store.ensure_hosts(["a", "b"])
    record_outcomes(store, [
        ActionResult("a", detail="On"),
        ActionResult("b", reason="BMCAuthError", error="401 from the BMC"),
    ], "power", "power on")
    (a,) = [e for e in store.events("a") if e.kind == "power"]
    (b,) = [e for e in store.events("b") if e.kind == "power"]
    assert (a.message, a.data) == ("power on: ok", None)
    assert (b.message, b.data) == ("power on: BMCAuthError", {"error": "401 from the BMC"})
