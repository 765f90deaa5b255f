"""How many hosts install at once, and how many of them may stream the image at once.

Each installing host pulls the image at up to its provisioning link's rate. Once the sum of those
rates reaches the uplink's capacity, more concurrent streams only make every install slower (and
starve NTP, apt and SSH of the same uplink), so the number of *image streams* is the number of
host links that fill ``headroom`` of the uplink. The makespan bound is
``image bytes x hosts / uplink``.

A host in flight spends most of its time elsewhere: BMC work, PXE, POST, the ramdisk's boot, the
reboot and first boot. When the deploy server gates image streams itself (the embedded backend
queues requests beyond its stream limit and hands a freed stream to the next at once),
hosts-at-once no longer has to equal the stream count: more hosts in flight keep the streams busy
while others POST. The run then starts ``HOSTS_PER_STREAM`` x streams and adapts from what it
observes (provisioner/workflow/inflight.py), up to a ceiling (``max_hosts_in_flight``, less
where this process's file descriptors run out first), never below the stream count. Without a
gate (MAAS), hosts-at-once stays the stream count, the uplink's only protection.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass

from provisioner.deploy.base import HEADROOM, image_streams
from provisioner.settings.embedded import DEFAULT_MAX_HOSTS_IN_FLIGHT

# Hosts per stream to start with, before the run has observed anything: a host in flight
# streams for a small part of its deploy (3.4 s of ~16 s in benchmarks/rack.py with responsive
# BMCs and no POST; a far smaller part with real POST times of minutes).
HOSTS_PER_STREAM = 8
# Hosts in flight at most by default (settings.embedded.max_hosts_in_flight).
MAX_HOSTS_IN_FLIGHT = DEFAULT_MAX_HOSTS_IN_FLIGHT
# File descriptors one host in flight may hold: its Redfish connection(s), its held image
# request and callback connections; what the process has beyond 64 for the rest.
FDS_PER_HOST = 4


def in_flight_ceiling(limit: int = MAX_HOSTS_IN_FLIGHT) -> int:
    """Hosts in flight this process can carry: ``limit`` (the site's max_hosts_in_flight), or
    fewer when its open files limit is lower (raise ``ulimit -n`` to lift it)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(1, min(limit, (soft - 64) // FDS_PER_HOST))


def _hosts(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


@dataclass(frozen=True)
class WavePlan:
    """The chosen concurrency and what it implies."""

    size: int  # hosts in flight at once
    reason: str
    bound_s: float | None  # image bytes x hosts / uplink, when the image size is known
    est_makespan_s: float | None  # image transfers only
    streams: int | None = None  # image streams the deploy server admits at once; None: ungated
    ceiling: int | None = None  # hosts in flight may grow to this (adaptive); None: fixed size

    @property
    def summary(self) -> str:
        """One line for the run summary and --dry-run."""
        if self.streams is not None and "at once" in self.reason.split(",")[0]:
            return self.reason  # already says hosts and streams
        return f"{self.size} at once ({self.reason})"


def choose_wave_size(
    hosts: int,
    *,
    uplink_gbps: float,
    host_link_gbps: float,
    image_bytes: int | None = None,
    headroom: float = HEADROOM,
    explicit: int | None = None,
    streams: int | None = None,
    ceiling: int | None = None,
) -> WavePlan:
    """Pick how many hosts deploy at once (an explicit ``--max-parallel`` wins).

    ``streams``: the image streams the deploy server gates to, or None when it does not gate
    (then hosts-at-once is what fills the uplink, as the only protection it has).
    ``ceiling``: most hosts in flight for a gated backend (default :func:`in_flight_ceiling`).
    """
    if hosts <= 0:
        return WavePlan(0, "no hosts", None, None, streams)
    bound = None
    if image_bytes:
        bound = image_bytes * 8 * hosts / (uplink_gbps * 1e9)
    fill = image_streams(uplink_gbps, host_link_gbps, headroom)
    if explicit is not None:
        size = max(1, min(explicit, hosts))
        reason = f"--max-parallel {explicit}"
        if streams is not None:
            reason += f", {streams} image streams"
    elif streams is not None:
        top = min(hosts, max(streams, ceiling if ceiling is not None else in_flight_ceiling()))
        size = min(top, HOSTS_PER_STREAM * streams)
        full = image_streams(uplink_gbps, host_link_gbps, 1.0)
        how = (
            f"uplink {uplink_gbps:g} Gb/s / {host_link_gbps:g} Gb/s"
            if streams == full
            else "settings.embedded.max_image_streams"
        )
        start = f"{_hosts(size)} at once" if top == size else f"{size} to {top} hosts at once"
        reason = f"{start}, {streams} image stream{'' if streams == 1 else 's'} ({how})"
        if top > size:
            return _plan(size, reason, bound, image_bytes, streams, host_link_gbps,
                         uplink_gbps, hosts, ceiling=top)
    else:
        size = min(fill, hosts)
        reason = (
            f"{uplink_gbps:g} Gb/s uplink x {headroom:.0%} / {host_link_gbps:g} Gb/s per host"
            f" = {fill} at once"
        )
    return _plan(size, reason, bound, image_bytes, streams, host_link_gbps, uplink_gbps, hosts)


def _plan(
    size: int,
    reason: str,
    bound: float | None,
    image_bytes: int | None,
    streams: int | None,
    host_link_gbps: float,
    uplink_gbps: float,
    hosts: int,
    *,
    ceiling: int | None = None,
) -> WavePlan:
    est = None
    if image_bytes:
        streaming = min(size, streams) if streams is not None else size
        per_host_gbps = min(host_link_gbps, uplink_gbps / streaming)
        rounds = math.ceil(hosts / streaming)
        est = rounds * image_bytes * 8 / (per_host_gbps * 1e9)
    return WavePlan(size, reason, bound, est, streams, ceiling)
