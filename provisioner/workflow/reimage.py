"""Choosing the hosts `provision reimage` wipes: the named ones, and with ``--failed`` every
failed host whose failure a new OS can fix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from provisioner.health.model import RemedyKind
from provisioner.health.service import REASON_PREFIX as HEALTH_REASON
from provisioner.health.service import remedy_of
from provisioner.inventory.model import Host, Site
from provisioner.state import HostRecord, NodeState, StateStore


@dataclass
class ReimageTargets:
    """The hosts to re-image, and the failed hosts left alone with the remedy they need instead."""

    hosts: list[Host] = field(default_factory=list)
    refused: dict[str, RemedyKind] = field(default_factory=dict)


def reimage_fixes(record: HostRecord) -> RemedyKind | None:
    """None if a re-image is the fix for this failed host, else the remedy it needs instead.

    A host that failed its health checks is re-imaged only when that is its remedy: a bad GPU
    or cable needs a technician (`provision ticket`), not a new OS.
    """
    if not record.reason.startswith(HEALTH_REASON):
        return None
    remedy = remedy_of(record.facts)
    return None if remedy is None or remedy is RemedyKind.REIMAGE else remedy


def reimage_targets(
    site: Site, names: Sequence[str] | None, *, failed: bool, store: StateStore | None = None
) -> ReimageTargets:
    """The named hosts (names or globs), plus with ``failed`` the failed hosts a re-image fixes."""
    targets = ReimageTargets(hosts=site.select(list(names)) if names else [])
    if not failed:
        return targets
    store = store or StateStore.for_site(site)
    store.ensure_hosts([h.name for h in site.hosts])
    wanted: set[str] = set()
    for rec in store.all():
        if rec.state != NodeState.FAILED:
            continue
        instead = reimage_fixes(rec)
        if instead is None:
            wanted.add(rec.name)
        else:
            targets.refused[rec.name] = instead
    targets.hosts += [h for h in site.hosts if h.name in wanted and h not in targets.hosts]
    return targets
