"""How many hosts install at once, and how many of them may stream the image at once.

Each installing host pulls the image at up to its provisioning link's rate. Once the sum of those
rates reaches the uplink's capacity, more concurrent streams only make every install slower (and
starve NTP, apt and SSH of the same uplink), so the number of *image streams* is the number of
host links that fill ``headroom`` of the uplink. The makespan bound is
``image bytes x hosts / uplink``.

A host in flight spends most of its time elsewhere: BMC work, PXE, POST, the ramdisk's boot, the
reboot and first boot. When the deploy server gates image streams itself (the embedded backend
answers 503 + Retry-After beyond its stream limit), hosts-at-once no longer has to equal the
stream count: more hosts in flight keep the streams busy while others POST. Hosts-at-once is
then ``HOSTS_PER_STREAM`` x streams, capped at ``MAX_HOSTS_IN_FLIGHT`` (what one orchestrator's
BMC sessions, DHCP and callbacks comfortably carry), never below the stream count. Without a
gate (MAAS), hosts-at-once stays the stream count, the uplink's only protection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from provisioner.deploy.base import HEADROOM, image_streams

# 8 hosts per stream: a host in flight streams for a small part of its deploy (3.4 s of ~16 s
# in benchmarks/rack.py with responsive BMCs and no POST; a far smaller part with real POST
# times of minutes), so several hosts per stream keep the gated streams busy. On 512 simulated
# hosts without POST, 4 and 8 per stream do alike (1.67x and 1.70x the bound, docs/benchmarks.md);
# with 120 s of POST per boot (128 hosts) 8 per stream takes 662 s against 1173 s for 4.
HOSTS_PER_STREAM = 8
# Hosts in flight at most by default: 64 BMC sessions, DHCP conversations and callback waits are
# well inside one orchestrator's reach (the discovery benchmark ran 512 BMCs at once).
MAX_HOSTS_IN_FLIGHT = 64


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

    @property
    def summary(self) -> str:
        """One line for the run summary and --dry-run."""
        if self.reason.startswith(f"{_hosts(self.size)} at once"):
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
) -> WavePlan:
    """Pick how many hosts deploy at once (an explicit ``--max-parallel`` wins).

    ``streams``: the image streams the deploy server gates to, or None when it does not gate
    (then hosts-at-once is what fills the uplink, as the only protection it has).
    """
    if hosts <= 0:
        return WavePlan(0, "no hosts", None, None, streams)
    bound = None
    if image_bytes:
        bound = image_bytes * 8 * hosts / (uplink_gbps * 1e9)
    fill = image_streams(uplink_gbps, host_link_gbps, headroom)
    why_fill = f"uplink {uplink_gbps:g} Gb/s x {headroom:.0%} / {host_link_gbps:g} Gb/s"
    if explicit is not None:
        size = max(1, min(explicit, hosts))
        reason = f"--max-parallel {explicit}"
        if streams is not None:
            reason += f", {streams} image streams"
    elif streams is not None:
        size = min(hosts, max(streams, min(HOSTS_PER_STREAM * streams, MAX_HOSTS_IN_FLIGHT)))
        how = why_fill if streams == fill else "settings.embedded.max_image_streams"
        reason = f"{_hosts(size)} at once, {streams} image stream{'' if streams == 1 else 's'} ({how})"
    else:
        size = min(fill, hosts)
        reason = (
            f"{uplink_gbps:g} Gb/s uplink x {headroom:.0%} / {host_link_gbps:g} Gb/s per host"
            f" = {fill} at once"
        )
    est = None
    if image_bytes:
        streaming = min(size, streams) if streams is not None else size
        per_host_gbps = min(host_link_gbps, uplink_gbps / streaming)
        rounds = math.ceil(hosts / streaming)
        est = rounds * image_bytes * 8 / (per_host_gbps * 1e9)
    return WavePlan(size=size, reason=reason, bound_s=bound, est_makespan_s=est, streams=streams)
