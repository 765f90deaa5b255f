"""The host-picking use cases the CLI calls: maintenance holds and `reimage --failed`."""

from __future__ import annotations

from pathlib import Path

from provisioner.health.model import RemedyKind
from provisioner.inventory import Site, load_site
from provisioner.state import NodeState, StateStore
from provisioner.workflow.reimage import reimage_targets
from provisioner.workflow.selection import without_maintenance

EXAMPLE = Path(__file__).resolve().parents[3] / "inventory" / "example" / "site.yml"


def _site() -> Site:
    return load_site(EXAMPLE)


def _store(tmp_path: Path) -> StateStore:
    return StateStore(tmp_path / "state.sqlite", site="example")


def test_maintenance_hosts_are_held_unless_forced(tmp_path: Path) -> None:
    site, store = _site(), _store(tmp_path)
    hosts = site.select(["gpu-r01-u03", "gpu-r01-u05"])
    store.ensure_hosts(["gpu-r01-u05"])
    store.transition("gpu-r01-u05", NodeState.MAINTENANCE, reason="RMA")
    kept, held = without_maintenance(store, hosts, force=False)
    assert [h.name for h in kept] == ["gpu-r01-u03"]
    assert [h.name for h in held] == ["gpu-r01-u05"]
    kept, held = without_maintenance(store, hosts, force=True)
    assert [h.name for h in kept] == ["gpu-r01-u03", "gpu-r01-u05"] and held == []


def test_reimage_failed_adds_only_hosts_a_new_os_fixes(tmp_path: Path) -> None:
    site, store = _site(), _store(tmp_path)
    store.ensure_hosts(["gpu-r01-u03", "gpu-r01-u05", "gpu-r01-u07"])
    for name, reason, remedy in (
        ("gpu-r01-u03", "deploy failed", None),
        ("gpu-r01-u05", "health: root filesystem corrupt", "reimage"),
        ("gpu-r01-u07", "health: GPU fell off the bus", "repair"),
    ):
        store.transition(name, NodeState.FAILED, reason=reason, error="x")
        if remedy:
            store.record_facts(name, {"health": {"remedy": {"kind": remedy}}})
    targets = reimage_targets(site, ["gpu-r01-u05", "gpu-r01-u09"], failed=True, store=store)
    # named first, then the failed ones not already named; never twice
    assert [h.name for h in targets.hosts] == ["gpu-r01-u05", "gpu-r01-u09", "gpu-r01-u03"]
    assert targets.refused == {"gpu-r01-u07": RemedyKind.REPAIR}


def test_reimage_without_failed_reads_no_state(tmp_path: Path) -> None:
    targets = reimage_targets(_site(), ["gpu-r01-u03"], failed=False)
    assert [h.name for h in targets.hosts] == ["gpu-r01-u03"] and targets.refused == {}
