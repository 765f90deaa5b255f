"""The discovered fabric every parser produces: nodes by GUID, links between (GUID, port) pairs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from cabling.speeds import speed_rank, width_lanes

NodeKind = Literal["switch", "ca", "router"]
ACTIVE = "active"


@dataclass(slots=True)
class DNode:
    """A node as discovery saw it: GUID, kind, node description, port count."""

    guid: str
    kind: NodeKind
    desc: str
    nports: int | None = None
    lid: int | None = None
    sysimg: str | None = None
    port_guids: dict[int, str] = field(default_factory=dict)
    # A name given by the source itself (LLDP chassis name, UFM system name, a file name).
    name: str | None = None


# SHARP Aggregation Nodes are a virtual CA inside each Quantum switch ("Mellanox Technologies
# Aggregation Node"; UFM and newer firmware may say "NVIDIA" or "SHARP"): no host, no cable.
_AGGREGATION = re.compile(r"\baggregation node\b|\bSHARP\b.*\b(?:AN|aggregation)\b", re.IGNORECASE)


def describes_aggregation_node(desc: str) -> bool:
    """Whether a node description is a SHARP Aggregation Node's (for parsers that see only the
    description of a peer, and must tell its kind: the AN is a CA, never a switch)."""
    return bool(_AGGREGATION.search(desc))


def is_aggregation_node(node: DNode) -> bool:
    """Whether ``node`` is a SHARP Aggregation Node (a function of a switch ASIC, not a host)."""
    return node.kind != "switch" and describes_aggregation_node(node.desc)


@dataclass(slots=True)
class DLink:
    """A trained link between two (node GUID, port) ends, with width, speed and logical state."""

    a_guid: str
    a_port: int | str
    b_guid: str
    b_port: int | str
    width: str | None = None
    speed: str | None = None
    state: str = ACTIVE
    line: int | None = None
    source: str = ""  # the file the line number refers to (fabrics merge several sources)


@dataclass
class DiscoveredFabric:
    """Nodes, links and per-port states from one or more discovery sources."""

    nodes: dict[str, DNode] = field(default_factory=dict)
    links: list[DLink] = field(default_factory=list)
    # Ports known to be down (no link): (guid, port) -> state text, e.g. "Polling".
    down_ports: dict[tuple[str, int | str], str] = field(default_factory=dict)
    source: str = ""
    skipped_lines: list[int] = field(default_factory=list)
    # GUIDs that more than one node block reported: GUID -> "description (line N)" of each.
    duplicate_guids: dict[str, list[str]] = field(default_factory=dict)
    # What a parser set aside and why (an LLDP interface hearing two neighbours), for the user.
    warnings: list[str] = field(default_factory=list)

    def note_duplicate(self, guid: str, desc: str, line: int | None) -> None:
        """Record one of the nodes that share ``guid`` (a mis-flashed or cloned HCA or switch)."""
        seen = self.duplicate_guids.setdefault(guid, [])
        where = f"{self.source}:{line}" if line else self.source
        text = f"{desc!r} ({where})"
        if text not in seen:
            seen.append(text)

    def merge(self, other: DiscoveredFabric) -> None:
        """Add another source's view. A node one source names by its port GUID and another by its
        node GUID is one node; a link both report is one link, at the lower rate either saw and
        not active if either saw it otherwise (each tool reads its own end, at its own moment)."""
        for lk in self.links:
            lk.source = lk.source or self.source
        for lk in other.links:
            lk.source = lk.source or other.source
        for guid, node in other.nodes.items():
            mine = self.nodes.get(guid)
            if mine is None:
                self.nodes[guid] = node
            else:
                _absorb(mine, node)
        self.links.extend(other.links)
        self.down_ports.update(other.down_ports)
        self.warnings.extend(other.warnings)
        for guid, descs in other.duplicate_guids.items():
            self.duplicate_guids.setdefault(guid, []).extend(d for d in descs if d not in self.duplicate_guids[guid])
        self.source = f"{self.source}+{other.source}" if self.source else other.source
        self.unify_identities()

    def unify_identities(self) -> None:
        """Make every CA one node under its node GUID. iblinkinfo names an HCA by the port GUID on its
        line, ibnetdiscover by the node GUID (with the port GUID beside it); where the two differ
        (ConnectX HCAs of several generations, every simulated HCA) the same HCA would otherwise be
        two nodes, its cable two links, and every switch port a duplicate."""
        alias = self._port_aliases()
        for port_guid, node_guid in alias.items():
            _absorb(self.nodes[node_guid], self.nodes.pop(port_guid))
            if port_guid in self.duplicate_guids:
                self.duplicate_guids.setdefault(node_guid, []).extend(self.duplicate_guids.pop(port_guid))
        if alias:
            for lk in self.links:
                lk.a_guid = alias.get(lk.a_guid, lk.a_guid)
                lk.b_guid = alias.get(lk.b_guid, lk.b_guid)
            self.down_ports = {(alias.get(g, g), port): state for (g, port), state in self.down_ports.items()}
        self._one_link_per_cable()

    def _port_aliases(self) -> dict[str, str]:
        """Port GUID -> node GUID for every CA known under both (a port GUID that two nodes claim
        stays apart: that is two devices, reported as such)."""
        alias: dict[str, str] = {}
        claimed: set[str] = set()
        for node in self.nodes.values():
            if node.kind == "switch":
                continue
            for pg in node.port_guids.values():
                if pg == node.guid:
                    continue
                if pg in alias and alias[pg] != node.guid:
                    claimed.add(pg)
                alias[pg] = node.guid
        # The node found under a CA's port GUID is that CA as another tool saw it, even where that
        # tool had to guess its kind ('iblinkinfo -l' prints no node type).
        return {pg: g for pg, g in alias.items() if pg not in claimed and pg in self.nodes}

    def _one_link_per_cable(self) -> None:
        """Links that name the same two ports are one cable: keep the first, with the lower rate
        and the worse state of all its reports."""
        index: dict[frozenset[tuple[str, int | str]], DLink] = {}
        kept: list[DLink] = []
        for lk in self.links:
            first = index.get(_key(lk))
            if first is None:
                index[_key(lk)] = lk
                kept.append(lk)
            else:
                _combine(first, lk)
        if len(kept) != len(self.links):
            self.links = kept


def _absorb(into: DNode, other: DNode) -> None:
    """What ``other`` (the same node, seen by another source or under another GUID) adds."""
    for port, guid in other.port_guids.items():
        into.port_guids.setdefault(port, guid)
    into.nports = into.nports or other.nports
    into.lid = into.lid if into.lid is not None else other.lid
    into.sysimg = into.sysimg or other.sysimg
    into.desc = into.desc or other.desc
    into.name = into.name or other.name


def _combine(link: DLink, other: DLink) -> None:
    """One cable reported twice: it carries traffic at the lower rate, and is not active if either
    report says so."""
    if other.width and (link.width is None or width_lanes(other.width) < width_lanes(link.width)):
        link.width = other.width
    if other.speed and (link.speed is None or speed_rank(other.speed) < speed_rank(link.speed)):
        link.speed = other.speed
    if link.state == ACTIVE and other.state != ACTIVE:
        link.state = other.state
        link.line, link.source = other.line, other.source


def _key(lk: DLink) -> frozenset[tuple[str, int | str]]:
    return frozenset(((lk.a_guid, lk.a_port), (lk.b_guid, lk.b_port)))
