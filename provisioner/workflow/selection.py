"""Which selected hosts a rack-level command acts on: the rules every command shares."""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.inventory.model import Host
from provisioner.state import SERVING, HostRecord, NodeState, StateStore
from provisioner.workflow.bulk import ActionResult


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



def spare_serving(hosts: Sequence[Host], store: StateStore, *, force: bool, why: str
                  ) -> tuple[list[ActionResult], list[Host]]:
    """Hosts in use, left alone unless ``force`` (a "serving" result saying ``why`` a reset
    would hit them and the ways on), and the hosts that may be reset."""
    spared: list[ActionResult] = []
    eligible: list[Host] = []
    for host in hosts:
        state = store.get(host.name).state
        if not force and state in SERVING:
            spared.append(ActionResult(
                host.name, reason="serving",
                error=f"{host.name} is {state.value}: {why}. Put it in maintenance first "
                f"(provision maintenance {host.name}) or pass --force"))
        else:
            eligible.append(host)
    return spared, eligible
