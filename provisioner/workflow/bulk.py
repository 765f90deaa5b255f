"""Running one BMC operation (power, boot override) across many hosts in parallel."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from provisioner.bmc.base import BootTarget, PowerAction, PowerState
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import ProvisionerError
from provisioner.inventory import Host, Site
from provisioner.state import StateStore
from provisioner.workflow.bmc_access import check_credentials, open_bmc

log = logging.getLogger(__name__)


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


def run_on_hosts(
    site: Site,
    hosts: Sequence[Host],
    operation: Operation,
    *,
    max_parallel: int | None = None,
    opener: Callable[[Site, Host], RedfishBMC] = open_bmc,
) -> list[ActionResult]:
    """Open each host's BMC, run ``operation`` (which returns a short detail), always close."""

    def one(host: Host) -> ActionResult:
        bmc: RedfishBMC | None = None
        try:
            bmc = opener(site, host)
            detail = operation(bmc)
            return ActionResult(host.name, detail=detail, warnings=tuple(bmc.warnings))
        except ProvisionerError as exc:
            reason = str(getattr(exc, "reason", None) or type(exc).__name__)
            return ActionResult(host.name, reason=reason, error=str(exc))
        except Exception as exc:  # one host's surprise must not stop the others
            # One line for the user; the traceback (for a bug report) only with --debug.
            log.error("operation on %s failed unexpectedly: %s (run with --debug for the "
                      "traceback)", host.name, type(exc).__name__)
            log.debug("traceback of the operation on %s", host.name, exc_info=True)
            return ActionResult(host.name, reason="internal error",
                                error=f"{type(exc).__name__}: {exc}")
        finally:
            if bmc is not None:
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
                        max_parallel=max_parallel, opener=open_)


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
