"""The rack runner: from powered-off hosts to installed, reachable, configured ones.

discover -> fix or report clock skew -> deploy (the backend: PXE, power cycle, callbacks, boot
from disk) -> wait for SSH -> pin its host key -> site.yml -> record states. At most ``wave``
hosts install at once (a rolling wave: the uplink's stream count; when the backend gates image
streams itself, as many as keep its streams busy, adapted to what the run observes, see waves.py
and inflight.py); a failed deploy is retried before the host is marked failed. Hosts go to
site.yml in waves as they come up (configure_waves.py), never waiting for the slowest install.

Every host records the step it finished (state/steps.py), and a run continues each host from the
step after it (plan.py): an installed host that missed site.yml is configured, not reinstalled;
a host that was configured is reinstalled only with consent (``RackOptions.reinstall``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from provisioner.bmc.base import BMC, HostFacts
from provisioner.deploy.base import DeployBackend, DeployMethod, DeployRequest
from provisioner.events import Event, emit
from provisioner.exceptions import ProvisionerError
from provisioner.http_policy.deadline import deadline as host_deadline
from provisioner.inventory.model import Host, Site
from provisioner.state import Lease, NodeState, StateStore, Step
from provisioner.wording import plural
from provisioner.workflow.ansible_logs import host_log
from provisioner.workflow.bmc_access import nic_policy
from provisioner.workflow.configure import (
    HostRecap,
    key_targets,
    known_hosts_file,
    pin_host_key,
    run_playbook,
)
from provisioner.workflow.configure_waves import ConfigureWaves
from provisioner.workflow.discover import facts_to_dict
from provisioner.workflow.inflight import InFlightWindow
from provisioner.workflow.nic_choice import apply_nic_policy
from provisioner.workflow.resume import Intent, RunPlan, plan_hosts
from provisioner.workflow.ssh_wait import wait_for_ssh
from provisioner.workflow.waves import WavePlan, choose_wave_size, in_flight_ceiling

HostStatus = Literal["ok", "failed", "skipped"]
# ansible-playbook's exit when interrupted (its "User interrupted execution"), or killed by SIGINT
INTERRUPTED = (99, -2)
BMCOpener = Callable[[Site, Host], BMC]


class Reporter(Protocol):
    """Receives progress: a phase change of a host, and its final result."""

    def phase(self, host: str, phase: str, message: str) -> None: ...

    def finished(self, result: HostResult) -> None: ...


@dataclass
class HostResult:
    """How one host's run ended."""

    host: str
    status: HostStatus
    reason: str = ""
    phases: dict[str, float] = field(default_factory=dict)
    attempts: int = 0


@dataclass
class RackOptions:
    """What `provision rack` / `provision reimage` were asked to do."""

    method: DeployMethod = "image"
    max_parallel: int | None = None
    configure: bool = True
    wait_ssh: bool = True
    reimage: bool = False  # redeploy hosts even if already done (only those named)
    restart: bool = False  # reimage: install again even past an interrupted re-image's install
    reinstall: bool = False  # consent to reinstall hosts that were configured before they failed
    configure_only: bool = False  # `provision configure`: site.yml for installed hosts, nothing else
    force: bool = False  # also hosts in maintenance
    discover: bool | None = None  # None: when the backend drives power or a MAC is unknown
    ssh_timeout_s: float = 900.0
    log_dir: Path | None = None
    playbooks: tuple[str, ...] = ("playbooks/site.yml",)  # run after the install, in order
    configure_runs: int = 2  # site.yml runs at once (waves of hosts that are ready)
    configure_gather_s: float = 30.0  # a wave waits this long for hosts coming up together


@dataclass
class RackResult:
    """The run's summary."""

    wave: WavePlan
    results: list[HostResult]
    configure_log: Path | None = None  # the first wave's site.yml log
    configure_logs: list[Path] = field(default_factory=list)  # every wave's, in order

    @property
    def failed(self) -> list[HostResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def ok(self) -> list[HostResult]:
        return [r for r in self.results if r.status == "ok"]

    @property
    def skipped(self) -> list[HostResult]:
        return [r for r in self.results if r.status == "skipped"]


class _HostFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RackRunner:
    """Deploys a set of hosts of one site through one backend."""

    def __init__(
        self,
        site: Site,
        store: StateStore,
        backend: DeployBackend,
        *,
        open_bmc: BMCOpener | None,
        reporter: Reporter,
        options: RackOptions,
        clock: Callable[[], float] = time.monotonic,
        lease: Lease | None = None,
    ) -> None:
        self.site = site
        self.clock = clock  # the window's and the discovery phase's time (benchmarks: simulated)
        self.window: InFlightWindow | None = None  # set by run() when hosts in flight adapt
        self.store = store
        self.backend = backend
        self.open_bmc = open_bmc
        self.reporter = reporter
        self.options = options
        self.lease = lease  # the hosts this run holds (None: the caller took no locks)
        self._lock = threading.Lock()
        self._waves: ConfigureWaves | None = None
        self._results: dict[str, HostResult] = {}  # hosts handed to site.yml waves
        self._logs: list[Path] = []
        self._order: dict[str, int] = {}
        # set when the run stops (Ctrl-C, or a bug): no install, retry, key scan or site.yml
        # wave starts after it; installs already under way finish and stay `deployed`
        self.stopping = threading.Event()

    # -- selection --------------------------------------------------------------------------

    def plan(self, hosts: Sequence[Host], *, enrol: bool = True) -> RunPlan:
        """What this run does with each host: install, configure only, or leave (and why);
        ``enrol`` records hosts the store has not met yet (a dry run writes nothing)."""
        if enrol:
            self.store.ensure_hosts([h.name for h in hosts])
        records = {r.name: r for r in self.store.records([h.name for h in hosts])}
        o = self.options
        intent = Intent(configure=o.configure, reimage=o.reimage, restart=o.restart,
                        reinstall=o.reinstall, configure_only=o.configure_only, force=o.force)
        return plan_hosts(hosts, records, intent, self.lease.busy if self.lease else None)

    def wave_plan(self, n: int) -> WavePlan:
        """The concurrency for ``n`` hosts on this site's uplink."""
        s = self.site.settings
        image_bytes = s.image.size_bytes if s.image else None
        explicit = self.options.max_parallel or s.max_parallel
        # the site's ceiling of adaptive hosts in flight (a gated backend without --max-parallel)
        ceiling = (
            in_flight_ceiling(s.embedded.max_hosts_in_flight) if s.embedded is not None else None
        )
        return choose_wave_size(
            n,
            uplink_gbps=s.uplink_gbps,
            host_link_gbps=self.backend.host_link_gbps(self.site),
            image_bytes=image_bytes,
            explicit=explicit,
            streams=self.backend.image_streams(self.site),
            ceiling=ceiling,
        )

    # -- the run ----------------------------------------------------------------------------

    def run(self, hosts: Sequence[Host]) -> RackResult:
        """Install and configure ``hosts`` from the step each finished; never touches a host not
        in ``hosts`` (nor one another run holds)."""
        plan = self.plan(hosts)
        skipped = [HostResult(n, "skipped", why) for n, why in plan.skipped.items()]
        for r in skipped:
            self.reporter.finished(r)
        wave = self.wave_plan(len(plan.install))
        emit(Event("run", self._run_line(plan, wave), data={
            "hosts": plan.names, "install": [h.name for h in plan.install],
            "configure_only": [h.name for h in plan.configure],
            "skipped": [r.host for r in skipped], "configure": self.options.configure,
        }))  # fmt: skip
        results: list[HostResult] = list(skipped)
        waves = None
        if self.options.configure and plan.names:
            waves = ConfigureWaves(self._configure_wave, expected=len(plan.names),
                                   max_runs=self.options.configure_runs,
                                   gather_s=self.options.configure_gather_s)  # fmt: skip
        self._results.clear()
        self._logs.clear()
        self._order = {h.name: i for i, h in enumerate(hosts)}
        self._waves = waves
        self.stopping.clear()
        try:
            results += self._continue(plan.configure)
            if plan.install:
                results += self._install(plan.install, wave)
            if waves is not None:
                waves.close()
                waves.join()
        except BaseException:
            self._stop()  # interrupted: hosts not in site.yml yet stay for the next run
            if waves is not None:
                with contextlib.suppress(Exception):
                    waves.join()  # the waves running end as Ctrl-C ends their ansible-playbook
            raise
        order = {h.name: i for i, h in enumerate(hosts)}
        results.sort(key=lambda r: order.get(r.host, 0))
        logs = list(self._logs)
        return RackResult(wave, results, logs[0] if logs else None, logs)

    def _run_line(self, plan: RunPlan, wave: WavePlan) -> str:
        parts = []
        if plan.install or not plan.configure:
            parts.append(f"{plural(len(plan.install), 'host')} to install, {wave.summary}")
        if plan.configure:
            parts.append(f"{plural(len(plan.configure), 'host')} installed already: site.yml only")
        return "; ".join(parts)

    def _install(self, hosts: list[Host], wave: WavePlan) -> list[HostResult]:
        """Install ``hosts`` with the backend (its server held for this run meanwhile)."""
        requests = [self.request_for(h) for h in hosts]
        if self.lease is not None and self.backend.one_per_site:
            self.lease.hold_deploy_server(on_wait=self._waiting_for_server(hosts))
        try:
            self.backend.prepare(self.site, requests)
            window = self.window = self._window(wave)
            workers = max(1, wave.ceiling or wave.size)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deploy") as pool:
                try:
                    if window is None:
                        return list(pool.map(self._install_one, requests))
                    futures = []
                    for req in requests:
                        window.wait_for_slot()
                        futures.append(pool.submit(self._deploy_in_window, window, req))
                    return [f.result() for f in futures]
                except BaseException:
                    # before the pool waits for the installs under way (on leaving the block):
                    # hosts still queued never start, and those that finish installing go to no
                    # new site.yml wave
                    pool.shutdown(wait=False, cancel_futures=True)
                    self._stop()
                    raise
        finally:
            try:
                self.backend.close()
            finally:
                if self.lease is not None:
                    self.lease.release_deploy_server()

    def _waiting_for_server(self, hosts: list[Host]) -> Callable[[str], None]:
        def say(holder: str) -> None:
            for h in hosts:
                self.reporter.phase(h.name, "wait", f"the deploy server is in use by {holder}")

        return say

    def _continue(self, hosts: list[Host]) -> list[HostResult]:
        """Hosts installed already: their keys pinned again, then site.yml (in its waves)."""
        if not hosts:
            return []
        with ThreadPoolExecutor(max_workers=min(32, len(hosts)), thread_name_prefix="resume") as pool:
            try:
                return list(pool.map(self._continue_one, hosts))
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                self._stop()
                raise

    def _stop(self) -> None:
        """The run stops: nothing new starts (see ``stopping``); site.yml waves not started yet
        never start, so a host that finishes its install now stays `deployed` for the next run."""
        self.stopping.set()
        if self._waves is not None:
            self._waves.cancel()

    def _continue_one(self, host: Host) -> HostResult:
        result = HostResult(host.name, "ok", "deployed")
        rec = self.store.get(host.name)
        self.store.record_event(host.name, "resume", f"continuing from step {rec.step.value}: "
                                "host keys, then site.yml")  # fmt: skip
        self._progress(host.name, "resume", "installed already: pinning its host key, then site.yml")
        self._after_install(host, result)
        return result

    def _window(self, wave: WavePlan) -> InFlightWindow | None:
        """The adaptive hosts-in-flight window of a gated plan without --max-parallel."""
        if wave.ceiling is None or wave.streams is None:
            return None
        s = self.site.settings
        link = self.backend.host_link_gbps(self.site)
        rate = min(link, s.uplink_gbps / wave.streams) * 1e9
        size = s.image.size_bytes if s.image and s.image.size_bytes else 0
        return InFlightWindow(
            streams=wave.streams,
            initial=wave.size,
            ceiling=wave.ceiling,
            stream_s=size * 8 / rate if size else 60.0,
            gate_stats=self.backend.stream_stats,
            clock=self.clock,
            peers=self.backend.serves_peers(self.site),
        )

    def _deploy_in_window(self, window: InFlightWindow, req: DeployRequest) -> HostResult:
        window.started(req.host.name)
        try:
            result = self._deploy_one(req)
        finally:
            window.finished(req.host.name)  # pinning its key and site.yml are out of the window
        self._settle(req.host, result)
        return result

    def _install_one(self, req: DeployRequest) -> HostResult:
        result = self._deploy_one(req)
        self._settle(req.host, result)
        return result

    def _settle(self, host: Host, result: HostResult) -> None:
        """After a host's install: a failure is final; an installed host goes on."""
        if result.status == "failed":
            self.reporter.finished(result)
            if self._waves is not None:
                self._waves.dropped(host.name)
            return
        self._after_install(host, result)

    def _after_install(self, host: Host, result: HostResult) -> None:
        """Pin the host's new key and hand it to the next site.yml wave (or end its run)."""
        if self._waves is None:
            self.reporter.finished(result)
            return
        if self.stopping.is_set():
            self._interrupted(result)
            return
        t0 = self.clock()
        try:
            targets = key_targets(self.site, [host.name])
            why = pin_host_key(known_hosts_file(self.site), targets[0]) if targets else None
        except OSError as exc:  # the known_hosts file cannot be written: this host cannot go on
            why = f"cannot record it in {known_hosts_file(self.site)}: {exc.strerror or exc}"
        result.phases["hostkey"] = self.clock() - t0
        if why is None:
            self._results[host.name] = result
            if not self._waves.ready(host.name):  # the run stopped while its key was read
                self._interrupted(result)
            return
        result.status, result.reason = "failed", f"host key not read: {why}"
        self.store.transition(host.name, NodeState.FAILED, reason="configure failed",
                              error=result.reason)  # fmt: skip
        self._progress(host.name, "failed", result.reason)
        self.reporter.finished(result)
        self._waves.dropped(host.name)

    def _interrupted(self, result: HostResult) -> None:
        """The run stopped after this host's install and before its site.yml: it stays
        `deployed`, and the next run configures it (no failure of the host)."""
        result.status, result.reason = "failed", "interrupted before site.yml: the next run continues it"
        self._progress(result.host, "interrupted", result.reason)
        self.reporter.finished(result)

    def request_for(self, host: Host) -> DeployRequest:
        """The deploy request for a host, before discovery fills in its MAC."""
        s = self.site.settings
        return DeployRequest(
            host=host,
            mac=host.provisioning_mac or "",
            method=self.options.method,
            timeout_s=s.deploy_timeout_s,
        )

    def _deploy_deadline_s(self, req: DeployRequest) -> float | None:
        """All of one attempt's BMC traffic, when this backend drives the BMC itself: the
        deploy's own timeout (its waits) plus settings.redfish.host_deadline_s (#32 item 7)."""
        if not self.backend.drives_power:
            return None  # the engine (MAAS, Ironic) talks to the BMC; its API has its own bounds
        return req.timeout_s + self.site.settings.redfish.host_deadline_s

    def _progress(self, host: str, phase: str, message: str) -> None:
        if self.window is not None:
            self.window.phase(host, phase)
        self.reporter.phase(host, phase, message)
        self.store.record_event(host, f"deploy.{phase}", message)

    def _deploy_one(self, req: DeployRequest) -> HostResult:
        host = req.host
        result = HostResult(host.name, "failed")
        bmc: BMC | None = None
        try:
            t0 = self.clock()  # the run's clock, like the backend's phases (a benchmark's is simulated)
            bmc = self._discover(req, result)
            result.phases["discover"] = self.clock() - t0
            if self.options.reimage:
                self._progress(host.name, "release", "releasing for re-image (root disk only)")
                self.backend.release(req, erase=False)
            attempts = 1 + self.site.settings.deploy_retries
            reason = ""
            for attempt in range(1, attempts + 1):
                if self.stopping.is_set():  # Ctrl-C: no new attempt (the next run installs it)
                    raise _HostFailed(f"interrupted before install attempt {attempt}/{attempts}")
                result.attempts = attempt
                req.attempt = attempt
                req.bmc = bmc
                self.store.transition(
                    host.name,
                    NodeState.DEPLOYING,
                    reason=f"{self.options.method} deploy, attempt {attempt}/{attempts}",
                    force=self.options.force,
                    goal=Step.CONFIGURED if self.options.configure else Step.INSTALLED,
                )
                self._progress(host.name, "deploy", f"attempt {attempt}/{attempts}")
                try:
                    with host_deadline(self._deploy_deadline_s(req)):
                        outcome = self.backend.deploy(req, self._progress)
                except ProvisionerError as exc:
                    ok, reason, phases = False, str(exc), {}
                else:
                    ok, reason, phases = outcome.ok, outcome.reason, outcome.phases
                for k, v in phases.items():
                    result.phases[k] = result.phases.get(k, 0.0) + v
                if ok:
                    break
                self.store.record_event(
                    host.name, "deploy.attempt_failed", reason, {"attempt": attempt}
                )
                self._progress(host.name, "retry" if attempt < attempts else "failed", reason)
            else:
                raise _HostFailed(f"deploy failed after {attempts} attempt(s): {reason}")
            if self.options.wait_ssh:
                self._progress(host.name, "ssh", "waiting for SSH")
                result.phases["ssh"] = self._wait_ssh(host)
            self.store.transition(host.name, NodeState.DEPLOYED, reason="installed, SSH answers")
            result.status = "ok"
            result.reason = "deployed"
        except _HostFailed as exc:
            result.reason = exc.reason
        except ProvisionerError as exc:
            result.reason = str(exc).splitlines()[0]
        except Exception as exc:  # one host's bug must not stop the rack: report it as its failure
            result.reason = f"unexpected error: {type(exc).__name__}: {exc}"
        finally:
            if bmc is not None:
                with contextlib.suppress(Exception):
                    bmc.close()
        if result.status == "failed":
            rec = self.store.get(host.name)
            self.store.transition(
                host.name,
                NodeState.FAILED,
                reason="deploy failed",
                error=result.reason,
                force=rec.state == NodeState.MAINTENANCE and self.options.force,
            )
            self._progress(host.name, "failed", result.reason)
        else:
            # the host's run is over only when no playbook follows: "done" is said once, at the end
            follows = self.options.configure
            self._progress(
                host.name,
                "deployed" if follows else "done",
                "installed, SSH answers" + ("; site.yml follows" if follows else ""),
            )
        return result

    def _discover(self, req: DeployRequest, result: HostResult) -> BMC | None:
        host = req.host
        need = self.options.discover
        if need is None:
            need = self.backend.drives_power or not host.provisioning_mac
        if not need:
            req.mac = host.provisioning_mac or ""
            # the MAC pinned in the inventory stands in for what discovery would have read
            self.store.record_discovery(
                host.name, {"provisioning_mac": req.mac, "provisioning_mac_source": "inventory"}
            )
            return None
        if self.open_bmc is None:
            raise _HostFailed("no BMC access configured for this run")
        self._progress(host.name, "discover", f"reading BMC {host.bmc.address}")
        # discover's per-host deadline (#32 item 7): a BMC spreading its answers fails this
        # host "deadline exceeded" instead of holding its slot of the wave.
        with host_deadline(self.site.settings.redfish.discovery_deadline_s):
            bmc = self.open_bmc(self.site, host)
            facts = bmc.discover()
        # The pinned MAC, else the profile's rule, among the ports the BMC reported.
        apply_nic_policy(facts, nic_policy(host))
        self.store.record_discovery(host.name, facts_to_dict(facts))
        mac = host.provisioning_mac or facts.provisioning_mac
        if not mac:
            why = facts.extra.get("provisioning_nic_error")
            raise _HostFailed(
                str(why)
                if why
                else "no provisioning MAC: the BMC reported no port matching the rule"
            )
        req.mac = mac
        # backends that match machines by any of their MACs (MAAS) get them all, and the
        # Redfish system id for their own power driver
        req.macs = tuple(sorted({n.mac for n in facts.nics if n.mac}))
        system_path = facts.extra.get("system_path")
        req.system_path = str(system_path) if system_path else None
        vendor = facts.extra.get("vendor")
        req.bmc_vendor = str(vendor) if vendor else None
        self._clock(host, bmc, facts)
        return bmc

    def _clock(self, host: Host, bmc: BMC, facts: HostFacts) -> None:
        skew = facts.clock_skew_s
        limit = self.site.settings.max_clock_skew_s
        if skew is None or abs(skew) <= limit:
            return
        fixer = getattr(bmc, "set_clock", None)
        if callable(fixer):
            try:
                fixer()
            except ProvisionerError as exc:
                msg = f"BMC clock is off by {skew:+.0f}s and could not be set: {exc}"
            else:
                msg = f"BMC clock was off by {skew:+.0f}s; set it to this machine's UTC time"
        else:
            msg = (
                f"BMC clock is off by {skew:+.0f}s (limit {limit:.0f}s); the installed OS "
                "syncs from the site's NTP, but fix the BMC's NTP too"
            )
        self.store.record_event(host.name, "clock_skew", msg, {"skew_s": skew})
        self._progress(host.name, "clock", msg)

    def _wait_ssh(self, host: Host) -> float:
        s = self.site.settings
        addr = host.addresses.get("provisioning")
        if addr is None:
            raise _HostFailed("the host has no provisioning address to reach over SSH")
        key = self.site.resolve_path(s.ssh_private_key) if s.ssh_private_key else None
        return wait_for_ssh(str(addr), s.ssh_user, key, self.options.ssh_timeout_s)

    def _configure_wave(self, names: list[str]) -> None:
        """One site.yml run over hosts that are ready; each host's recap decides its state."""
        names = sorted(names, key=lambda n: self._order.get(n, 0))  # the inventory's order
        for n in names:
            self._progress(n, "configure", "running " + " ".join(self.options.playbooks))
        log_dir = self.options.log_dir or (self.store.path.parent / f"{self.site.name}-logs")
        with self._lock:
            log = log_dir / f"site-{time.strftime('%Y%m%d-%H%M%S')}-{len(self._logs) + 1}.log"
            self._logs.append(log)
        t0 = time.monotonic()
        code, recaps, _ = run_playbook(self.site.path, names, playbook=self.options.playbooks,
                                       log_file=log, pin_keys=False, strict_keys=True)  # fmt: skip
        took = time.monotonic() - t0
        for name in names:
            self._configured_one(self._results[name], recaps.get(name), code, log, took)

    def _configured_one(
        self, r: HostResult, recap: HostRecap | None, code: int, log: Path, took: float
    ) -> None:
        r.phases["configure"] = took
        if recap is None and code in INTERRUPTED:
            # Ctrl-C reached ansible-playbook too: the host is as installed as it was, and the
            # next run continues it with site.yml (it is no failure of the host)
            r.status, r.reason = "failed", "site.yml interrupted: the next run continues it"
            self._progress(r.host, "interrupted", r.reason)
        elif recap is not None and recap.success:
            self.store.transition(r.host, NodeState.CONFIGURED, reason="site.yml applied")
            r.reason = "configured"
            self._progress(r.host, "done", "configured")
        else:
            why = (
                f"{' '.join(self.options.playbooks)} failed (failed={recap.failed}, "
                f"unreachable={recap.unreachable})"
                if recap
                else f"the playbook did not reach the host (exit {code})"
            )
            r.status = "failed"
            own = host_log(log, r.host)
            r.reason = f"{why}; log: {own if own.exists() else log}"
            self.store.transition(r.host, NodeState.FAILED, reason="configure failed",
                                  error=r.reason)  # fmt: skip
            self._progress(r.host, "failed", r.reason)
        self.reporter.finished(r)
