"""How many hosts install at once: enough to fill the uplink, never enough to saturate it.

Each installing host pulls the image at up to its provisioning link's rate. Once the sum of those
rates reaches the uplink's capacity, more concurrent installs only make every install slower (and
starve NTP, apt and SSH of the same uplink), so the wave is the number of hosts whose links fill
``headroom`` of the uplink. The makespan bound is ``image bytes x hosts / uplink``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WavePlan:
    """The chosen concurrency and what it implies."""

    size: int
    reason: str
    bound_s: float | None  # image bytes x hosts / uplink, when the image size is known
    est_makespan_s: float | None


def choose_wave_size(
    hosts: int,
    *,
    uplink_gbps: float,
    host_link_gbps: float,
    image_bytes: int | None = None,
    headroom: float = 0.8,
    explicit: int | None = None,
) -> WavePlan:
    """Pick how many hosts deploy at once (an explicit ``--max-parallel`` wins)."""
    if hosts <= 0:
        return WavePlan(0, "no hosts", None, None)
    bound = None
    if image_bytes:
        bound = image_bytes * 8 * hosts / (uplink_gbps * 1e9)
    if explicit is not None:
        size = max(1, min(explicit, hosts))
        reason = f"--max-parallel {explicit}"
    else:
        fill = max(1, math.floor(uplink_gbps * headroom / host_link_gbps))
        size = min(fill, hosts)
        reason = (
            f"{uplink_gbps:g} Gb/s uplink x {headroom:.0%} / {host_link_gbps:g} Gb/s per host"
            f" = {fill} at once"
        )
    est = None
    if image_bytes:
        per_host_gbps = min(host_link_gbps, uplink_gbps / size)
        waves = math.ceil(hosts / size)
        est = waves * image_bytes * 8 / (per_host_gbps * 1e9)
    return WavePlan(size=size, reason=reason, bound_s=bound, est_makespan_s=est)
