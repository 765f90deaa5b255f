"""`provision firmware update`: bring each host's firmware to its baseline, host by host in
rolling waves, one component at a time in the order components need. Components every node
of a blade BMC shares are updated once per BMC, before its nodes' own, and only when every
node on it may be touched; hosts on one BMC never update at the same time. Every step is
journalled in the host's history before it is sent, so a run killed mid-update is picked up
by the next one instead of sending the same image again."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provisioner.bmc.base import PowerAction, PowerState
from provisioner.bmc.firmware_methods import UpdateService
from provisioner.bmc.interfaces import BMC_AWAY
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import InputError, ProvisionerError, StateError
from provisioner.http_policy.deadline import deadline as host_deadline
from provisioner.inventory import Host, Site
from provisioner.inventory.spec import FirmwareImage
from provisioner.redfish.errors import BMCStateTimeout, BMCVerifyFailed
from provisioner.state import StateStore
from provisioner.workflow.baseline import matching
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.bulk import STEPWISE, ActionResult, host_deadline_s, run_per_host
from provisioner.workflow.firmware_images import ImageCache, ImageServer, serve_images
from provisioner.workflow.firmware_journal import (
    UpdateInProgress,
    in_flight,
    journal,
    look_at_interrupted,
)
from provisioner.workflow.firmware_plan import (
    AT_RESET,
    HostPlan,
    Order,
    SharedGroup,
    Step,
    bmc_key,
    plan_host,
    plan_rack,
    shared_groups,
    version_ok,
)
from provisioner.workflow.selection import spare_serving

__all__ = ["HostPlan", "Order", "Step", "UpdateOptions", "plan_host", "plan_rack",
           "plan_update", "update_rack"]


class Blocked(InputError):
    """Drifting components this run could not update (no image, Updateable false, shared
    with a node that is not in the run)."""

    reason = "blocked"


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


def plan_update(site: Site, hosts: Sequence[Host], store: StateStore, *,
                opts: UpdateOptions = UpdateOptions(), max_parallel: int | None = None,
                opener: Callable[[Site, Host], RedfishBMC] = open_bmc
                ) -> tuple[dict[str, HostPlan], list[ActionResult]]:
    """What :func:`update_rack` would do, read-only (GETs only): each host's plan, the steps
    a blade's nodes share and whether they would go, an earlier run's unfinished update as
    found on the BMC; hosts in use or unread as results."""
    spared, eligible = [], []
    for host in hosts:
        try:
            spared_one, kept = spare_serving([host], store, force=opts.force,
                                             why="a firmware update resets it")
        except StateError:  # never enrolled: nothing holds it
            spared_one, kept = [], [host]
        spared += spared_one
        eligible += kept

    def look(bmc: RedfishBMC, host: Host, draft: HostPlan) -> None:
        draft.in_flight = look_at_interrupted(bmc, store, host.name, wait=False,
                                              timeout_s=0, poll_s=opts.poll)

    plans, unread = plan_rack(site, eligible, max_parallel=max_parallel, opener=opener,
                              before=look)
    shared_groups(site, plans, [h.name for h in eligible])
    return plans, [*spared, *unread]


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

    def resume(bmc: RedfishBMC, host: Host, draft: HostPlan) -> None:
        draft.in_flight = look_at_interrupted(bmc, store, host.name, wait=True,
                                              timeout_s=opts.task_timeout_s, poll_s=opts.poll)

    plans, unread = plan_rack(site, eligible, max_parallel=max_parallel, opener=opener,
                              before=resume, waits_s=opts.task_timeout_s)
    results += unread
    groups = shared_groups(site, plans, [h.name for h in eligible])
    images: dict[str, Exception | None] = {}
    for step in [s for p in plans.values() for s in p.steps] + \
            [s for g in groups.values() if not g.blocked for s in g.steps]:
        if step.image.sha256 not in images:
            images[step.image.sha256] = _verify(cache, step.image, opts.task_timeout_s)
    by_name = {h.name: h for h in eligible if h.name in plans}
    with serve_images(site.settings.firmware_server, cache) as server:
        run = _Run(site, store, cache, server, images, opts, max_parallel, opener)
        failed_groups = run.shared(groups, by_name)
        for host in list(by_name):
            if host in failed_groups:
                results.append(failed_groups[host])
                del by_name[host]
        results += run.own(plans, list(by_name.values()))
    for res in results:
        if not res.ok:
            # A task still running at our deadline is left open: the next run looks at it
            # before sending anything.
            phase = "sent" if res.reason in (BMCStateTimeout.reason,
                                             UpdateInProgress.reason) else "failed"
            journal(store, res.host, phase,
                    f"firmware update failed ({res.reason}): {res.error}",
                    **_open_step(store, res.host) if phase == "sent" else {})
    order = {h.name: i for i, h in enumerate(hosts)}
    return sorted(results, key=lambda r: order[r.host])


def _open_step(store: StateStore, host: str) -> dict[str, object]:
    flight = in_flight(store, host)
    if flight is None:
        return {}
    return {"label": flight.label, "component": flight.component, "task": flight.task}


def _verify(cache: ImageCache, image: FirmwareImage, deadline_s: float) -> Exception | None:
    try:
        cache.fetch(image, deadline_s=deadline_s)
    except ProvisionerError as exc:
        return exc
    return None


def _rounds(hosts: Sequence[Host]) -> list[list[Host]]:
    """Hosts in rounds such that no two on one BMC (a blade's nodes) are in one round."""
    rounds: list[list[Host]] = []
    seen: dict[str, int] = {}
    for host in hosts:
        n = seen.get(bmc_key(host), 0)
        seen[bmc_key(host)] = n + 1
        while len(rounds) <= n:
            rounds.append([])
        rounds[n].append(host)
    return rounds


@dataclass
class _Run:
    """One `firmware update` run: what every host's steps need."""

    site: Site
    store: StateStore
    cache: ImageCache
    server: ImageServer
    images: dict[str, Exception | None]
    opts: UpdateOptions
    max_parallel: int | None
    opener: Callable[[Site, Host], RedfishBMC]

    def shared(self, groups: dict[str, SharedGroup], hosts: dict[str, Host]
               ) -> dict[str, ActionResult]:
        """The components each blade BMC's nodes share, once per BMC by its first node;
        every node's history records them. Returns the failed nodes' results."""
        todo = {g.leader: g for g in groups.values() if not g.blocked and g.leader in hosts}

        def op(bmc: RedfishBMC, host: Host) -> str:
            group = todo[host.name]
            plan = HostPlan(host.name, steps=list(group.steps))
            return self.steps(bmc, plan, group.members)

        out: dict[str, ActionResult] = {}
        for res in run_per_host(self.site, [hosts[n] for n in todo], op,
                                max_parallel=self.max_parallel, opener=self.opener,
                                waits_s=STEPWISE):
            for member in todo[res.host].members:
                if not res.ok:
                    out[member] = ActionResult(
                        member, reason=res.reason, warnings=res.warnings,
                        error=f"the components shared on BMC {todo[res.host].key} "
                        f"(updated through {res.host}) failed, so nothing of this host's own "
                        f"was sent: {res.error}")
        return out

    def own(self, plans: dict[str, HostPlan], hosts: list[Host]) -> list[ActionResult]:
        """Each host's own components, never two hosts of one BMC at once."""
        results: list[ActionResult] = []

        def op(bmc: RedfishBMC, host: Host) -> str:
            return self.steps(bmc, plans[host.name], [host.name])

        for batch in _rounds(hosts):
            results += run_per_host(self.site, batch, op, max_parallel=self.max_parallel,
                                    opener=self.opener, waits_s=STEPWISE)
        return results

    def steps(self, bmc: RedfishBMC, plan: HostPlan, record_on: Sequence[str]) -> str:
        """Send ``plan``'s steps through ``bmc``, one at a time, journalled on the hosts in
        ``record_on`` (every node of a blade for what they share)."""
        def note(phase: str, message: str, **data: object) -> None:
            for host in record_on:
                journal(self.store, host, phase, message, **data)

        if plan.blocked and not plan.steps:
            raise Blocked((f"{plan.in_flight}; " if plan.in_flight else "")
                          + "; ".join(plan.blocked),
                          hint="add `image: {url, sha256}` to those baseline entries, or "
                          "update those components another way")
        for step in plan.steps:
            error = self.images[step.image.sha256]
            if error is not None:
                raise error  # the image's own error says what to fix; nothing was sent
        prefix = f"{plan.in_flight}; " if plan.in_flight else ""
        if not plan.steps:
            return prefix + "nothing to update"
        opts, base = self.opts, host_deadline_s(self.site)
        with host_deadline(base):
            service = bmc.firmware.update_service()
        needs_reset = False
        staged: list[str] = []  # tasks of OnReset updates: they end after the host reset
        for step in plan.steps:
            # Each step is one deadline: the host's, plus the waits it may spend (--timeout)
            # pushing the image, on its task, and on the BMC rebooting into it.
            with host_deadline(base + step_waits_s(opts)):
                outcome, task = self.step(bmc, service, step, note)
            needs_reset |= outcome != "done"
            if task is not None:
                staged.append(task)
        if needs_reset:
            with host_deadline(base + opts.bmc_back_timeout_s * (1 + len(plan.steps))
                               + opts.task_timeout_s * len(staged)):
                _reset_host(bmc, opts)
                for task in staged:
                    bmc.firmware.wait_update_task(task, timeout_s=opts.task_timeout_s,
                                                  poll_s=opts.poll)
                for step in plan.steps:
                    now = _await_version(bmc, step, opts.bmc_back_timeout_s, opts.poll)
                    if not _all_allowed(step, now):
                        raise _not_applied(bmc, step, now)
                    note("done", f"{step.label}: {step.component.version} -> "
                         f"{', '.join(sorted(set(now)))} (after a host reset)",
                         label=step.label, component=step.component.path)
        done = f"updated {', '.join(s.label for s in plan.steps)}"
        note("finished", done)
        if plan.blocked:
            raise Blocked(f"{prefix}{done}; not updated: {'; '.join(plan.blocked)}",
                          hint="the reasons say what each needs")
        return prefix + done

    def step(self, bmc: RedfishBMC, service: UpdateService, step: Step,
             note: Callable[..., None]) -> tuple[str, str | None]:
        """Send one step and wait for it: "done", "staged" with its task (which ends at the
        host reset) or "at reset" (the new version shows after a host reset)."""
        opts = self.opts
        at_reset = step.order in AT_RESET
        image_url, image = self.server.url_of(step.image), self.cache.path_of(step.image)
        req = bmc.firmware.plan_update(service, image_url=image_url,
                                       image_size=image.stat().st_size,
                                       target=step.component.path or None,
                                       at_reset=at_reset, kind=step.order.name.lower())
        what = {"label": step.label, "component": step.component.path}
        note("sending", f"{step.label}: sending by {req.describe()}", **what)
        task = bmc.firmware.send_update(service, req, image_url=image_url, image=image,
                                        timeout_s=opts.task_timeout_s)
        note("sent", f"{step.label}: sent by {req.describe()}", task=task, **what)
        if task is None:
            bmc.firmware.wait_untasked_update(service, timeout_s=opts.task_timeout_s,
                                              poll_s=opts.poll)
        elif bmc.firmware.wait_update_task(
                task, timeout_s=opts.task_timeout_s, poll_s=opts.poll,
                until_staged=req.apply_time == "OnReset") == "staged":
            return "staged", task
        if step.order is Order.BMC:
            bmc.firmware.wait_bmc_back(timeout_s=opts.bmc_back_timeout_s, poll_s=opts.poll)
        # BIOS and NIC images usually run only after a host reset: look once; the BMC
        # and other devices switch by themselves (the BMC by rebooting): give them time.
        settle = 0.0 if at_reset else opts.bmc_back_timeout_s
        now = _await_version(bmc, step, settle, opts.poll)
        if _all_allowed(step, now):
            note("done", f"{step.label}: {step.component.version} -> "
                 f"{', '.join(sorted(set(now)))}", **what)
            return "done", None
        if at_reset:
            return "at reset", None
        raise _not_applied(bmc, step, now)


def step_waits_s(opts: UpdateOptions) -> float:
    """What one update step may wait on top of the host's deadline: the push and the task
    (each up to the task timeout), the BMC coming back and the version settling."""
    return 2 * opts.task_timeout_s + 2 * opts.bmc_back_timeout_s

def _versions(bmc: RedfishBMC, step: Step) -> list[str]:
    return [c.version for c in matching(step.requirement, bmc.firmware.firmware_components())
            if c.id.split("__")[-1] == step.component.id.split("__")[-1]]


def _all_allowed(step: Step, versions: list[str]) -> bool:
    return bool(versions) and all(version_ok(v, step.requirement.allowed) for v in versions)


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
