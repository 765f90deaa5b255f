"""Simulated time for the benchmarks and their tests: a virtual clock, and an uplink whose transfers share it fairly.

The clock is virtual, not scaled wall time: it advances only when every simulated actor (a host
being deployed) waits on it, straight to the next event. Real work an actor does in between
(Redfish requests to an emulated BMC, state-store writes) takes no simulated time; the model
charges for it explicitly (e.g. a BMC latency per request). So the figures do not depend on how
loaded the machine running the benchmark is, and a 512-host rack costs only the CPU of its
real requests.

:class:`SharedUplink`: every active transfer gets ``min(link, uplink / active transfers)`` (all
hosts have the same link, so the fair share is one rate); only arrivals and departures change
it, so the uplink schedules one timer: the next completion.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


class ClockStalled(RuntimeError):
    """No simulated actor ran and no event came for too long: the model lost track of one."""


@dataclass
class Waiter:
    """A thread blocked on the clock until an event releases it."""

    cond: threading.Condition
    released: bool = False


class VirtualClock:
    """Simulated seconds that jump to the next event once every actor waits.

    Actors are the hosts of a worker pool: ``pool(total, slots)`` says how many will run and how
    many at once, so that the clock also waits while a free worker is about to start one.
    """

    def __init__(self, *, stall_s: float = 600.0) -> None:
        self.lock = threading.Lock()
        self.now = 0.0
        self.stall_s = stall_s  # real seconds without any event before the run is declared stuck
        self._event_at = time.monotonic()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._cancelled: set[int] = set()
        self._seq = itertools.count()
        self._running = 0  # actors executing, i.e. not waiting on the clock
        self._total = 0
        self._slots: int | Callable[[], int] = 0
        self._wanted: Callable[[], None] | None = None
        self._started = 0
        self._active = 0
        self._waiters: dict[int, Waiter] = {}
        self._aborted = ""

    def abort(self, why: str) -> None:
        """Wake every waiter with ClockStalled (an interrupted run), and all later ones too."""
        with self.lock:
            self._aborted = why
            for waiter in self._waiters.values():
                waiter.cond.notify()

    # -- actors -------------------------------------------------------------------------------

    def pool(self, total: int, slots: int | Callable[[], int],
             wanted: Callable[[], None] | None = None) -> None:
        """Expect ``total`` actors, at most ``slots`` at once (a thread pool's size, or what an
        adaptive window allows now); ``wanted()`` is called when the clock waits for a start."""
        with self.lock:
            self._total, self._started, self._active = total, 0, 0
            self._slots = slots
            self._wanted = wanted

    def start_actor(self) -> None:
        """The calling thread begins an actor's work."""
        with self.lock:
            self._started += 1
            self._active += 1
            self._running += 1
            self._event_at = time.monotonic()

    def finish_actor(self) -> None:
        """The calling thread's actor is done."""
        with self.lock:
            self._active -= 1
            self._running -= 1
            self._event_at = time.monotonic()
            self._advance()

    def _starting_soon(self) -> int:
        slots = self._slots() if callable(self._slots) else self._slots
        return max(0, min(slots - self._active, self._total - self._started))

    @property
    def unstarted(self) -> int:
        """Actors expected that have not started yet."""
        return self._total - self._started

    # -- events -------------------------------------------------------------------------------

    def call_at_locked(self, t: float, fn: Callable[[], None]) -> int:
        """Run ``fn`` (under the lock) when the clock reaches ``t``; returns a handle."""
        seq = next(self._seq)
        heapq.heappush(self._timers, (max(t, self.now), seq, fn))
        return seq

    def cancel_locked(self, handle: int) -> None:
        """Forget a timer set by :meth:`call_at_locked`."""
        self._cancelled.add(handle)

    def waiter_locked(self) -> Waiter:
        """A waiter for the calling thread (lock held)."""
        return Waiter(threading.Condition(self.lock))

    def release_locked(self, waiter: Waiter) -> None:
        """Let a waiting actor run again (it counts as running from now, so time stops)."""
        if not waiter.released:
            waiter.released = True
            self._running += 1
            self._event_at = time.monotonic()
            waiter.cond.notify()

    def wait_locked(self, waiter: Waiter) -> None:
        """Block the calling actor until ``waiter`` is released (lock held)."""
        self._running -= 1
        self._advance()
        self._waiters[id(waiter)] = waiter
        try:
            while not waiter.released:
                # stuck means nothing happened anywhere for stall_s, not that this actor
                # waited long (the last of 512 hosts in line waits for all the others)
                left = self._event_at + self.stall_s - time.monotonic()
                if self._aborted:
                    raise ClockStalled(f"simulated clock stopped: {self._aborted}")
                if left <= 0:
                    raise ClockStalled(
                        f"simulated clock stuck at {self.now:.1f} s: {self._running} running, "
                        f"{self._active} active of {self._total}, {self._started} started, "
                        f"{self._starting_soon()} starting soon, {len(self._timers)} timers"
                    )
                waiter.cond.wait(left)
        finally:
            del self._waiters[id(waiter)]

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass for the calling actor (none: return at once)."""
        if seconds <= 0:
            return
        with self.lock:
            waiter = self.waiter_locked()
            self.call_at_locked(self.now + seconds, lambda: self.release_locked(waiter))
            self.wait_locked(waiter)

    def _advance(self) -> None:
        while self._running == 0 and self._starting_soon() == 0 and self._timers:
            t, seq, fn = heapq.heappop(self._timers)
            if seq in self._cancelled:
                self._cancelled.discard(seq)
                continue
            self.now = max(self.now, t)
            fn()
        if self._running == 0 and self._wanted is not None and self._starting_soon() > 0:
            self._wanted()  # e.g. the runner's dispatcher: time passed, a host may start


class VirtualSemaphore:
    """A counting semaphore whose waiters wait on the clock (FIFO)."""

    def __init__(self, clock: VirtualClock, value: int) -> None:
        self.clock = clock
        self._free = value
        self._queue: deque[Waiter] = deque()

    def acquire(self) -> None:
        with self.clock.lock:
            if self._free > 0:
                self._free -= 1
                return
            waiter = self.clock.waiter_locked()
            self._queue.append(waiter)
            self.clock.wait_locked(waiter)  # the releaser hands its slot over

    def release(self) -> None:
        with self.clock.lock:
            if self._queue:
                self.clock.release_locked(self._queue.popleft())
            else:
                self._free += 1


@dataclass
class UplinkStats:
    """What the uplink saw (simulated seconds)."""

    bytes_total: int = 0
    transfers: int = 0
    peak_active: int = 0
    busy_s: float = 0.0  # simulated time with at least one transfer running


class SharedUplink:
    """Fair-share bandwidth among concurrent transfers, on a virtual clock."""

    def __init__(self, clock: VirtualClock, capacity_gbps: float, link_gbps: float) -> None:
        if capacity_gbps <= 0 or link_gbps <= 0:
            raise ValueError("uplink capacity and link rate must be positive")
        self.clock = clock
        self.capacity_bps = capacity_gbps * 1e9
        self.link_bps = link_gbps * 1e9
        self._served = 0.0  # bits each active transfer has received (all get the same rate)
        self._last = clock.now
        self._flows: list[tuple[float, int, int, Waiter]] = []  # (target, seq, bytes, waiter)
        self._seq = itertools.count()
        self._timer: int | None = None
        self.stats = UplinkStats()

    def rate_bps(self, active: int) -> float:
        """Each transfer's rate when ``active`` transfers share the uplink."""
        return min(self.link_bps, self.capacity_bps / active) if active else 0.0

    def _progress(self) -> None:
        dt = self.clock.now - self._last
        if dt > 0 and self._flows:
            self._served += self.rate_bps(len(self._flows)) * dt
            self.stats.busy_s += dt
        self._last = self.clock.now

    def _schedule(self) -> None:
        if self._timer is not None:
            self.clock.cancel_locked(self._timer)
            self._timer = None
        if self._flows:
            left = max(0.0, self._flows[0][0] - self._served)
            self._timer = self.clock.call_at_locked(
                self.clock.now + left / self.rate_bps(len(self._flows)), self._complete)

    def _complete(self) -> None:
        self._timer = None
        self._progress()
        rate = self.rate_bps(len(self._flows))
        # done when what is left would take under a nanosecond-per-second of clock resolution
        while self._flows and (self._flows[0][0] - self._served) / rate <= 1e-9 * max(
                1.0, self.clock.now):
            _, _, nbytes, waiter = heapq.heappop(self._flows)
            self.stats.bytes_total += nbytes
            self.stats.transfers += 1
            self.clock.release_locked(waiter)
        self._schedule()

    def transfer(self, nbytes: int) -> float:
        """Move ``nbytes`` at up to the host link; return the simulated seconds it took."""
        with self.clock.lock:
            start = self.clock.now
            self._progress()
            waiter = self.clock.waiter_locked()
            heapq.heappush(self._flows,
                           (self._served + nbytes * 8.0, next(self._seq), nbytes, waiter))
            self.stats.peak_active = max(self.stats.peak_active, len(self._flows))
            self._schedule()
            self.clock.wait_locked(waiter)
            return self.clock.now - start

    @property
    def utilisation(self) -> float:
        """Bits moved over what the uplink could have moved while busy."""
        if not self.stats.busy_s:
            return 0.0
        return self.stats.bytes_total * 8 / (self.capacity_bps * self.stats.busy_s)


def spread_s(hosts: int, streams: int, link_s: float) -> float:
    """The least time for ``hosts`` to get the image from ``streams`` server streams and every
    host that has it (one download each, ``link_s`` per image): all asking at once, each round
    every holder serves one more host."""
    have, rounds = 0, 0
    while have < hosts:
        have, rounds = 2 * have + streams, rounds + 1
    return rounds * link_s
