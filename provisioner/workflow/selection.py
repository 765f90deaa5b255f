"""Which selected hosts a rack-level command acts on: the rules every command shares."""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.inventory.model import Host
from provisioner.state import HostRecord, NodeState, StateStore


def held_in_maintenance(record: HostRecord, *, force: bool) -> bool:
    """Whether an operator's maintenance mark keeps a host out of this run (``force`` lifts it)."""
    return record.state == NodeState.MAINTENANCE and not force


def without_maintenance(
    store: StateStore, hosts: Sequence[Host], *, force: bool
) -> tuple[list[Host], list[Host]]:
    """Split ``hosts`` into those to act on and those skipped because they are in maintenance."""
    store.ensure_hosts([h.name for h in hosts])
    kept: list[Host] = []
    held: list[Host] = []
    for host in hosts:
        (held if held_in_maintenance(store.get(host.name), force=force) else kept).append(host)
    return kept, held
