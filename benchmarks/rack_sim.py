"""The simulated rack behind benchmarks/rack.py: a BMC farm, a site file for it, a backend.

- :func:`bmc_farm`: one sushy-emulator (fake driver) holding one System per host, behind the
  Redfish proxy of provisioner/testing listening on one loopback address per host
  (127.100.x.y, TLS), optionally delaying every answer.
- :func:`write_site`: a foundation-format site file whose hosts' BMCs are those addresses.
- :class:`FarmBMC` / :func:`farm_opener`: the real Redfish BMC class; each address serves every
  System of the emulator, so the host's BMC picks its own System by UUID. Every real request
  it makes is charged a BMC latency in simulated time.
- :class:`SimulatedBackend`: a DeployBackend that drives the real BMC (one-time PXE, power
  cycle, boot from disk, power cycle) and simulates only the image transfer, over a
  :class:`~provisioner.testing.uplink_sim.SharedUplink`.
- :class:`Pacer`: the runner's reporter; tells the virtual clock when a host starts and ends.

Everything is timed on a :class:`~provisioner.testing.uplink_sim.VirtualClock` (simulated seconds).
"""

from __future__ import annotations

import random
import sys
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from provisioner.bmc.base import BootPortChooser, BootTarget, HostFacts, PowerAction
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.deploy.base import (
    DeployBackend,
    DeployOutcome,
    DeployRequest,
    ProgressFn,
    StreamStats,
)
from provisioner.deploy.embedded.gate import StreamGate
from provisioner.deploy.embedded.http import IMAGE_HOLD_S
from provisioner.deploy.embedded.peers import PeerPool
from provisioner.exceptions import DeployError
from provisioner.inventory import Host, Site
from provisioner.inventory.credentials import resolve_credentials
from provisioner.redfish.client import RedfishClient
from provisioner.testing.redfish_peers import (
    fake_system,
    fault_proxy,
    make_tls,
    sushy_emulator,
    write_emulator_config,
)
from provisioner.testing.uplink_sim import SharedUplink, VirtualClock, VirtualSemaphore
from provisioner.workflow.bmc_access import client_options, nic_policy
from provisioner.workflow.rack import HostResult

PASSWORD_ENV = "PROVISIONER_BENCH_BMC_PASSWORD"
HOSTS_PER_RACK = 20  # 2U HGX servers, 40 usable units
GIB = 1 << 30


def bmc_address(i: int) -> str:
    """The loopback address of host ``i``'s BMC (127.100.x.y: all of 127/8 routes to lo)."""
    return f"127.100.{i // 250}.{i % 250 + 1}"


def system_uuid(i: int) -> str:
    """A stable UUID for the emulated System of host ``i``."""
    return str(uuidlib.UUID(int=(0x5E1A << 112) | i))


def provisioning_mac(i: int) -> str:
    """Host ``i``'s provisioning port (the profile's rule selects it by prefix)."""
    return f"52:54:00:{i >> 8:02x}:{i & 0xFF:02x}:01"


def host_name(i: int) -> str:
    """The inventory name of host ``i`` (the site's template gives the same)."""
    return f"sim-r{i // HOSTS_PER_RACK + 1:02d}-u{(i % HOSTS_PER_RACK) * 2 + 1:02d}"


@dataclass(frozen=True)
class Farm:
    """The running BMC farm: one URL per host, and the host-name -> System UUID map."""

    urls: list[str]
    systems: dict[str, str]


@contextmanager
def bmc_farm(n: int, workdir: Path, *, delay_s: float) -> Iterator[Farm]:
    """Run one emulator with ``n`` powered-off Systems behind a TLS proxy on ``n`` addresses.

    Use a fresh farm per run: the fake driver makes power changes take 1-11 real seconds, and a
    power cycle of a host that is on waits for them (a rack that starts powered off does not).
    """
    systems = [
        fake_system(system_uuid(i), f"sim-{i:04d}",
                    [provisioning_mac(i), f"52:54:02:{i >> 8:02x}:{i & 0xFF:02x}:01"], "Off")
        for i in range(n)
    ]
    disks = [
        {"Id": "boss", "Name": "BOSS-N1", "CapacityBytes": 480103981056, "Protocol": "SATA"},
        {"Id": "nvme0", "Name": "NVMe 0", "CapacityBytes": 3840755982336, "Protocol": "NVMe"},
    ]
    conf = write_emulator_config(workdir / "emu", systems,
                                 drives={system_uuid(i): disks for i in range(n)})
    tls = make_tls(workdir / "tls")
    with sushy_emulator(conf) as upstream, fault_proxy(
        upstream, workdir, listen=[bmc_address(i) for i in range(n)],
        args=["--delay", f"{delay_s:.4f}"], tls=tls,
    ) as urls:
        yield Farm(urls, {host_name(i): system_uuid(i) for i in range(n)})


def write_site(
    directory: Path,
    farm: Farm,
    *,
    uplink_gbps: float,
    host_link_gbps: float,
    image_bytes: int,
    retries: int,
    name: str = "simrack",
) -> Path:
    """Write a site file for the farm's hosts; returns its path."""
    racks: list[dict[str, Any]] = []
    for i, url in enumerate(farm.urls):
        if i % HOSTS_PER_RACK == 0:
            index = i // HOSTS_PER_RACK + 1
            racks.append({
                "name": f"r{index:02d}", "index": index, "units": 42,
                "host_name_template": "sim-{rack}-u{u:02d}",
                "defaults": {"profile": "hgx", "bmc": {"vendor": "generic",
                                                       "credentials": "bench"}},
                "hosts": [],
            })
        host_port = url.rsplit(":", 1)
        racks[-1]["hosts"].append({
            "u": (i % HOSTS_PER_RACK) * 2 + 1,
            "bmc": {"address": host_port[0].split("//")[1], "port": int(host_port[1])},
        })
    data = {
        "site": name,
        "description": f"{len(farm.urls)} simulated hosts for benchmarks/rack.py",
        "settings": {
            "deploy_backend": "embedded",
            "uplink_gbps": uplink_gbps,
            "deploy_retries": retries,
            "redfish": {"verify_tls": False, "timeout_s": 60, "retries": 2},
            "image": {"url": "http://10.10.0.3:8080/images/sim.raw", "format": "raw",
                      "size_bytes": image_bytes},
            "embedded": {"interface": "sim0", "server_address": "10.10.0.3",
                         "host_link_gbps": host_link_gbps},
        },
        "networks": {"provisioning": {"cidr": "10.10.0.0/16", "reserved": ["10.10.0.1-10.10.0.63"]}},
        "credentials": {"bench": {"username": "admin", "password": {"env": PASSWORD_ENV}}},
        "profiles": {"hgx": {"gpus": 8, "ib_hcas": 8, "units": 2,
                             "provisioning_nic": {"mac_prefix": "52:54:00"}}},
        "racks": racks,
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "site.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class FarmBMC(RedfishBMC):
    """A host's BMC in the farm: every address lists all Systems, so pick the host's own."""

    def __init__(self, client: RedfishClient, *, system_id: str,
                 boot_port: BootPortChooser | None, timing: BMCTiming) -> None:
        # The fake driver applies a power change 1-11 real seconds later; polling every half
        # second (each poll charged the BMC latency) keeps the wall time of a wait short.
        super().__init__(client, boot_port=boot_port, system_id=system_id,
                         poll_interval_s=0.5)
        self.timing = timing

    def host_systems(self) -> list[str]:
        """The host's own System only: every address lists every host's System, where a real
        host's BMC lists its own; telling DPU Systems apart would read the other N-1 (since
        2026-11-25 that made discovery N requests per host, 143 at 128 hosts)."""
        return [self.system_path()]

    def _other_systems(self) -> list[str]:
        """None: every address lists every host's System, where a real host's BMC lists its own
        (and a GPU baseboard); discovery would read all N of them for identity fields the fake
        Systems lack, N requests per host. The collection is still read, as on a real BMC."""
        super()._other_systems()
        return []

    def discover(self) -> HostFacts:
        """Real discovery, charged its requests' latency."""
        with self.timing.charge(self.client, "discover"):
            return super().discover()


@dataclass
class BMCTiming:
    """Charges each real Redfish request a BMC latency in simulated time; keeps the totals."""

    clock: VirtualClock
    latency_s: float
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> simulated seconds
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def charge(self, client: RedfishClient, phase: str) -> Iterator[None]:
        """Run a block of BMC work; then let its requests x latency pass for the caller."""
        before = client.requests_made
        try:
            yield
        finally:
            cost = (client.requests_made - before) * self.latency_s
            with self._lock:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + cost
            self.clock.sleep(cost)


def farm_opener(farm: Farm, timing: BMCTiming) -> Callable[[Site, Host], FarmBMC]:
    """A BMC opener for RackRunner: log in with the site's credentials and TLS policy."""

    def open_farm_bmc(site: Site, host: Host) -> FarmBMC:
        creds = resolve_credentials(site, host.bmc.credentials)
        client = RedfishClient(host.bmc.url, creds.username, creds.password,
                               client_options(site, host), name=f"{host.name} (BMC)")
        try:
            with timing.charge(client, "discover"):
                client.login()
            return FarmBMC(client, system_id=farm.systems[host.name],
                           boot_port=nic_policy(host).choose, timing=timing)
        except BaseException:
            client.close()
            raise

    return open_farm_bmc


class Pacer:
    """The runner's reporter: a host's first phase starts it on the clock, its last ends it."""

    def __init__(self, clock: VirtualClock, label: str, total: int) -> None:
        self.clock, self.label, self.total = clock, label, total
        self._started: dict[str, float] = {}
        self._finished: set[str] = set()
        self.turnaround: dict[str, float] = {}  # host -> simulated seconds, first to last phase
        self.ended: dict[str, float] = {}  # host -> simulated time of its last phase
        self.peak = 0  # hosts in flight at once, at most
        self._lock = threading.Lock()
        self._wall = time.monotonic()

    def phase(self, host: str, phase: str, message: str) -> None:
        """Start the host on its first phase; end it on done/failed (the runner may say both)."""
        with self._lock:
            first = host not in self._started
            if first:
                self._started[host] = self.clock.now
                self.peak = max(self.peak, len(self._started) - len(self._finished))
            last = phase in ("done", "failed") and host not in self._finished
            if last:
                self._finished.add(host)
                self.turnaround[host] = self.clock.now - self._started[host]
                self.ended[host] = self.clock.now
                done = len(self._finished)
        if first:
            self.clock.start_actor()
        if last:
            self.clock.finish_actor()
            step = max(1, self.total // 10)
            if done % step == 0 or done == self.total:
                print(f"  {self.label}: {done}/{self.total} hosts finished at "
                      f"{self.clock.now:.0f} s simulated ({time.monotonic() - self._wall:.0f} s "
                      "wall)", file=sys.stderr)

    def finished(self, result: HostResult) -> None:
        """Results come after the pool; nothing to pace."""


@dataclass
class Attempt:
    """One deploy attempt of a host, in simulated seconds since the run began."""

    attempt: int
    start: float  # the backend's deploy() began (PXE override, power cycle)
    at_gate: float = 0.0  # the ramdisk asked for the image (after POST)
    admitted: float = 0.0  # its stream began
    streamed: float = 0.0  # its stream ended
    end: float = 0.0  # the attempt returned (ok or failed)
    failed: bool = False


@dataclass
class BackendStats:
    """What the simulated backend saw, per host."""

    requests: dict[str, int] = field(default_factory=dict)  # Redfish requests, all attempts
    transfers: dict[str, list[float]] = field(default_factory=dict)  # simulated seconds each
    queued: dict[str, float] = field(default_factory=dict)  # waiting for a transfer slot
    attempts: dict[str, list[Attempt]] = field(default_factory=dict)  # per host, in order
    injected_failures: int = 0
    injected_image_failures: int = 0  # streams that did not verify (streamed again or failed)


class SimulatedBackend(DeployBackend):
    """Real BMC control, simulated image transfer; phases in simulated seconds."""

    name = "simulated"
    drives_power = True

    def __init__(
        self,
        uplink: SharedUplink,
        timing: BMCTiming,
        image_bytes: int,
        *,
        fail_rate: float = 0.0,
        seed: int = 1,
        transfer_slots: int | None = None,
        retry_s: int | None = None,
        boot_s: float = 0.0,
        hold_s: float | None = None,
        prefer_retries: bool = False,
        image_fail_rate: float = 0.0,
        image_attempts: int = 2,
        peers: PeerPool | None = None,
        kexec_s: float | None = None,
    ) -> None:
        self.uplink = uplink
        self.clock = uplink.clock
        self.timing = timing
        self.image_bytes = image_bytes
        self.fail_rate = fail_rate
        self.seed = seed
        self.boot_s = boot_s  # simulated POST time after each power cycle
        # Bounding the concurrent image streams (not the concurrent deploys) through an ideal
        # queue: a semaphore on the clock (the `gated` run).
        self._slots = (
            VirtualSemaphore(self.clock, transfer_slots)
            if transfer_slots and not retry_s else None
        )
        self.transfer_slots = transfer_slots
        # retry_s: the embedded server's own gate, the real StreamGate on the virtual clock.
        # hold_s > 0 (today's server): a request beyond the streams is held in the gate up to
        # hold_s and handed the next released stream at once; a held 503 is asked again at once,
        # as deploy.sh does. hold_s 0 (the previous server): every busy answer is a 503, the host
        # sleeps retry_s plus deploy.sh's jitter (0..ceil(retry_s/2) whole seconds) and asks
        # again, so a freed stream idles until the oldest ticket's next ask.
        self.retry_s = retry_s
        self.hold_s = IMAGE_HOLD_S if hold_s is None else hold_s
        # today's server: a retried attempt queues ahead of first attempts (StreamGate.prefer)
        self.prefer_retries = prefer_retries
        # a stream that does not verify (deploy.sh streams it again, up to image_attempts)
        self.image_fail_rate = image_fail_rate
        self.image_attempts = image_attempts
        # peer serving (settings.embedded.peer_serving): the real gate hands waiting hosts to
        # hosts that verified their image; a peer download runs at the host link, off the uplink
        self.peers = peers
        # installed_boot: kexec: the installed OS starts kexec_s after "finished", no power
        # action and no POST (retries too: the embedded backend reboots only a host whose
        # kexec'd OS did not come up, a failure this model does not inject)
        self.kexec_s = kexec_s
        self._gate = (
            StreamGate(transfer_slots, ticket_ttl_s=4 * retry_s + 30, clock=lambda: self.clock.now,
                       peers=peers)
            if transfer_slots and retry_s
            else None
        )
        self._needing: set[str] = set()  # hosts in an attempt that have no verified image yet
        self.refusals = 0
        self.held_refusals = 0
        self._lock = threading.Lock()
        self.stats = BackendStats()
        self.hosts: set[str] = set()

    def image_streams(self, site: Site) -> int | None:
        """Gated like the embedded server when given transfer slots: the runner plans for it."""
        return self.transfer_slots

    def serves_peers(self, site: Site) -> bool:
        """Peer serving, as the embedded backend's settings.embedded.peer_serving."""
        return self.peers is not None

    def stream_stats(self) -> StreamStats | None:
        """The real gate's figures (stream and queue times), as the embedded backend reports."""
        return self._gate.stats() if self._gate is not None else None

    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        """Nothing to start: the farm runs already; remember which hosts may deploy."""
        self.hosts = {r.host.name for r in requests}

    def _bmc(self, bmc: FarmBMC, phase: str, *steps: BootTarget | PowerAction) -> None:
        with self.timing.charge(bmc.client, phase):
            for step in steps:
                if isinstance(step, BootTarget):
                    bmc.set_boot(step)
                else:
                    bmc.power(step)

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        """The embedded backend's BMC sequence around a simulated image transfer.

        One-time PXE + power cycle; the host streams the image over the shared uplink; then
        power off (the deploy ramdisk's own poweroff), boot override to disk, power on.
        """
        name = request.host.name
        bmc = request.bmc
        if not isinstance(bmc, FarmBMC) or name not in self.hosts:
            raise DeployError(f"{name}: not prepared for this run, or no farm BMC (discovery off)")
        phases: dict[str, float] = {}
        times = Attempt(request.attempt, self.clock.now)
        rack = request.host.rack
        with self._lock:
            self.stats.attempts.setdefault(name, []).append(times)
        with self.clock.lock:
            self._needing.add(name)
        try:
            t = self.clock.now
            progress(name, "pxe", "one-time PXE boot, power cycle")
            self._bmc(bmc, "pxe", BootTarget.PXE, PowerAction.CYCLE)
            self.clock.sleep(self.boot_s)
            phases["pxe"] = self.clock.now - t
            times.at_gate = self.clock.now
            # the ramdisk is up and asks for the image: the embedded backend's "install"
            progress(name, "install", f"streaming {self.image_bytes / GIB:.1f} GiB")
            peer = self._stream(name, request.attempt, times, phases, rack=rack)
            # a stream that does not verify is streamed again from the running ramdisk, ahead
            # of first attempts (deploy.sh, IMAGE_ATTEMPTS); the last one fails the attempt.
            # One from a peer costs no attempt (3 at most): the gate drops that peer.
            streams, draws, peer_fails = 1, 1, 0
            while random.Random(f"{self.seed}:{name}:{request.attempt}:image{draws}"
                                ).random() < self.image_fail_rate:
                draws += 1
                with self._lock:
                    self.stats.injected_image_failures += 1
                if peer is not None and peer_fails < 3:
                    peer_fails += 1
                elif streams >= self.image_attempts:
                    return self._failed(bmc, name, times, phases,
                                        "image sha256 mismatch (injected, every stream)")
                else:
                    streams += 1
                peer = self._stream(name, request.attempt, times, phases, again=True, rack=rack)
            self._verified(name, rack, peer, phases)
            t = self.clock.now
            draw = random.Random(f"{self.seed}:{name}:{request.attempt}").random()
            if draw < self.fail_rate:
                with self._lock:
                    self.stats.injected_failures += 1
                return self._failed(bmc, name, times, phases, "the host failed after its "
                                    "image (injected failure: e.g. a disk write error)")
            if self.kexec_s is not None:  # the injected failures are not kexec failures
                progress(name, "reboot", "installed; starting the installed OS by kexec")
                self.clock.sleep(self.kexec_s)
            else:
                progress(name, "reboot", "installed; booting from disk")
                self._bmc(bmc, "reboot", PowerAction.OFF, BootTarget.DISK, PowerAction.ON)
                self.clock.sleep(self.boot_s)
            phases["reboot"] = self.clock.now - t
            return DeployOutcome(name, True, "", phases)
        finally:
            with self.clock.lock:
                self._needing.discard(name)
                if self._gate is not None:
                    self._gate.forget(name)  # as the server's unregister: peer or downloader
            times.end = self.clock.now
            with self._lock:
                self.stats.requests[name] = bmc.client.requests_made

    def _failed(self, bmc: FarmBMC, name: str, times: Attempt, phases: dict[str, float],
                why: str) -> DeployOutcome:
        # like the embedded backend, a failed host is left off, not looping in PXE
        self._bmc(bmc, "reboot", PowerAction.OFF)
        times.failed = True
        return DeployOutcome(name, False, f"deploy callback: {why}", phases)

    def _stream(self, name: str, attempt: int, times: Attempt, phases: dict[str, float], *,
                again: bool = False, rack: str | None = None) -> str | None:
        """Queue for a stream (the gate or the ideal queue), then move the image; returns the
        peer that served it (None: the server, over the uplink)."""
        t = self.clock.now
        peer = None
        if self._slots is not None:
            self._slots.acquire()
        elif self._gate is not None:
            peer = self._admit(name, attempt, again=again, rack=rack)
        try:
            if not again:
                times.admitted = self.clock.now
            queued = self.clock.now - t
            if peer is None:
                image = self.uplink.transfer(self.image_bytes)
            else:  # host to host at the host link, off the deploy server's uplink
                image = self.image_bytes * 8 / self.uplink.link_bps
                self.clock.sleep(image)
            times.streamed = self.clock.now
        finally:
            if self._slots is not None:
                self._slots.release()
            elif self._gate is not None and peer is None:
                with self.clock.lock:  # hands the stream to a held host: it runs from now
                    self._gate.release(name)
        phases["queue"] = phases.get("queue", 0.0) + queued
        phases["image"] = phases.get("image", 0.0) + image
        with self._lock:
            self.stats.transfers.setdefault(name, []).append(image)
            self.stats.queued[name] = self.stats.queued.get(name, 0.0) + queued
        return peer

    def _verified(self, name: str, rack: str | None, peer: str | None,
                  phases: dict[str, float]) -> None:
        """deploy.sh's "verified" report: a peer it streamed from is free again; with peer
        serving it then serves the image until the gate lets it go (its long poll, polled
        every half second as the server's is)."""
        with self.clock.lock:
            self._needing.discard(name)
            if self._gate is None or self.peers is None:
                return
            if peer is not None:
                self._gate.peer_done(name)
            self._gate.add_peer(name, rack)
        t = self.clock.now
        while True:
            with self.clock.lock:
                pending = len(self._needing - self._gate.asking())
                if self._gate.peer_may_leave(name, pending):
                    break
            self.clock.sleep(0.5)
        phases["serve"] = self.clock.now - t

    def _admit(self, name: str, attempt: int, *, again: bool = False,
               rack: str | None = None) -> str | None:
        """Ask the gate like deploy.sh does until admitted: held in the server when it holds
        (a held 503: ask again at once), else 503, sleep, jitter, ask again."""
        assert self._gate is not None and self.retry_s is not None
        jitter = random.Random(f"{self.seed}:{name}:{attempt}:jitter{':again' if again else ''}")
        gate, clock = self._gate, self.clock
        if (attempt > 1 or again) and self.prefer_retries:
            with clock.lock:
                gate.prefer(name)
        while True:
            with clock.lock:
                peers_ok = self.peers is not None
                if self.hold_s <= 0:
                    answer = gate.try_admit(name, peers_ok=peers_ok, locality=rack)
                else:
                    waiter = clock.waiter_locked()
                    h = gate.hold(name, partial(clock.release_locked, waiter), peers_ok=peers_ok,
                                  locality=rack)
                    if h.admission is None:  # held: until handed a stream or the hold runs out

                        def expire(h: Any = h, w: Any = waiter) -> None:
                            gate.cancel(h)
                            clock.release_locked(w)

                        timer = clock.call_at_locked(clock.now + self.hold_s, expire)
                        clock.wait_locked(waiter)
                        clock.cancel_locked(timer)
                    assert h.admission is not None
                    answer = h.admission
            if answer.admitted:
                return answer.source
            with self._lock:
                self.refusals += 1
                self.held_refusals += answer.held
            if not answer.held:
                clock.sleep(self.retry_s + jitter.randint(0, (self.retry_s + 1) // 2))

    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        """Nothing to release: a simulated host keeps no image."""

    def close(self) -> None:
        """Nothing to stop: the farm outlives one run."""
