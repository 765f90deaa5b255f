"""A lab rebuilt from blank disks is installed again: `lab up` sends the rebuilt hosts back to
`enrolled` in the site's state store (which outlives `lab down`), keeping their history."""

from __future__ import annotations

import pytest

from provisioner.lab.lab import forget_installs
from provisioner.lab.plan import LabPlan
from provisioner.state import NodeState, StateStore


@pytest.fixture
def plan(tmp_path, monkeypatch):
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "nodes"))
    return LabPlan(netns="plabf", hosts=3, disks=3, state_dir=tmp_path / "lab",
                   inventory_dir=tmp_path / "inv")


def _walk_to_validated(store: StateStore, name: str) -> None:
    for state in (NodeState.DISCOVERED, NodeState.DEPLOYING, NodeState.DEPLOYED,
                  NodeState.CONFIGURED, NodeState.VALIDATED):
        store.transition(name, state, reason="test")


def test_rebuilt_hosts_go_back_to_enrolled_with_the_reason_in_their_history(plan):
    store = StateStore.for_site("lab")
    store.ensure_hosts(["lab-host01", "lab-host02", "lab-host03"])
    _walk_to_validated(store, "lab-host01")
    _walk_to_validated(store, "lab-host02")

    moved = forget_installs(plan, [plan.host(1), plan.host(3)])

    assert moved == ["lab-host01"]  # host03 was still enrolled: nothing to forget
    assert store.get("lab-host01").state == NodeState.ENROLLED
    assert store.get("lab-host02").state == NodeState.VALIDATED  # its disks were kept
    last = store.events("lab-host01")[-1]
    assert (last.from_state, last.to_state) == (NodeState.VALIDATED, NodeState.ENROLLED)
    assert "blank disks" in last.message and last.data == {"forced": True}
    assert len(store.events("lab-host01")) == 7  # history kept: enrolled + 5 + this one
    store.close()


def test_hosts_the_store_never_saw_are_left_alone(plan):
    assert forget_installs(plan, [plan.host(2)]) == []
    assert forget_installs(plan, []) == []
