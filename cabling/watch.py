"""``validate --live --watch N``: sweep the fabric every N seconds and say what changed between
sweeps: a link that went away or came back, a port that left Active, error counters that grew.

At the end (after ``--count`` sweeps, or Ctrl-C) the last sweep's report gets what the watch saw:
a link that went and came back is ``flapping``, error counters that grew by their floor or more
are ``link_errors``, anything else that changed is a ``changed`` warning.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from cabling.counters import FLOORS, owners
from cabling.discovery.ibqueryerrors import CounterReport
from cabling.discovery.model import ACTIVE, DiscoveredFabric
from cabling.findings import Finding
from cabling.resolve import ResolvedFabric, endpoint

LinkKey = frozenset[tuple[str, str]]


@dataclass
class Sweep:
    """What one sweep saw: its links (and their state) and each port's error counters."""

    number: int
    at: float
    links: dict[LinkKey, tuple[str, str, str]]  # both ends' names and the link's state
    counters: dict[str, dict[str, int]]  # port name -> counter -> value


def sweep_of(number: int, at: float, found: ResolvedFabric, fab: DiscoveredFabric,
             counters: CounterReport | None) -> Sweep:
    """The comparable state of one sweep."""
    links = {frozenset((rl.a.key, rl.b.key)): (str(rl.a), str(rl.b), rl.state) for rl in found.links}
    ports: dict[str, dict[str, int]] = {}
    if counters is not None:
        owner = owners(fab)
        for pc in counters.ports:
            guid = owner.get(pc.guid) or (owner.get(pc.node_guid) if pc.node_guid else None)
            name = str(endpoint(found.names[guid], pc.port)) if guid in found.names else f"0x{pc.guid}:{pc.port}"
            ports[name] = {k: v for k, v in pc.counters.items() if k in FLOORS}
    return Sweep(number, at, links, ports)


@dataclass
class Change:
    """One thing that differs between two sweeps; ``up``: whether the link carries traffic after it."""

    what: str  # "gone", "back", "state", "counter"
    text: str
    ends: list[str]
    up: bool = False
    grew: dict[str, int] = field(default_factory=dict)


def changes(prev: Sweep, cur: Sweep) -> list[Change]:
    """What differs from the previous sweep."""
    out: list[Change] = []
    for key in sorted(prev.links.keys() - cur.links.keys(), key=sorted):
        a, b, _ = prev.links[key]
        out.append(Change("gone", f"link {a} <-> {b} went away", [a, b]))
    for key in sorted(cur.links.keys() - prev.links.keys(), key=sorted):
        a, b, state = cur.links[key]
        out.append(Change("back", f"link {a} <-> {b} came up ({state})", [a, b], up=state == ACTIVE))
    for key in sorted(cur.links.keys() & prev.links.keys(), key=sorted):
        a, b, state = cur.links[key]
        before = prev.links[key][2]
        if state != before:
            out.append(Change("state", f"link {a} <-> {b} went from {before} to {state}", [a, b], up=state == ACTIVE))
    for port in sorted(cur.counters):
        grew = {k: v - prev.counters.get(port, {}).get(k, 0) for k, v in cur.counters[port].items()}
        grew = {k: d for k, d in grew.items() if d > 0}
        if grew:
            said = ", ".join(f"{k} +{d} (now {cur.counters[port][k]})" for k, d in sorted(grew.items()))
            out.append(Change("counter", f"{port}: {said}", [port], grew=grew))
    return out


@dataclass
class Watch:
    """Everything the sweeps of one watch saw change, per link and per port."""

    first: Sweep | None = None
    last: Sweep | None = None
    sweeps: int = 0
    link_events: dict[LinkKey, list[Change]] = field(default_factory=lambda: defaultdict(list))
    port_growth: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, sweep: Sweep) -> list[Change]:
        """Take one sweep; what changed since the one before."""
        self.sweeps += 1
        found = changes(self.last, sweep) if self.last is not None else []
        self.first = self.first or sweep
        self.last = sweep
        for c in found:
            if c.what == "counter":
                growth = self.port_growth[c.ends[0]]
                for k, d in c.grew.items():
                    growth[k] = growth.get(k, 0) + d
            else:
                self.link_events[_key(c.ends)].append(c)
        return found

    def findings(self) -> list[Finding]:
        """What the watch adds to the last sweep's report."""
        if self.first is None or self.last is None or self.first is self.last:
            return []
        span = f"during the watch ({self.sweeps} sweeps, {self.last.at - self.first.at:.0f} s)"
        out: list[Finding] = []
        for key, events in self.link_events.items():
            ends = events[0].ends
            history = "; ".join(e.text for e in events)
            was_up = self.first.links.get(key, ("", "", ""))[2] == ACTIVE
            # Up, down and up again (or down, up and down): the link bounced while it was watched.
            ups = [was_up, *(e.up for e in events)]
            if sum(1 for x, y in itertools.pairwise(ups) if x != y) >= 2:
                out.append(Finding("flapping", "error", f"the link {ends[0]} <-> {ends[1]} bounced {span}: {history}",
                                   f"reseat the cable between {_fmt(ends[0])} and {_fmt(ends[1])} and check its "
                                   "transceivers; replace it if it bounces again", endpoints=list(ends)))
            else:
                out.append(Finding("changed", "warning", f"{history} {span}", "see whether the change was planned work",
                                   endpoints=list(ends)))
        for port, growth in sorted(self.port_growth.items()):
            said = ", ".join(f"{k} +{d}" for k, d in sorted(growth.items()))
            if "LinkDownedCounter" in growth:
                kind, severity = "flapping", "error"
            elif any(d >= FLOORS[k] for k, d in growth.items()):
                kind, severity = "link_errors", "error"
            else:
                kind, severity = "changed", "warning"
            out.append(Finding(kind, severity, f"error counters at {port} grew {span}: {said}",  # type: ignore[arg-type]
                               f"clean and reseat the cable at {_fmt(port)}; replace it (or its transceiver) if "
                               "they keep rising", endpoints=[port], data={"grew": growth}))
        return out


def _key(ends: list[str]) -> LinkKey:
    """The sweep's key of the link between two port names."""
    return frozenset((dev.casefold(), port.casefold()) for dev, _, port in (e.rpartition(":") for e in ends))


def _fmt(port: str) -> str:
    dev, _, p = port.rpartition(":")
    return f"{dev} port {p}" if p.isdigit() else f"{dev} {p}"
