"""Hosts in flight that adapt: Little's law over observed phase and stream times, the ages of
hosts still on their way, the ceiling, and the rack runner keeping within the window."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.deploy.base import (
    DeployBackend,
    DeployOutcome,
    DeployRequest,
    ProgressFn,
    StreamStats,
)
from provisioner.inventory import Site, load_site
from provisioner.state import StateStore
from provisioner.workflow.inflight import InFlightWindow
from provisioner.workflow.rack import RackOptions, RackRunner, Reporter
from provisioner.workflow.waves import MAX_HOSTS_IN_FLIGHT, in_flight_ceiling


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stats(wait_s: float, stream_s: float) -> StreamStats:
    return StreamStats(limit=2, active=2, waiting=0, held=0, admitted=1, mean_wait_s=wait_s,
                       mean_stream_s=stream_s)


def window(clock: Clock, **kw: object) -> InFlightWindow:
    args: dict = {"streams": 2, "initial": 16, "ceiling": 100, "stream_s": 5.0, "clock": clock}
    return InFlightWindow(**{**args, **kw})


def test_starts_with_the_plan_and_grows_while_hosts_are_still_on_their_way() -> None:
    clock = Clock()
    w = window(clock)
    assert w.target() == 16  # nothing observed: the plan's starting size
    w.started("a")
    clock.now = 50.0  # a still has not asked for the image: a long POST
    # at least 50 s before the gate and (assumed) as long after: 2 x (50 + 5 + 50) / 5 + 2
    assert w.target() == 44
    clock.now = 500.0
    assert w.target() == 100  # the ceiling


def test_sized_from_observed_phases_and_the_gates_stream_time() -> None:
    clock = Clock()
    gate = {"stats": stats(wait_s=0.0, stream_s=0.0)}
    w = window(clock, gate_stats=lambda: gate["stats"])
    w.started("a")
    clock.now = 10.0
    w.phase("a", "pxe")  # not the gate
    w.phase("a", "install")  # asks for the image 10 s after its start
    assert w.target() == 2 * (10 + 5 + 10) // 5 + 2  # the planner's 5 s stream until measured
    clock.now = 40.0
    w.phase("a", "done")  # 30 s from the gate to done: 5 s queued, 5 s streaming, 20 s after
    w.finished("a")
    gate["stats"] = stats(wait_s=5.0, stream_s=5.0)
    assert w.target() == 2 * (10 + 5 + 20) // 5 + 2
    gate["stats"] = stats(wait_s=5.0, stream_s=35.0)  # slower streams: fewer hosts needed
    assert w.target() == 3 + 2  # ceil(2 x (10 + 35 + 0) / 35) + 2 (nothing left after)


def test_with_peer_serving_the_window_is_the_ceiling_from_the_start() -> None:
    clock = Clock()
    w = window(clock, peers=True)
    assert w.target() == 100  # hosts that have the image serve it: no stream count bounds it
    w.started("a")
    clock.now = 10.0
    w.phase("a", "install")
    assert w.target() == 100


def test_never_below_the_streams() -> None:
    clock = Clock()
    w = window(clock, initial=2, streams=8, ceiling=4, stream_s=100.0)
    assert w.target() == 8


def test_wait_for_slot_blocks_until_a_host_finishes() -> None:
    clock = Clock()
    w = window(clock, initial=2, streams=1, ceiling=2, stream_s=1e9)
    w.wait_for_slot()
    w.wait_for_slot()
    started = threading.Event()

    def third() -> None:
        w.wait_for_slot(poll_s=0.01)
        started.set()

    t = threading.Thread(target=third, daemon=True)
    t.start()
    assert not started.wait(0.2) and w.in_flight == 2
    w.started("a")
    w.finished("a")
    assert started.wait(10) and w.in_flight == 2


def test_ceiling_follows_the_open_files_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    assert in_flight_ceiling() == (1024 - 64) // 4
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1 << 20, 1 << 20))
    assert in_flight_ceiling() == MAX_HOSTS_IN_FLIGHT


class GatedBackend(DeployBackend):
    """Two image streams; each deploy asks for the image, then takes a moment."""

    name = "gated-test"
    drives_power = False

    def __init__(self) -> None:
        self.concurrent = 0
        self.max_concurrent = 0
        self._lock = threading.Lock()

    def image_streams(self, site: Site) -> int | None:
        return 2

    def stream_stats(self) -> StreamStats | None:
        return stats(0.0, 0.01)

    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        """Nothing to start."""

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        with self._lock:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            progress(request.host.name, "install", "asking for the image")
            time.sleep(0.01)
            return DeployOutcome(request.host.name, True)
        finally:
            with self._lock:
                self.concurrent -= 1

    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        """Nothing to release."""

    def close(self) -> None:
        """Nothing to stop."""


class Quiet(Reporter):
    def phase(self, host: str, phase: str, message: str) -> None: ...

    def finished(self, result: object) -> None: ...  # type: ignore[override]


def test_runner_keeps_hosts_in_flight_within_the_window(tmp_path: Path) -> None:
    site = load_site("example")
    hosts = list(site.hosts)
    backend = GatedBackend()
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    r = RackRunner(site, store, backend, open_bmc=None, reporter=Quiet(),
                   options=RackOptions(configure=False, wait_ssh=False, discover=False))
    plan = r.wave_plan(len(hosts))
    assert plan.streams == 2 and plan.size == min(len(hosts), 16)
    result = r.run(hosts)
    assert len(result.ok) == len(hosts)
    assert r.window is not None and r.window.in_flight == 0
    # the window's ceiling is never exceeded; --max-parallel would disable it (fixed size)
    assert backend.max_concurrent <= (plan.ceiling or plan.size)
    fixed = RackRunner(site, store, backend, open_bmc=None, reporter=Quiet(),
                       options=RackOptions(configure=False, wait_ssh=False, max_parallel=3,
                                           reimage=True, discover=False))
    assert fixed.wave_plan(len(hosts)).ceiling is None


class PeerBackend(GatedBackend):
    """As GatedBackend, where the hosts serve the image to each other."""

    def serves_peers(self, site: Site) -> bool:
        return True


def test_runner_with_peer_serving_opens_the_window_to_the_ceiling(tmp_path: Path) -> None:
    site = load_site("example")
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    r = RackRunner(site, store, PeerBackend(), open_bmc=None, reporter=Quiet(),
                   options=RackOptions(configure=False, wait_ssh=False, discover=False))
    result = r.run(list(site.hosts))
    assert len(result.ok) == len(site.hosts)
    assert r.window is not None and r.window.peers
    assert r.window.target() == r.wave_plan(len(site.hosts)).ceiling
