"""Hosts in flight that adapt to what the run observes, so the image streams never run dry.

With a deploy server that queues image requests itself, the right number of hosts in flight is
what keeps a host waiting at the gate whenever a stream frees up (Little's law): each stream
serves one host per stream time ``I``, and a host spends ``B`` of its deploy elsewhere (BMC work,
PXE, POST, ramdisk, reboot, first boot), so ``streams x B / I`` hosts are busy elsewhere per
busy stream set, plus ``streams`` hosts queued as slack. ``B`` and ``I`` are measured as the run
goes:

- before the image request (the backend's ``install`` phase): the mean of hosts that got there,
  and at least the age of the oldest host still on its way (so a long POST raises the window
  while the first hosts are still in it, not only when they arrive);
- the stream: the gate's mean stream time (admitted to released) when the backend reports it,
  else the planner's estimate;
- after the stream: the mean from ``install`` to done less the queue wait and the stream, of
  hosts that finished; until one has, as long as before the image request (a reboot through
  POST mirrors the PXE boot).

Before any host reached its image request the window is at least the plan's starting size. It
never goes below the stream count nor above the ceiling.

With peer serving every host that has the image is a source too, so the image bounds no wave:
the window is the ceiling from the start (``max_hosts_in_flight``: what the BMCs, the DHCP
server and the site's power feeds take at once).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from provisioner.deploy.base import StreamStats

# The backend's phase a host enters when its deploy ramdisk asks for the image (or just before).
AT_GATE = "install"
# The runner's last phases of a host.
ENDED = ("done", "failed")


@dataclass
class _Host:
    start: float
    at_gate: float | None = None
    ended: bool = False


@dataclass
class InFlightWindow:
    """How many hosts may be in flight now; thread-safe. Call started/phase/finished per host."""

    streams: int
    initial: int
    ceiling: int
    stream_s: float  # the planner's estimate of one stream, until the gate has measured one
    gate_stats: Callable[[], StreamStats | None] = lambda: None
    clock: Callable[[], float] = time.monotonic
    peers: bool = False  # hosts serve the image to each other: the ceiling from the start
    _hosts: dict[str, _Host] = field(default_factory=dict)
    _pre: list[float] = field(default_factory=list)
    _after: list[float] = field(default_factory=list)  # at the gate -> done
    _in_flight: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)

    # -- observations ----------------------------------------------------------------------

    def started(self, host: str) -> None:
        """A host's deploy begins (discovery included)."""
        with self._cond:
            self._hosts[host] = _Host(self.clock())

    def phase(self, host: str, phase: str) -> None:
        """A host's progress: its first ``install`` marks its arrival at the image gate, its
        ``done``/``failed`` the end of its time after it (observed here, as the runner reports
        it, so that the window's size never changes after a host has been reported done)."""
        if phase != AT_GATE and phase not in ENDED:
            return
        with self._cond:
            h = self._hosts.get(host)
            if h is None:
                return
            now = self.clock()
            if phase == AT_GATE and h.at_gate is None:
                h.at_gate = now
                self._pre.append(now - h.start)
            elif phase in ENDED and h.at_gate is not None and not h.ended:
                h.ended = True
                self._after.append(now - h.at_gate)
            self._cond.notify_all()

    def finished(self, host: str) -> None:
        """A host's worker is done (ok or failed): its slot is free."""
        with self._cond:
            self._hosts.pop(host, None)
            self._in_flight -= 1
            self._cond.notify_all()

    def poke(self) -> None:
        """Re-evaluate now (time passed: the ages of hosts on their way grew)."""
        with self._cond:
            self._cond.notify_all()

    # -- the decision ----------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def target(self) -> int:
        """Hosts in flight wanted now."""
        with self._cond:
            return self._target()

    def _target(self) -> int:
        if self.peers:
            return self.ceiling
        now = self.clock()
        stats = self.gate_stats()
        stream = stats.mean_stream_s if stats is not None and stats.mean_stream_s > 0 else 0.0
        stream = stream or self.stream_s
        wait = stats.mean_wait_s if stats is not None else 0.0
        on_way = [now - h.start for h in self._hosts.values() if h.at_gate is None]
        pre = max([_mean(self._pre), *on_way])
        after = _mean([a - wait - stream for a in self._after]) if self._after else pre
        want = math.ceil(self.streams * (pre + stream + max(0.0, after)) / stream) + self.streams
        if not self._pre:
            want = max(want, self.initial)
        return max(self.streams, min(self.ceiling, want))

    def wait_for_slot(self, poll_s: float = 1.0) -> None:
        """Block until one more host may start, then count it in flight."""
        with self._cond:
            while self._in_flight >= self._target():
                self._cond.wait(poll_s)
            self._in_flight += 1


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
