"""Admission of image streams: at most N hosts pull the image at once, first come first served.

The deploy server never parks a request while it waits for a stream (a thread per waiting host
for minutes): a host beyond the limit gets ``503`` + ``Retry-After`` at once and asks again.
Fairness comes from a FIFO ticket per host: a host's first refused request queues its ticket, the
ticket keeps its place while the host keeps retrying, and a free stream goes to the oldest
tickets only. A ticket not renewed within ``ticket_ttl_s`` (the host stopped asking: it failed,
was powered off, or its deploy was withdrawn) expires so it cannot hold up the queue.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Admission:
    """The gate's answer to one request for a stream."""

    admitted: bool
    active: int  # streams in use after this decision
    position: int  # 0 when admitted; else 1-based place in the queue
    waited_s: float  # since the ticket was first queued


class StreamGate:
    """A counting gate with a FIFO ticket queue; thread-safe, never blocks."""

    def __init__(
        self,
        limit: int,
        *,
        ticket_ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError("a stream gate needs a limit of at least 1")
        self.limit = limit
        self.ticket_ttl_s = ticket_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        # key -> (first asked, last asked); insertion order is the queue order
        self._queue: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._active: dict[str, int] = {}

    @property
    def active(self) -> int:
        """Streams in use."""
        with self._lock:
            return sum(self._active.values())

    def waiting(self) -> list[str]:
        """Keys of the queued tickets, oldest first (expired ones dropped)."""
        with self._lock:
            self._expire(self._clock())
            return list(self._queue)

    def try_admit(self, key: str) -> Admission:
        """Take a stream for ``key`` if one is free and no older ticket waits for it."""
        now = self._clock()
        with self._lock:
            self._expire(now)
            first = self._queue[key][0] if key in self._queue else now
            self._queue[key] = (first, now)  # an existing ticket keeps its place
            position = list(self._queue).index(key)
            in_use = sum(self._active.values())
            free = self.limit - in_use
            if position < free:
                del self._queue[key]
                self._active[key] = self._active.get(key, 0) + 1
                return Admission(True, in_use + 1, 0, now - first)
            return Admission(False, in_use, position + 1, now - first)

    def release(self, key: str) -> None:
        """Give back one stream taken by ``key``."""
        with self._lock:
            n = self._active.get(key, 0)
            if n <= 1:
                self._active.pop(key, None)
            else:
                self._active[key] = n - 1

    def forget(self, key: str) -> None:
        """Drop ``key``'s ticket (its deploy ended); streams it holds are released on close."""
        with self._lock:
            self._queue.pop(key, None)

    def _expire(self, now: float) -> None:
        stale = [k for k, (_, last) in self._queue.items() if now - last > self.ticket_ttl_s]
        for k in stale:
            del self._queue[k]
