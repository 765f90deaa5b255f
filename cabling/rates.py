"""The rate each tier of a fabric runs at, and the links below it.

Links between the same two tiers (hosts to leaves, leaves to spines...) are built alike, so the
rate most of them trained at is what the tier is meant to run at: a link below it (one switch
uplink at DDR among QDR ones, a host at 1x) is a fault to fix, never the plan. ``import`` writes
the tier's rate into the as-built and warns about each such link; ``name-switches`` warns; ``lint``
flags a planned link whose rate disagrees with its tier's (a fault baked into a plan).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from cabling.model import Link, Manifest
from cabling.slurm import switch_tiers
from cabling.speeds import speed_rank, width_lanes

_TIER = {0: "host", 1: "leaf", 2: "spine", 3: "core"}

TierPair = tuple[int, int]


@dataclass(frozen=True)
class TierRate:
    """The rate most links of a tier pair run at, and how many of how many do."""

    pair: TierPair
    width: str | None
    speed: str | None
    width_count: int
    speed_count: int
    links: int

    @property
    def name(self) -> str:
        """``leaf-spine``."""
        return "-".join(_TIER.get(t, f"tier {t}") for t in self.pair)


@dataclass(frozen=True)
class Slow:
    """A link below its tier's rate."""

    index: int
    link: Link
    width: str | None  # what it runs at, where that is below the tier's
    speed: str | None
    tier: TierRate

    def describe(self) -> str:
        """``4xDDR, below the 4xQDR of 120 of the 122 leaf-spine links``."""
        got = f"{self.link.width or self.tier.width or ''}{self.link.speed or self.tier.speed or ''}"
        want = f"{self.tier.width or ''}{self.tier.speed or ''}"
        most = max(self.tier.speed_count if self.speed else 0, self.tier.width_count if self.width else 0)
        return f"{got}, below the {want} of {most} of the {self.tier.links} {self.tier.name} links"


def link_tiers(manifest: Manifest) -> list[TierPair | None]:
    """Each link's (lower, upper) tier: hosts 0, switches from roles or from the topology."""
    devices = manifest.device_map()
    tiers = {k: 0 for k, d in devices.items() if d.kind == "host"} | switch_tiers(manifest)
    out: list[TierPair | None] = []
    for lk in manifest.links:
        a, b = tiers.get(lk.a.device.casefold()), tiers.get(lk.b.device.casefold())
        out.append((min(a, b), max(a, b)) if a is not None and b is not None else None)
    return out


def tier_rates(manifest: Manifest, pairs: list[TierPair | None] | None = None) -> dict[TierPair, TierRate]:
    """The majority width and speed of each tier pair (of the links that give one)."""
    pairs = pairs if pairs is not None else link_tiers(manifest)
    widths: dict[TierPair, Counter[str]] = defaultdict(Counter)
    speeds: dict[TierPair, Counter[str]] = defaultdict(Counter)
    counts: Counter[TierPair] = Counter()
    for lk, pair in zip(manifest.links, pairs, strict=True):
        if pair is None:
            continue
        counts[pair] += 1
        width, speed = manifest.expected_width(lk), manifest.expected_speed(lk)
        if width:
            widths[pair][width] += 1
        if speed:
            speeds[pair][speed] += 1
    out = {}
    for pair, n in counts.items():
        w = _majority(widths[pair], width_lanes)
        s = _majority(speeds[pair], speed_rank)
        out[pair] = TierRate(pair, w[0] if w else None, s[0] if s else None, w[1] if w else 0, s[1] if s else 0, n)
    return out


def _majority(counter: Counter[str], rank: object) -> tuple[str, int] | None:
    """The most common value; a tie goes to the faster one (a tie is no evidence of a fault)."""
    if not counter:
        return None
    return max(counter.items(), key=lambda kv: (kv[1], rank(kv[0])))  # type: ignore[operator]


def slow_links(manifest: Manifest) -> list[Slow]:
    """Every link whose width or speed is below the majority of its tier pair."""
    pairs = link_tiers(manifest)
    rates = tier_rates(manifest, pairs)
    out = []
    for i, (lk, pair) in enumerate(zip(manifest.links, pairs, strict=True)):
        if pair is None:
            continue
        tier = rates[pair]
        width, speed = manifest.expected_width(lk), manifest.expected_speed(lk)
        slow_w = width if width and tier.width and width_lanes(width) < width_lanes(tier.width) else None
        slow_s = speed if speed and tier.speed and speed_rank(speed) < speed_rank(tier.speed) else None
        if slow_w or slow_s:
            out.append(Slow(i, lk, slow_w, slow_s, tier))
    return out


def disagreeing(manifest: Manifest) -> list[tuple[int, Link, TierRate]]:
    """Links planned at a rate other than their tier's majority (below or above it)."""
    pairs = link_tiers(manifest)
    rates = tier_rates(manifest, pairs)
    out = []
    for i, (lk, pair) in enumerate(zip(manifest.links, pairs, strict=True)):
        if pair is None or rates[pair].links < 3:
            continue  # two links are no majority
        tier = rates[pair]
        width, speed = manifest.expected_width(lk), manifest.expected_speed(lk)
        if (width and tier.width and width != tier.width) or (speed and tier.speed and speed != tier.speed):
            out.append((i, lk, tier))
    return out


def plan_rates(manifest: Manifest) -> None:
    """Rewrite ``manifest`` as a plan: the fabric's default rate is the most common one, each link
    carries its tier's rate only where that differs, and links below their tier get the tier's
    rate (they are faults: validate names them against the plan)."""
    pairs = link_tiers(manifest)
    rates = tier_rates(manifest, pairs)
    widths: Counter[str] = Counter()
    speeds: Counter[str] = Counter()
    for r in rates.values():
        if r.width:
            widths[r.width] += r.links
        if r.speed:
            speeds[r.speed] += r.links
    default_w = _majority(widths, width_lanes)
    default_s = _majority(speeds, speed_rank)
    manifest.fabric.width = default_w[0] if default_w else manifest.fabric.width
    manifest.fabric.speed = default_s[0] if default_s else manifest.fabric.speed
    for lk, pair in zip(manifest.links, pairs, strict=True):
        if pair is None:
            continue
        tier = rates[pair]
        lk.width = None if tier.width in (None, manifest.fabric.width) else tier.width
        lk.speed = None if tier.speed in (None, manifest.fabric.speed) else tier.speed
