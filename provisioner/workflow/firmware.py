"""`provision firmware update`: bring each host's firmware to its baseline, host by host in
rolling waves, one component at a time in the order components need."""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from provisioner.bmc.base import PowerAction, PowerState
from provisioner.bmc.firmware_inventory import FirmwareComponent, read_components
from provisioner.bmc.firmware_methods import NoUpdateMethod, choose
from provisioner.bmc.firmware_update import (
    BMC_AWAY,
    plan_request,
    quirks_of,
    send_update,
    update_service,
    wait_task,
    wait_untasked,
    wait_until_back,
)
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import InputError, ProvisionerError
from provisioner.inventory import Host, Site
from provisioner.inventory.spec import FirmwareImage, FirmwareRequirement
from provisioner.redfish.errors import BMCVerifyFailed, RedfishError
from provisioner.state import StateStore
from provisioner.workflow.baseline import matching
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.bulk import ActionResult, run_per_host
from provisioner.workflow.firmware_images import ImageCache, ImageServer, serve_images
from provisioner.workflow.selection import spare_serving


class Order(IntEnum):
    """The order a host's components are updated in: the BMC first (it runs the rest of the
    update and reboots itself), then the system firmware, then devices; NIC/HCA firmware
    last, activated by one host reset at the end."""

    BMC = 0
    BIOS = 1
    DEVICE = 2
    NIC = 3


_BMC = re.compile(r"\b(bmc|idrac|ilo|xcc|imm2?|cimc)\b|remote access controller|"
                  r"baseboard management", re.I)
_BIOS = re.compile(r"\bbios\b|system rom|\buefi\b", re.I)
_NIC = re.compile(r"\bnic\b|infiniband|connectx|ethernet|network adapter|bluefield|\bhca\b",
                  re.I)


def order_of(c: FirmwareComponent) -> Order:
    """Where a component comes in a host's update sequence, from its Id and Name."""
    text = f"{c.id} {c.name}".replace(".", " ").replace("_", " ")
    if _BMC.search(text):
        return Order.BMC
    if _BIOS.search(text):
        return Order.BIOS
    if _NIC.search(text):
        return Order.NIC
    return Order.DEVICE


@dataclass(frozen=True)
class Step:
    """One component to update on one host."""

    component: FirmwareComponent
    requirement: FirmwareRequirement
    image: FirmwareImage

    @property
    def order(self) -> Order:
        """Its place in the host's sequence."""
        return order_of(self.component)

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
    blocked: list[str] = field(default_factory=list)  # drifting components without an image
    ways: dict[str, str] = field(default_factory=dict)  # step label: how its image would go


def plan_host(host: Host, have: Sequence[FirmwareComponent]) -> HostPlan:
    """The ordered steps that bring a host's drifting components to an allowed version."""
    plan = HostPlan(host.name)
    for req in host.firmware:
        for c in matching(req, have):
            if any(_version_ok(c.version, v) for v in req.allowed):
                continue
            if req.image is None:
                plan.blocked.append(f"{c.name} [{c.id}] {c.version}: no image in the baseline")
            else:
                plan.steps.append(Step(c, req, req.image))
    plan.steps.sort(key=lambda s: s.order)
    return plan


def _version_ok(version: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(version, pattern)


@dataclass(frozen=True)
class UpdateOptions:
    """How the update treats hosts and how long it waits."""

    force: bool = False  # also hosts in use
    task_timeout_s: float = 1800.0
    bmc_back_timeout_s: float = 900.0
    poll_s: float = 10.0

    @property
    def poll(self) -> float:
        """Seconds between looks: a short timeout (a test, an impatient operator) still gets
        several."""
        return min(self.poll_s, max(0.1, self.task_timeout_s / 20))


def plan_rack(site: Site, hosts: Sequence[Host], *, max_parallel: int | None = None,
              opener: Callable[[Site, Host], RedfishBMC] = open_bmc
              ) -> tuple[dict[str, HostPlan], list[ActionResult]]:
    """Read every host's inventory once and plan it; hosts that could not be read are
    returned as failed results."""
    plans: dict[str, HostPlan] = {}

    server = site.settings.firmware_server
    image_url = f"{server.url if server else 'http://'}/firmware/image.bin"

    def op(bmc: RedfishBMC, host: Host) -> str:
        plan = plans[host.name] = plan_host(host, read_components(bmc))
        if plan.steps:
            _plan_ways(bmc, plan, image_url)
        return f"{len(plan.steps)} steps"

    results = run_per_host(site, hosts, op, max_parallel=max_parallel, opener=opener)
    return plans, [r for r in results if not r.ok]


def _plan_ways(bmc: RedfishBMC, plan: HostPlan, image_url: str) -> None:
    """How each step's image would reach the BMC (read-only: the UpdateService is read)."""
    try:
        service = update_service(bmc)
    except RedfishError as exc:
        plan.ways = {s.label: f"unknown ({exc.reason})" for s in plan.steps}
        return
    for step in plan.steps:
        try:
            req = choose(service, image_url=image_url, target=step.component.path or None,
                         at_reset=step.order in (Order.BIOS, Order.NIC),
                         kind=step.order.name.lower(), quirks=quirks_of(bmc))
            plan.ways[step.label] = req.describe()
        except NoUpdateMethod as exc:
            plan.ways[step.label] = f"no way: {exc}"


def update_rack(site: Site, hosts: Sequence[Host], store: StateStore, cache: ImageCache, *,
                opts: UpdateOptions = UpdateOptions(), max_parallel: int | None = None,
                opener: Callable[[Site, Host], RedfishBMC] = open_bmc) -> list[ActionResult]:
    """Plan, verify every image once, serve them, and update hosts in rolling waves of
    ``max_parallel``; a host's failure stays its own and every step is in its history."""
    if site.settings.firmware_server is None:
        raise InputError("firmware update serves images to the BMCs from this machine: "
                         "settings.firmware_server.url is not set",
                         hint="set it to the URL the BMCs reach this machine at, e.g. "
                         "http://10.0.0.5:8089 (docs/firmware.md)")
    store.ensure_hosts([h.name for h in hosts])
    results, eligible = spare_serving(
        hosts, store, force=opts.force,
        why="a firmware update resets components and the host")
    plans, unread = plan_rack(site, eligible, max_parallel=max_parallel, opener=opener)
    results += unread
    images: dict[str, Exception | None] = {}
    for plan in plans.values():
        for step in plan.steps:
            if step.image.sha256 not in images:
                images[step.image.sha256] = _verify(cache, step.image)
    todo = [h for h in eligible if h.name in plans]
    with serve_images(site.settings.firmware_server, cache) as server:
        def op(bmc: RedfishBMC, host: Host) -> str:
            return _update_host(bmc, plans[host.name], images, server, cache, store, opts)

        results += run_per_host(site, todo, op, max_parallel=max_parallel, opener=opener)
    for res in results:
        if not res.ok:
            store.record_event(res.host, "firmware",
                               f"firmware update failed ({res.reason}): {res.error}")
    order = {h.name: i for i, h in enumerate(hosts)}
    return sorted(results, key=lambda r: order[r.host])


def _verify(cache: ImageCache, image: FirmwareImage) -> Exception | None:
    try:
        cache.fetch(image)
    except ProvisionerError as exc:
        return exc
    return None


def _update_host(bmc: RedfishBMC, plan: HostPlan, images: dict[str, Exception | None],
                 server: ImageServer, cache: ImageCache, store: StateStore,
                 opts: UpdateOptions) -> str:
    if plan.blocked and not plan.steps:
        raise InputError("; ".join(plan.blocked),
                         hint="add `image: {url, sha256}` to those baseline entries")
    for step in plan.steps:
        error = images[step.image.sha256]
        if error is not None:
            raise error  # the image's own error says what to fix; nothing was sent
    if not plan.steps:
        return "nothing to update"
    service = update_service(bmc)
    needs_reset = False
    staged: list[str] = []  # tasks of OnReset updates: they end after the host reset
    for step in plan.steps:
        at_reset = step.order in (Order.BIOS, Order.NIC)
        image_url, image = server.url_of(step.image), cache.path_of(step.image)
        req = plan_request(bmc, service, image_url=image_url, image_size=image.stat().st_size,
                           target=step.component.path or None, at_reset=at_reset,
                           kind=step.order.name.lower())
        task = send_update(bmc, service, req, image_url=image_url, image=image,
                           timeout_s=opts.task_timeout_s)
        store.record_event(plan.host, "firmware", f"{step.label}: sent by {req.describe()}")
        if task is None:
            wait_untasked(bmc, service, timeout_s=opts.task_timeout_s, poll_s=opts.poll)
        elif wait_task(bmc, task, timeout_s=opts.task_timeout_s, poll_s=opts.poll,
                       until_staged=req.apply_time == "OnReset") == "staged":
            staged.append(task)
            needs_reset = True
            continue
        if step.order is Order.BMC:
            wait_until_back(bmc, timeout_s=opts.bmc_back_timeout_s, poll_s=opts.poll)
        # BIOS and NIC images usually run only after a host reset: look once; the BMC and
        # other devices switch by themselves (the BMC by rebooting): give them the time.
        settle = 0.0 if step.order in (Order.BIOS, Order.NIC) else opts.bmc_back_timeout_s
        now = _await_version(bmc, step, settle, opts.poll)
        if _all_allowed(step, now):
            store.record_event(plan.host, "firmware", f"{step.label}: {step.component.version}"
                               f" -> {', '.join(sorted(set(now)))}")
        elif step.order in (Order.BIOS, Order.NIC):
            needs_reset = True
        else:
            raise _not_applied(bmc, step, now)
    if needs_reset:
        _reset_host(bmc, opts)
        for task in staged:
            wait_task(bmc, task, timeout_s=opts.task_timeout_s, poll_s=opts.poll)
        for step in plan.steps:
            now = _await_version(bmc, step, opts.bmc_back_timeout_s, opts.poll)
            if not _all_allowed(step, now):
                raise _not_applied(bmc, step, now)
            store.record_event(plan.host, "firmware", f"{step.label}: {step.component.version}"
                               f" -> {', '.join(sorted(set(now)))} (after a host reset)")
    return f"updated {', '.join(s.label for s in plan.steps)}"


def _versions(bmc: RedfishBMC, step: Step) -> list[str]:
    return [c.version for c in matching(step.requirement, read_components(bmc))
            if c.id.split("__")[-1] == step.component.id.split("__")[-1]]


def _all_allowed(step: Step, versions: list[str]) -> bool:
    return bool(versions) and all(
        any(_version_ok(v, want) for want in step.requirement.allowed) for v in versions)


def _await_version(bmc: RedfishBMC, step: Step, timeout_s: float, poll_s: float) -> list[str]:
    """The component's versions once they are allowed, or as last seen when ``timeout_s``
    runs out; a BMC that does not answer meanwhile is rebooting into its new image."""
    deadline = time.monotonic() + timeout_s
    now: list[str] = []
    while True:
        try:
            now = _versions(bmc, step)
        except BMC_AWAY:
            if time.monotonic() >= deadline:
                raise
        if _all_allowed(step, now) or time.monotonic() >= deadline:
            return now
        time.sleep(poll_s)


def _not_applied(bmc: RedfishBMC, step: Step, now: list[str]) -> BMCVerifyFailed:
    return BMCVerifyFailed(
        f"{step.label} runs {', '.join(now) or 'nothing'} after the update, not "
        f"{' | '.join(step.requirement.allowed)}", bmc=bmc.name, path=step.component.path,
        hint="the image may not be for this component, or the BMC rejected it: see its "
        "task log")


def _reset_host(bmc: RedfishBMC, opts: UpdateOptions) -> None:
    was_off = bmc.power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    bmc.power(PowerAction.ON if was_off else PowerAction.RESTART)
    if was_off:
        bmc.wait_power(PowerState.ON, opts.bmc_back_timeout_s)
        bmc.power(PowerAction.OFF)
