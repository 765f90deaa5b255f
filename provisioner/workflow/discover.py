"""Reading many BMCs at once: a bounded thread pool, one result (facts or a reason) per host."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import partial
from queue import Empty
from typing import Any

from provisioner.bmc.base import HostFacts
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import ProvisionerError
from provisioner.inventory import Host, Site
from provisioner.redfish.client import host_deadline
from provisioner.state import FAILABLE, NodeState, StateStore
from provisioner.workflow.bmc_access import check_credentials, nic_policy, open_bmc
from provisioner.workflow.nic_choice import NicPolicy, apply_nic_policy

log = logging.getLogger(__name__)

# Threads mostly wait on BMCs (hundreds of ms per request), so hundreds of them are cheap;
# the site's settings.redfish.max_parallel bounds it.
DEFAULT_MAX_PARALLEL = 128
MIN_PER_PROCESS = 64
THREADS_PER_PROCESS = 128
# Connections to all BMCs at once, whatever max_parallel x settings.redfish.connections says:
# a wider fan-out reads each BMC with fewer (sockets and threads of this machine are finite).
MAX_CONNECTIONS = 2048
# Logging out of a BMC that hung past its deadline must not hold the host's result for long.
LOGOUT_GRACE_S = 15.0
REASON_NIC = "no PXE NIC matched"
REASON_BUG = "internal error"


@dataclass(frozen=True)
class DiscoveryTarget:
    """One host to discover: its name and how to open its (logged-in) BMC."""

    name: str
    open: Callable[[], RedfishBMC]
    deadline_s: float | None = None  # for all of this host's Redfish traffic
    nic: NicPolicy = field(default_factory=NicPolicy)  # how its provisioning NIC is chosen among the ports read


@dataclass
class DiscoveryResult:
    """What discovery got from one host: facts, or a failure reason and message, or both
    (facts were read but the provisioning NIC rule did not match)."""

    host: str
    facts: HostFacts | None = None
    reason: str | None = None
    error: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the host was read completely and its provisioning NIC is known."""
        return self.reason is None


def facts_to_dict(facts: HostFacts) -> dict[str, Any]:
    """HostFacts as JSON-ready data for the state store (every datetime as ISO 8601)."""

    def conv(v: Any) -> Any:
        if isinstance(v, datetime):
            return v.isoformat()
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return {k: conv(v) for k, v in asdict(facts).items()}


def discover_one(target: DiscoveryTarget) -> DiscoveryResult:
    """Open, read and close one BMC; never raises for a BMC problem."""
    start = time.monotonic()
    result = DiscoveryResult(host=target.name)
    bmc: RedfishBMC | None = None
    try:
        with host_deadline(target.deadline_s):
            bmc = target.open()
            facts = bmc.discover()
        apply_nic_policy(facts, target.nic)
        result.facts = facts
        result.warnings = list(facts.extra.get("warnings") or [])
        nic_error = facts.extra.get("provisioning_nic_error")
        if nic_error:
            result.reason, result.error = REASON_NIC, str(nic_error)
    except ProvisionerError as exc:
        result.reason = str(getattr(exc, "reason", None) or type(exc).__name__)
        result.error = str(exc)
    except Exception as exc:  # one host's surprise must not sink the rack
        # One line for the user; the traceback (for a bug report) only with --debug.
        log.error("discovery of %s failed unexpectedly: %s (run with --debug for the "
                  "traceback)", target.name, type(exc).__name__)
        log.debug("traceback of %s's discovery", target.name, exc_info=True)
        result.reason = REASON_BUG
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if bmc is not None:
            with host_deadline(LOGOUT_GRACE_S):
                bmc.close()
        result.seconds = time.monotonic() - start
    return result


def connections_per_bmc(wanted: int, in_flight: int) -> int:
    """Connections per BMC so that ``in_flight`` BMCs hold at most MAX_CONNECTIONS in all."""
    return max(1, min(wanted, MAX_CONNECTIONS // max(1, in_flight)))


def _discover_threads(
    targets: Sequence[DiscoveryTarget],
    max_parallel: int,
    on_result: Callable[[DiscoveryResult], None] | None,
) -> dict[str, DiscoveryResult]:
    results: dict[str, DiscoveryResult] = {}
    workers = max(1, min(max_parallel, len(targets)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="discover") as pool:
        futures = {pool.submit(discover_one, t): t for t in targets}
        for future in as_completed(futures):
            res = future.result()
            results[res.host] = res
            if on_result:
                on_result(res)
    return results


def default_processes(count: int, max_parallel: int = DEFAULT_MAX_PARALLEL) -> int:
    """Worker processes for ``count`` BMCs: at most THREADS_PER_PROCESS BMCs in flight per
    interpreter, at most two processes per core, and one process for small runs.

    Each request costs a few hundred microseconds of Python CPU (HTTP parsing, TLS, JSON);
    with hundreds of threads in one interpreter its lock, not the BMCs, would set the pace.
    """
    if count < 2 * MIN_PER_PROCESS:
        return 1
    in_flight = min(count, max_parallel)
    wanted = -(-in_flight // THREADS_PER_PROCESS)
    return max(1, min(wanted, 2 * (os.cpu_count() or 1), count // MIN_PER_PROCESS))


def _shard_worker(
    targets: Sequence[DiscoveryTarget], indices: Sequence[int], max_parallel: int,
    queue: Any,
) -> None:
    _discover_threads([targets[i] for i in indices], max_parallel, queue.put)


def discover_all(
    targets: Sequence[DiscoveryTarget],
    *,
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    on_result: Callable[[DiscoveryResult], None] | None = None,
    processes: int | None = None,
) -> list[DiscoveryResult]:
    """Discover every target, at most ``max_parallel`` at once; results in target order.

    With ``processes`` > 1 the targets are split across forked worker processes (forked, so
    credentials never need to be serialised), each running its share of the threads.
    """
    if not targets:
        return []
    procs = (default_processes(len(targets), max_parallel) if processes is None
             else max(1, processes))
    if procs <= 1 or "fork" not in mp.get_all_start_methods():
        results = _discover_threads(targets, max_parallel, on_result)
        return [results[t.name] for t in targets]
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    per_proc = max(1, max_parallel // procs)
    workers = []
    for k in range(procs):
        indices = list(range(k, len(targets), procs))
        proc = ctx.Process(target=_shard_worker, args=(targets, indices, per_proc, queue),
                           name=f"discover-{k}", daemon=True)
        proc.start()
        workers.append(proc)
    results = {}
    try:
        while len(results) < len(targets):
            try:
                res = queue.get(timeout=1.0)
            except Empty:
                if not any(p.is_alive() for p in workers) and queue.empty():
                    break  # a worker died: its remaining hosts are reported below
                continue
            results[res.host] = res
            if on_result:
                on_result(res)
    finally:
        for proc in workers:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
    for target in targets:
        if target.name not in results:
            lost = DiscoveryResult(target.name, reason=REASON_BUG,
                                   error="the discovery worker process died")
            results[target.name] = lost
            if on_result:
                on_result(lost)
    return [results[t.name] for t in targets]


def site_targets(site: Site, hosts: Sequence[Host], max_parallel: int | None = None
                 ) -> list[DiscoveryTarget]:
    """Discovery targets for inventory hosts; raises when a credentials reference they use
    cannot be resolved (each host's credentials are read again when it opens)."""
    check_credentials(site, hosts)
    redfish = site.settings.redfish
    in_flight = min(len(hosts), max_parallel or redfish.max_parallel)
    per_bmc = connections_per_bmc(redfish.connections, in_flight)
    return [DiscoveryTarget(h.name, partial(open_bmc, site, h, connections=per_bmc),
                            redfish.discovery_deadline_s, nic_policy(h)) for h in hosts]


# hosts per transaction: one commit (fsync) per host made a 4,096-BMC run spend ~48 s writing;
# a bounded batch keeps other runs' writers from waiting long for the site's write lock
RECORD_BATCH = 256


def record_results(store: StateStore, results: Sequence[DiscoveryResult]) -> None:
    """Store facts and move hosts: read fully -> discovered; failed -> failed with the reason."""
    store.ensure_hosts([r.host for r in results])
    for start in range(0, len(results), RECORD_BATCH):
        with store.batch():
            for res in results[start:start + RECORD_BATCH]:
                _record_one(store, res)


def _record_one(store: StateStore, res: DiscoveryResult) -> None:
    if res.ok and res.facts is not None:
        store.record_discovery(res.host, facts_to_dict(res.facts))
        return
    if res.facts is not None:
        store.record_facts(res.host, facts_to_dict(res.facts))
    state = store.get(res.host).state
    message = f"discovery: {res.reason}"
    if state in FAILABLE:
        store.transition(res.host, NodeState.FAILED, reason=message, error=res.error)
    else:
        store.record_event(res.host, "discovery-failed", message, {"error": res.error})


def discover_site(
    site: Site,
    hosts: Sequence[Host],
    *,
    store: StateStore | None = None,
    max_parallel: int | None = None,
    on_result: Callable[[DiscoveryResult], None] | None = None,
) -> list[DiscoveryResult]:
    """Discover inventory hosts in parallel and, given a store, record what was learned."""
    parallel = max_parallel or site.settings.redfish.max_parallel or DEFAULT_MAX_PARALLEL
    results = discover_all(site_targets(site, hosts, parallel), max_parallel=parallel,
                           on_result=on_result)
    if store is not None:
        record_results(store, results)
    return results


def clock_skew_alerts(results: Sequence[DiscoveryResult], max_skew_s: float) -> dict[str, float]:
    """Hosts whose BMC clock is off by more than ``max_skew_s`` (host -> skew seconds)."""
    out: dict[str, float] = {}
    for res in results:
        skew = res.facts.clock_skew_s if res.facts else None
        if skew is not None and abs(skew) > max_skew_s:
            out[res.host] = skew
    return out


def duplicate_serials(results: Sequence[DiscoveryResult],
                      known: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Serial numbers that more than one host reports (serial -> hosts, in order): two BMC
    addresses that reach one machine, or cloned boards/VMs. ``known``: serials stored for hosts
    not read this time (host -> serial); a blank serial says nothing."""
    seen: dict[str, list[str]] = {}
    read = {r.host for r in results}
    pairs = [(r.host, r.facts.serial) for r in results if r.facts]
    pairs += [(h, serial) for h, serial in (known or {}).items() if h not in read]
    for host, serial in pairs:
        if serial and serial.strip():
            seen.setdefault(serial.strip(), []).append(host)
    return {serial: hosts for serial, hosts in seen.items() if len(hosts) > 1}
