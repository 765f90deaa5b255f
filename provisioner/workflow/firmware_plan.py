"""What `provision firmware update` would do to each host, read-only: the drifting components
of the host's own system (on a BMC that serves several nodes, another node's components are
never the host's, and the BMC's or chassis' own are shared by every node on it), in the
order their kinds need, each with the way its image would reach the BMC; components the BMC
says cannot be updated, or without an image, are named as blocked, never targeted."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from provisioner.bmc.firmware_inventory import FirmwareComponent, scoped
from provisioner.bmc.firmware_kinds import Kind
from provisioner.bmc.interfaces import NoUpdateWay
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.inventory import Host, Site
from provisioner.inventory.spec import FirmwareImage, FirmwareRequirement
from provisioner.redfish.errors import RedfishError
from provisioner.workflow.baseline import matching
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.bulk import ActionResult, run_per_host

Order = Kind  # the update order is the components' kind order (BMC, BIOS, devices, NICs)
AT_RESET = (Kind.BIOS, Kind.NIC)  # kinds whose new image runs only after a host reset


@dataclass(frozen=True)
class Step:
    """One component to update on one host (or on the BMC every node on it shares)."""

    component: FirmwareComponent
    requirement: FirmwareRequirement
    image: FirmwareImage

    @property
    def order(self) -> Kind:
        """Its place in the host's sequence."""
        return self.component.kind

    @property
    def label(self) -> str:
        """How the table names it."""
        c = self.component
        return c.id if c.name == c.id else f"{c.name} [{c.id}]"


@dataclass
class HostPlan:
    """What one host needs, or why it cannot be planned."""

    host: str
    steps: list[Step] = field(default_factory=list)
    shared: list[Step] = field(default_factory=list)  # on the BMC/chassis every node shares
    blocked: list[str] = field(default_factory=list)  # drifting, and not to be sent: why
    ways: dict[str, str] = field(default_factory=dict)  # step label: how its image would go
    system: str = ""  # the host's ComputerSystem Id
    peers: tuple[str, ...] = ()  # the other host systems on this BMC (a blade's nodes)
    in_flight: str = ""  # an update an earlier run left on the BMC, as found


def version_ok(version: str, allowed: Sequence[str]) -> bool:
    """Whether a version is one of the allowed ones (globs)."""
    return any(fnmatch.fnmatchcase(version, pattern) for pattern in allowed)


def plan_host(host: Host, have: Sequence[FirmwareComponent], *, system: str = "",
              systems: Sequence[str] = ()) -> HostPlan:
    """The ordered steps that bring a host's drifting components to an allowed version."""
    plan = HostPlan(host.name, system=system,
                    peers=tuple(s for s in systems if s != system))
    own, shared = scoped(have, system, systems)
    for req in host.firmware:
        for c in matching(req, [*own, *shared]):
            if version_ok(c.version, req.allowed):
                continue
            label = f"{c.name} [{c.id}] {c.version}"
            if c.updateable is False:
                plan.blocked.append(f"{label}: the BMC says it cannot be updated (Updateable "
                                    "false): update it with its vendor's tool")
            elif req.image is None:
                plan.blocked.append(f"{label}: no image in the baseline")
            elif c in shared and c.kind in AT_RESET:
                plan.blocked.append(f"{label}: shared by every node on this BMC and needs a "
                                    "host reset of each: update it with the vendor's tool")
            else:
                (plan.shared if c in shared else plan.steps).append(Step(c, req, req.image))
    plan.steps.sort(key=lambda s: s.order)
    plan.shared.sort(key=lambda s: s.order)
    return plan


def plan_rack(site: Site, hosts: Sequence[Host], *, max_parallel: int | None = None,
              opener: Callable[[Site, Host], RedfishBMC] = open_bmc,
              before: Callable[[RedfishBMC, Host, HostPlan], None] | None = None,
              waits_s: float = 0.0) -> tuple[dict[str, HostPlan], list[ActionResult]]:
    """Read every host's inventory once and plan it; hosts that could not be read are
    returned as failed results. ``before`` runs on each open BMC first (an earlier run's
    interrupted update is looked at there, waiting up to ``waits_s`` beyond the host's
    deadline)."""
    plans: dict[str, HostPlan] = {}
    server = site.settings.firmware_server
    image_url = f"{server.url if server else 'http://'}/firmware/image.bin"

    def op(bmc: RedfishBMC, host: Host) -> str:
        draft = HostPlan(host.name)
        if before is not None:
            before(bmc, host, draft)
        systems = [p.rstrip("/").rsplit("/", 1)[-1] for p in bmc.host_systems()]
        system = bmc.system_path().rstrip("/").rsplit("/", 1)[-1]
        plan = plan_host(host, bmc.firmware.firmware_components(), system=system,
                         systems=systems)
        plan.in_flight = draft.in_flight
        plans[host.name] = plan
        if plan.steps or plan.shared:
            _plan_ways(bmc, plan, image_url)
        return f"{len(plan.steps)} steps"

    results = run_per_host(site, hosts, op, max_parallel=max_parallel, opener=opener,
                           waits_s=waits_s)
    return plans, [r for r in results if not r.ok]


def _plan_ways(bmc: RedfishBMC, plan: HostPlan, image_url: str) -> None:
    """How each step's image would reach the BMC (read-only: the UpdateService is read)."""
    steps = [*plan.shared, *plan.steps]
    try:
        service = bmc.firmware.update_service()
    except RedfishError as exc:
        plan.ways = {s.label: f"unknown ({exc.reason})" for s in steps}
        return
    for step in steps:
        try:
            req = bmc.firmware.plan_update(
                service, image_url=image_url, image_size=None,
                target=step.component.path or None, at_reset=step.order in AT_RESET,
                kind=step.order.name.lower())
            plan.ways[step.label] = req.describe()
        except NoUpdateWay as exc:
            plan.ways[step.label] = f"no way: {exc.why}"


@dataclass
class SharedGroup:
    """The hosts one BMC serves (a blade's nodes) and the components they share."""

    key: str  # the BMC's address:port
    members: list[str]  # every site host on this BMC, in site order
    steps: list[Step] = field(default_factory=list)
    blocked: str = ""  # why the shared steps are not sent this run

    @property
    def leader(self) -> str:
        """The host whose run sends the shared steps."""
        return self.members[0]


def bmc_key(host: Host) -> str:
    """The BMC a host is reached through (hosts on one blade BMC share it)."""
    return f"{host.bmc.address}:{host.bmc.port or 443}"


def shared_groups(site: Site, plans: dict[str, HostPlan], eligible: Sequence[str]
                  ) -> dict[str, SharedGroup]:
    """Per BMC, the shared steps (each component once) and whether they may be sent: only
    when every host on that BMC is in this run and may be touched."""
    groups: dict[str, SharedGroup] = {}
    for host in site.hosts:
        plan = plans.get(host.name)
        key = bmc_key(host)
        group = groups.setdefault(key, SharedGroup(key, []))
        group.members.append(host.name)
        for step in plan.shared if plan else ():
            if all(s.component.path != step.component.path for s in group.steps):
                group.steps.append(step)
    groups = {k: g for k, g in groups.items() if g.steps}
    for group in groups.values():
        out = [m for m in group.members if m not in eligible or m not in plans]
        if out:
            group.blocked = (f"shared by {', '.join(group.members)} on BMC {group.key}: sent "
                             f"only when every one of them is updated in this run and may be "
                             f"touched ({', '.join(out)} {'is' if len(out) == 1 else 'are'} "
                             "not)")
            for name in group.members:
                if name in plans:
                    plans[name].blocked += [f"{s.label}: {group.blocked}" for s in group.steps]
        group.steps.sort(key=lambda s: s.order)
    return groups
