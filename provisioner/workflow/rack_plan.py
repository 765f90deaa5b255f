"""What `provision rack --dry-run` would do, changing nothing: the hosts it would install,
configure only and skip, the wave, and the backend's own plan when it has one (MAAS: what it
would change)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.deploy.base import backend_class
from provisioner.inventory.model import Host, Site
from provisioner.state import StateStore
from provisioner.workflow.rack import RackOptions, RackRunner, Reporter
from provisioner.workflow.resume import RunPlan
from provisioner.workflow.waves import WavePlan


@dataclass
class RackPlan:
    """A dry run's answer; ``backend_plan`` has ``to_dict()`` and ``render()`` when present."""

    hosts: RunPlan
    wave: WavePlan
    backend_plan: Any | None

    @property
    def todo(self) -> list[Host]:
        """The hosts the run would install."""
        return self.hosts.install


def plan_rack(
    site: Site, hosts: Sequence[Host], options: RackOptions, reporter: Reporter
) -> RackPlan:
    """Plan a rack run for ``hosts`` with the site's backend, writing nothing."""
    backend = backend_class(site.settings.deploy_backend)()
    store = StateStore.for_site(site, readonly=True)
    runner = RackRunner(site, store, backend, open_bmc=None, reporter=reporter, options=options)
    plan = runner.plan(hosts, enrol=False)
    wave = runner.wave_plan(len(plan.install))
    backend_plan = None
    planner = getattr(backend, "plan", None)
    if callable(planner) and plan.install:
        backend_plan = planner(site, [runner.request_for(h) for h in plan.install],
                               reimage=options.reimage)  # fmt: skip
    return RackPlan(plan, wave, backend_plan)
