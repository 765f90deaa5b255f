"""The discovered fabric every parser produces: nodes by GUID, links between (GUID, port) pairs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

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
        """Add another source's view; a later link replaces an earlier one on the same ports."""
        for lk in self.links:
            lk.source = lk.source or self.source
        for lk in other.links:
            lk.source = lk.source or other.source
        for guid, node in other.nodes.items():
            mine = self.nodes.get(guid)
            if mine is None:
                self.nodes[guid] = node
            else:
                mine.port_guids.update(node.port_guids)
                mine.nports = mine.nports or node.nports
        index = {_key(lk): i for i, lk in enumerate(self.links)}
        for lk in other.links:
            i = index.get(_key(lk))
            if i is None:
                index[_key(lk)] = len(self.links)
                self.links.append(lk)
            else:
                self.links[i] = lk
        self.down_ports.update(other.down_ports)
        self.warnings.extend(other.warnings)
        for guid, descs in other.duplicate_guids.items():
            self.duplicate_guids.setdefault(guid, []).extend(d for d in descs if d not in self.duplicate_guids[guid])
        self.source = f"{self.source}+{other.source}" if self.source else other.source


def _key(lk: DLink) -> frozenset[tuple[str, int | str]]:
    return frozenset(((lk.a_guid, lk.a_port), (lk.b_guid, lk.b_port)))
