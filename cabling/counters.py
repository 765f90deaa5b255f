"""Error counters as findings: a cable that counts errors or goes down is named before it fails.

Each counter is judged against the fabric's own level, not a fixed number: a port is named when its
count is above ``max(floor, 10 x the fabric's median)`` for that counter, the median taken over
every port ibqueryerrors checked (a fabric whose counters were never cleared has a higher level
than one cleared this morning). ``LinkDownedCounter`` makes a ``flapping`` finding (the link went
down and came back), the others a ``link_errors`` one (a dirty or failing cable or transceiver).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from cabling.discovery.ibqueryerrors import CounterReport, PortCounters
from cabling.discovery.model import DiscoveredFabric
from cabling.findings import Finding
from cabling.model import Manifest, PortRef
from cabling.resolve import ResolvedFabric, endpoint

# The counters real faults show before a link goes down, and the least count that is ever named
# (a median of zero must not make one symbol error a finding).
FLOORS: dict[str, int] = {
    "SymbolErrorCounter": 10,
    "LinkErrorRecoveryCounter": 3,
    "LinkDownedCounter": 3,
    "PortRcvErrors": 10,
}
FACTOR = 10
_WHAT = {
    "SymbolErrorCounter": "symbol errors",
    "LinkErrorRecoveryCounter": "link error recoveries",
    "LinkDownedCounter": "times the link went down",
    "PortRcvErrors": "receive errors",
}


@dataclass(frozen=True)
class Threshold:
    """The fabric's level for one counter and the count above which a port is named."""

    median: float
    limit: float


def thresholds(report: CounterReport) -> dict[str, Threshold]:
    """Per counter: the fabric's median over every checked port and the resulting limit."""
    out: dict[str, Threshold] = {}
    for name, floor in FLOORS.items():
        values = report.values(name)
        median = statistics.median(values) if values else 0.0
        out[name] = Threshold(median, max(float(floor), FACTOR * median))
    return out


@dataclass
class _Cable:
    """The ports of one cable with counts above their limits."""

    me: PortRef
    peer: PortRef | None
    counts: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    lines: list[str] = field(default_factory=list)


def counter_findings(report: CounterReport, fab: DiscoveredFabric, found: ResolvedFabric,
                     manifest: Manifest | None) -> list[Finding]:
    """One finding per cable with a counter above its limit, naming both ends and the counts."""
    limits = thresholds(report)
    owner = owners(fab)
    by_port: dict[tuple[str, str], tuple[PortRef, PortRef]] = {}
    for rl in found.links:
        by_port[rl.a.key] = (rl.a, rl.b)
        by_port[rl.b.key] = (rl.b, rl.a)
    planned = _planned(manifest)
    cables: dict[frozenset[tuple[str, str]], _Cable] = {}
    for pc in report.ports:
        over = {k: v for k, v in pc.counters.items() if k in limits and v > limits[k].limit}
        if not over:
            continue
        me = _name(pc, owner, found)
        mine, peer = by_port.get(me.key, (me, planned.get(me.key, (None, None))[0]))
        key = frozenset({mine.key} | ({peer.key} if peer is not None else set()))
        cable = cables.setdefault(key, _Cable(mine, peer))
        cable.counts[str(mine)].update(over)
        cable.lines.append(f"{report.source}:{pc.line}")
    return [_finding(c, limits, planned) for c in cables.values()]


def owners(fab: DiscoveredFabric) -> dict[str, str]:
    """Every GUID a tool may print for a port (node or port GUID) -> the node it belongs to."""
    owner = {g: g for g in fab.nodes}
    for g, node in fab.nodes.items():
        for pg in node.port_guids.values():
            owner.setdefault(pg, g)
    return owner


def _name(pc: PortCounters, owner: dict[str, str], found: ResolvedFabric) -> PortRef:
    """The manifest name of a counted port (its description's, if discovery never saw its GUID)."""
    for g in (pc.guid, pc.node_guid):
        node = owner.get(g) if g else None
        if node is not None and node in found.names:
            ep = endpoint(found.names[node], pc.port)
            return PortRef(ep.device, ep.port)
    parts = pc.desc.split()
    if len(parts) == 2 and pc.node_guid is None:  # an HCA's "<host> <hca>"
        return PortRef(parts[0], parts[1] if pc.port == 1 else f"{parts[1]}/{pc.port}")
    return PortRef(f"0x{pc.guid}", str(pc.port))


def _planned(manifest: Manifest | None) -> dict[tuple[str, str], tuple[PortRef, str | None]]:
    """Each planned port's far end and cable label."""
    out: dict[tuple[str, str], tuple[PortRef, str | None]] = {}
    for lk in manifest.links if manifest is not None else []:
        out[lk.a.key] = (PortRef(lk.b.device, lk.b.port), lk.cable)
        out[lk.b.key] = (PortRef(lk.a.device, lk.a.port), lk.cable)
    return out


def _ref(text: str) -> PortRef:
    device, _, port = text.rpartition(":")
    return PortRef(device, port)


def _fmt(ep: PortRef) -> str:
    return f"{ep.device} port {ep.port}" if ep.port.isdigit() else f"{ep.device} {ep.port}"


def _finding(c: _Cable, limits: dict[str, Threshold],
             planned: dict[tuple[str, str], tuple[PortRef, str | None]]) -> Finding:
    label = planned.get(c.me.key, (None, None))[1]
    cable = f"{_fmt(c.me)} <-> {_fmt(c.peer)}" if c.peer is not None else _fmt(c.me)
    cable += f" (cable {label})" if label else ""
    parts = [f"{v} {_WHAT[k]} at {_fmt(_ref(port))} (fabric median {limits[k].median:g}, named above "
             f"{limits[k].limit:g})" for port, over in sorted(c.counts.items()) for k, v in sorted(over.items())]
    flapping = any("LinkDownedCounter" in over for over in c.counts.values())
    if flapping:
        message = f"the link {cable} is flapping: {'; '.join(parts)}"
        fix = (f"reseat the cable {cable} and check its transceivers; replace it if it goes down again "
               "('validate --live --watch' shows it)")
    else:
        message = f"the cable {cable} counts errors: {'; '.join(parts)}"
        fix = (f"clean both connectors of the cable {cable} and reseat it; replace the cable (or a transceiver) "
               "if the count keeps rising ('validate --live --watch' shows it)")
    ends = [str(c.me)] + ([str(c.peer)] if c.peer is not None else [])
    return Finding(kind="flapping" if flapping else "link_errors", severity="error", message=message, fix=fix,
                   where=", ".join(c.lines[:2]), endpoints=ends,
                   data={"counters": {k: dict(v) for k, v in c.counts.items()},
                         "limits": {k: limits[k].limit for over in c.counts.values() for k in over}})
