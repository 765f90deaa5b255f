"""Running one BMC operation (power, boot override) across many hosts in parallel."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from provisioner.bmc.base import BootTarget, PowerAction, PowerState
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import ProvisionerError
from provisioner.http_policy.deadline import deadline as host_deadline
from provisioner.inventory import Host, Site
from provisioner.state import StateStore
from provisioner.workflow.bmc_access import check_credentials, open_bmc

log = logging.getLogger(__name__)
# Logging out of a BMC that hung past its deadline must not hold the host's result for long.
LOGOUT_GRACE_S = 15.0
DEADLINE_REASON = "deadline exceeded"  # BMCDeadline's reason, as results carry it
STEPWISE = None  # ``waits_s`` of an operation that arms a deadline per step itself


@dataclass
class ActionResult:
    """The outcome of an operation on one host: a short detail, or a reason and error."""

    host: str
    detail: str = ""
    reason: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the operation succeeded on this host."""
        return self.reason is None


Operation = Callable[[RedfishBMC], str]


def host_deadline_s(site: Site, waits_s: float = 0.0) -> float:
    """All of one host's BMC traffic in a verb: the site's per-host deadline plus the
    ``waits_s`` the verb spends waiting on purpose (a power change, a reset, a task)."""
    return site.settings.redfish.host_deadline_s + waits_s


def deadline_message(site: Site, exc: ProvisionerError, waits_s: float | None) -> str:
    """A deadline failure, naming the deadline this verb gave the host and its setting."""
    base = site.settings.redfish.host_deadline_s
    if waits_s is STEPWISE:
        waits = " per step, plus the waits --timeout allows that step"
    else:
        waits = f" + {waits_s:g} s of waits this verb allows" if waits_s else ""
        waits += " in all"
    return (f"{exc.message}\n  hint: this verb gives each host's BMC "
            f"settings.redfish.host_deadline_s ({base:g} s){waits}; a healthy BMC "
            "answers well within it: check this one (its web UI, a BMC reset), raise the "
            "setting only for genuinely slow BMCs")


def run_on_hosts(
    site: Site,
    hosts: Sequence[Host],
    operation: Operation,
    *,
    max_parallel: int | None = None,
    opener: Callable[[Site, Host], RedfishBMC] = open_bmc,
    waits_s: float | None = 0.0,
) -> list[ActionResult]:
    """Open each host's BMC, run ``operation`` (which returns a short detail), always close.

    Each host's whole conversation (opening included) has one deadline,
    :func:`host_deadline_s` with ``waits_s``; a host past it fails alone with reason
    "deadline exceeded". ``waits_s=STEPWISE``: the operation arms its own, step by step."""

    def one(host: Host) -> ActionResult:
        bmc: RedfishBMC | None = None
        try:
            if waits_s is STEPWISE:  # the opening only; the operation arms its own steps
                with host_deadline(host_deadline_s(site)):
                    bmc = opener(site, host)
                detail = operation(bmc)
            else:
                with host_deadline(host_deadline_s(site, waits_s)):
                    bmc = opener(site, host)
                    detail = operation(bmc)
            return ActionResult(host.name, detail=detail, warnings=tuple(bmc.warnings))
        except ProvisionerError as exc:
            reason = str(getattr(exc, "reason", None) or type(exc).__name__)
            error = deadline_message(site, exc, waits_s) if reason == DEADLINE_REASON \
                else str(exc)
            return ActionResult(host.name, reason=reason, error=error,
                                warnings=tuple(bmc.warnings) if bmc is not None else ())
        except Exception as exc:  # one host's surprise must not stop the others
            # One line for the user; the traceback (for a bug report) only with --debug.
            log.error("operation on %s failed unexpectedly: %s (run with --debug for the "
                      "traceback)", host.name, type(exc).__name__)
            log.debug("traceback of the operation on %s", host.name, exc_info=True)
            return ActionResult(host.name, reason="internal error",
                                error=f"{type(exc).__name__}: {exc}")
        finally:
            if bmc is not None:
                with host_deadline(LOGOUT_GRACE_S):
                    bmc.close()

    if not hosts:
        return []
    if opener is open_bmc:
        check_credentials(site, hosts)
    parallel = max_parallel or site.settings.redfish.max_parallel
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(hosts)))) as pool:
        return list(pool.map(one, hosts))


def record_outcomes(
    store: StateStore, results: Sequence[ActionResult], kind: str, what: str
) -> None:
    """One event per host in its history: ``what`` and ok, or the reason it failed."""
    for res in results:
        store.record_event(res.host, kind, f"{what}: " + ("ok" if res.ok else f"{res.reason}"),
                           {"error": res.error} if res.error else None)


HostOperation = Callable[[RedfishBMC, Host], str]


def run_per_host(
    site: Site,
    hosts: Sequence[Host],
    operation: HostOperation,
    *,
    max_parallel: int | None = None,
    opener: Callable[[Site, Host], RedfishBMC] = open_bmc,
    waits_s: float | None = 0.0,
) -> list[ActionResult]:
    """:func:`run_on_hosts` for an operation that also needs the inventory host it acts on."""
    if opener is open_bmc:
        check_credentials(site, hosts)
    owner: dict[int, Host] = {}

    def open_(s: Site, host: Host) -> RedfishBMC:
        bmc = opener(s, host)
        owner[id(bmc)] = host
        return bmc

    return run_on_hosts(site, hosts, lambda bmc: operation(bmc, owner[id(bmc)]),
                        max_parallel=max_parallel, opener=open_, waits_s=waits_s)


def power_operation(action: PowerAction | None, *, wait_s: float = 0.0) -> Operation:
    """An operation that performs ``action`` (None: only read) and reports the power state."""

    def op(bmc: RedfishBMC) -> str:
        if action is not None:
            bmc.power(action)
            if wait_s > 0 and action in (PowerAction.ON, PowerAction.OFF, PowerAction.SHUTDOWN):
                wanted = PowerState.ON if action == PowerAction.ON else PowerState.OFF
                bmc.wait_power(wanted, wait_s)
        return bmc.power_state().value

    return op


def boot_operation(
    target: BootTarget, *, persistent: bool, image: str | None = None, eject: bool = False
) -> Operation:
    """An operation that sets (and verifies) a boot override; for CD, inserts ``image`` first
    (or with ``eject``, ejects whatever virtual media is inserted before a non-CD boot)."""

    def op(bmc: RedfishBMC) -> str:
        extra = ""
        if image:
            bmc.insert_media(image)
            extra = f", {image} inserted"
        elif eject:
            bmc.eject_media()
            extra = ", media ejected"
        bmc.set_boot(target, persistent=persistent)
        return f"{target.value} ({'persistent' if persistent else 'once'}{extra})"

    return op
