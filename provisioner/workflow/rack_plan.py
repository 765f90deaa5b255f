"""What `provision rack --dry-run` would do, changing nothing: the hosts it would deploy and
skip, the wave, and the backend's own plan when it has one (MAAS: what it would change)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.deploy.base import backend_class
from provisioner.inventory.model import Host, Site
from provisioner.state import StateStore
from provisioner.workflow.rack import HostResult, RackOptions, RackRunner, Reporter
from provisioner.workflow.waves import WavePlan


@dataclass
class RackPlan:
    """A dry run's answer; ``backend_plan`` has ``to_dict()`` and ``render()`` when present."""

    todo: list[Host]
    skipped: list[HostResult]
    wave: WavePlan
    backend_plan: Any | None


def plan_rack(
    site: Site, hosts: Sequence[Host], options: RackOptions, reporter: Reporter
) -> RackPlan:
    """Plan a rack run for ``hosts`` with the site's backend, changing nothing."""
    backend = backend_class(site.settings.deploy_backend)()
    store = StateStore.for_site(site)
    runner = RackRunner(site, store, backend, open_bmc=None, reporter=reporter, options=options)
    todo, skipped = runner.plan(hosts)
    wave = runner.wave_plan(len(todo))
    backend_plan = None
    planner = getattr(backend, "plan", None)
    if callable(planner) and todo:
        backend_plan = planner(site, [runner.request_for(h) for h in todo], reimage=options.reimage)
    return RackPlan(todo, skipped, wave, backend_plan)
