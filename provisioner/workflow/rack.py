"""The rack runner: from powered-off hosts to installed, reachable, configured ones.

discover -> fix or report clock skew -> deploy (the backend: PXE, power cycle, callbacks, boot
from disk) -> wait for SSH -> site.yml -> record states. At most ``wave`` hosts install at once
(a rolling wave: the uplink's stream count; when the backend gates image streams itself, as many
as keep its streams busy, adapted to what the run observes, see waves.py and inflight.py); a
failed deploy is retried before the host is marked failed; hosts already done are skipped, so a
re-run resumes where the last one stopped.
"""

from __future__ import annotations

import contextlib
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
from provisioner.inventory.model import Host, Site
from provisioner.state import DONE_STATES, NodeState, StateStore
from provisioner.wording import plural
from provisioner.workflow.ansible_logs import host_log
from provisioner.workflow.configure import run_playbook
from provisioner.workflow.discover import facts_to_dict
from provisioner.workflow.inflight import InFlightWindow
from provisioner.workflow.selection import held_in_maintenance
from provisioner.workflow.ssh_wait import wait_for_ssh
from provisioner.workflow.waves import WavePlan, choose_wave_size, in_flight_ceiling

HostStatus = Literal["ok", "failed", "skipped"]
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
    force: bool = False  # also hosts in maintenance
    discover: bool | None = None  # None: when the backend drives power or a MAC is unknown
    ssh_timeout_s: float = 900.0
    log_dir: Path | None = None
    playbooks: tuple[str, ...] = ("playbooks/site.yml",)  # run after the install, in order


@dataclass
class RackResult:
    """The run's summary."""

    wave: WavePlan
    results: list[HostResult]
    configure_log: Path | None = None

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
    ) -> None:
        self.site = site
        self.clock = clock  # the window's and the discovery phase's time (benchmarks: simulated)
        self.window: InFlightWindow | None = None  # set by run() when hosts in flight adapt
        self.store = store
        self.backend = backend
        self.open_bmc = open_bmc
        self.reporter = reporter
        self.options = options

    # -- selection --------------------------------------------------------------------------

    def plan(self, hosts: Sequence[Host]) -> tuple[list[Host], list[HostResult]]:
        """Split hosts into those to deploy and those skipped (done already, in maintenance)."""
        self.store.ensure_hosts([h.name for h in hosts])
        todo: list[Host] = []
        skipped: list[HostResult] = []
        for h in hosts:
            rec = self.store.get(h.name)
            if held_in_maintenance(rec, force=self.options.force):
                skipped.append(HostResult(h.name, "skipped", f"in maintenance: {rec.reason}"))
            elif rec.state in DONE_STATES and not self.options.reimage:
                skipped.append(HostResult(h.name, "skipped", f"already {rec.state.value}"))
            elif rec.state == NodeState.DEPLOYING and not self.options.reimage:
                todo.append(h)  # an interrupted run: resume it
            else:
                todo.append(h)
        return todo, skipped

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
        """Deploy ``hosts`` (and configure them); never touches a host not in ``hosts``."""
        todo, skipped = self.plan(hosts)
        for r in skipped:
            self.reporter.finished(r)
        wave = self.wave_plan(len(todo))
        emit(
            Event(
                "run",
                f"{plural(len(todo), 'host')} to install, {wave.summary}",
                data={
                    "hosts": [h.name for h in todo],
                    "skipped": [r.host for r in skipped],
                    "configure": self.options.configure,
                },
            )
        )
        results: list[HostResult] = list(skipped)
        if not todo:
            return RackResult(wave, results)
        requests = [self.request_for(h) for h in todo]
        self.backend.prepare(self.site, requests)
        window = self.window = self._window(wave)
        try:
            workers = max(1, wave.ceiling or wave.size)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deploy") as pool:
                if window is None:
                    deployed = list(pool.map(self._deploy_one, requests))
                else:
                    futures = []
                    for req in requests:
                        window.wait_for_slot()
                        futures.append(pool.submit(self._deploy_in_window, window, req))
                    deployed = [f.result() for f in futures]
        finally:
            self.backend.close()
        results.extend(deployed)
        log = None
        ok_hosts = [r for r in deployed if r.status == "ok"]
        if self.options.configure and ok_hosts:
            log = self._configure(ok_hosts)
        for r in deployed:
            self.reporter.finished(r)
        order = {h.name: i for i, h in enumerate(hosts)}
        results.sort(key=lambda r: order.get(r.host, 0))
        return RackResult(wave, results, log)

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
            return self._deploy_one(req)
        finally:
            window.finished(req.host.name)

    def request_for(self, host: Host) -> DeployRequest:
        """The deploy request for a host, before discovery fills in its MAC."""
        s = self.site.settings
        return DeployRequest(
            host=host,
            mac=host.provisioning_mac or "",
            method=self.options.method,
            timeout_s=s.deploy_timeout_s,
        )

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
                result.attempts = attempt
                req.attempt = attempt
                req.bmc = bmc
                self.store.transition(
                    host.name,
                    NodeState.DEPLOYING,
                    reason=f"{self.options.method} deploy, attempt {attempt}/{attempts}",
                    force=self.options.force,
                )
                self._progress(host.name, "deploy", f"attempt {attempt}/{attempts}")
                try:
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
        bmc = self.open_bmc(self.site, host)
        facts = bmc.discover()
        self.store.record_discovery(host.name, facts_to_dict(facts))
        mac = facts.provisioning_mac
        if host.provisioning_mac and mac and host.provisioning_mac != mac:
            raise _HostFailed(
                f"the inventory pins provisioning MAC {host.provisioning_mac} but the BMC's "
                f"provisioning NIC rule selects {mac}; fix the inventory or the profile's rule"
            )
        mac = host.provisioning_mac or mac
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
        req.extra["macs"] = sorted({n.mac for n in facts.nics if n.mac})
        system_path = facts.extra.get("system_path")
        if system_path:
            req.extra["redfish_system_id"] = str(system_path).rstrip("/").rsplit("/", 1)[-1]
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

    def _configure(self, ok_hosts: list[HostResult]) -> Path:
        names = [r.host for r in ok_hosts]
        for n in names:
            self._progress(n, "configure", "running " + " ".join(self.options.playbooks))
        log_dir = self.options.log_dir or (self.store.path.parent / f"{self.site.name}-logs")
        log = log_dir / f"site-{time.strftime('%Y%m%d-%H%M%S')}.log"
        t0 = time.monotonic()
        code, recaps, _ = run_playbook(
            self.site.path, names, playbook=self.options.playbooks, log_file=log
        )
        took = time.monotonic() - t0
        for r in ok_hosts:
            r.phases["configure"] = took
            recap = recaps.get(r.host)
            if recap is not None and recap.success:
                self.store.transition(r.host, NodeState.CONFIGURED, reason="site.yml applied")
                r.reason = "configured"
                self._progress(r.host, "done", "configured")
                continue
            why = (
                f"{' '.join(self.options.playbooks)} failed (failed={recap.failed}, unreachable={recap.unreachable})"
                if recap
                else f"the playbook did not reach the host (exit {code})"
            )
            r.status = "failed"
            own = host_log(log, r.host)
            r.reason = f"{why}; log: {own if own.exists() else log}"
            self.store.transition(
                r.host, NodeState.FAILED, reason="configure failed", error=r.reason
            )
            self._progress(r.host, "failed", r.reason)
        return log
