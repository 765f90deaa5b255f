"""A shared-uplink model for benchmarks: concurrent transfers share capacity fairly.

Each transfer gets ``min(its link rate, uplink / active transfers)``; time runs ``scale`` times
faster than simulated time so that a 512-host rack finishes in seconds of wall clock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass
class UplinkStats:
    """What the uplink saw."""

    bytes_total: int = 0
    peak_active: int = 0


class SharedUplink:
    """Fair-share bandwidth among concurrent transfers, in scaled real time."""

    def __init__(self, capacity_gbps: float, *, scale: float, tick_s: float = 0.01) -> None:
        self.capacity_bps = capacity_gbps * 1e9
        self.scale = scale  # wall seconds per simulated second
        self.tick_s = tick_s
        self._active = 0
        self._lock = threading.Lock()
        self.stats = UplinkStats()

    def transfer(self, nbytes: int, link_gbps: float) -> float:
        """Move ``nbytes`` through the uplink at up to ``link_gbps``; return simulated seconds."""
        with self._lock:
            self._active += 1
            self.stats.peak_active = max(self.stats.peak_active, self._active)
        remaining = nbytes * 8.0
        simulated = 0.0
        try:
            while remaining > 0:
                with self._lock:
                    rate = min(link_gbps * 1e9, self.capacity_bps / self._active)
                step = self.tick_s / self.scale  # simulated seconds per tick
                if remaining <= rate * step:
                    last = remaining / rate
                    time.sleep(last * self.scale)
                    simulated += last
                    remaining = 0
                else:
                    time.sleep(self.tick_s)
                    remaining -= rate * step
                    simulated += step
        finally:
            with self._lock:
                self._active -= 1
                self.stats.bytes_total += nbytes
        return simulated
