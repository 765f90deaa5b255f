"""Give discovered nodes and ports the names a manifest uses (GUID maps, node descriptions)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from cabling.discovery.model import ACTIVE, DiscoveredFabric, DNode
from cabling.model import Manifest, PortRef
from cabling.ports import director_port

# Vendor default node descriptions carry no host name: the node needs a GUID map.
_GENERIC_CA = re.compile(r"^MT\d+\b|Mellanox Technologies|ConnectX|^\s*$", re.IGNORECASE)
_AGGREGATION = "Aggregation Node"
_BLADE = re.compile(r"^(?:[^/]*/)?([LS])(\d+)/U(\d+)$", re.IGNORECASE)


@dataclass(slots=True)
class RLink:
    """A discovered link with both ends named as the manifest names them."""

    a: PortRef
    b: PortRef
    width: str | None
    speed: str | None
    state: str = ACTIVE
    line: int | None = None
    a_guid: str = ""
    b_guid: str = ""
    a_num: int | str = 0
    b_num: int | str = 0
    source: str = ""


@dataclass
class NodeName:
    """How one discovered node is named: a device, and a prefix for its ports (director blades)."""

    device: str
    kind: str
    port_prefix: str = ""
    host_port: str | None = None  # HCA name for CA ports
    named_by: str = "description"
    model: str | None = None
    claims: str | None = None  # the name its description gives, when a GUID named it otherwise


@dataclass
class ResolvedFabric:
    """The discovered fabric in manifest names."""

    links: list[RLink] = field(default_factory=list)
    down: dict[tuple[str, str], tuple[PortRef, str]] = field(default_factory=dict)
    names: dict[str, NodeName] = field(default_factory=dict)
    internal_links: int = 0
    source: str = ""


def name_nodes(
    fab: DiscoveredFabric, manifest: Manifest | None = None, name_map: dict[str, str] | None = None
) -> dict[str, NodeName]:
    """Name every node: node-name-map first, then GUIDs in the manifest, then node descriptions."""
    name_map = name_map or {}
    by_guid: dict[str, tuple[str, str | None]] = {}
    canon: dict[str, str] = {}
    if manifest is not None:
        for d in manifest.devices:
            canon[d.name.casefold()] = d.name
            if d.guid:
                by_guid[d.guid] = (d.name, None)
            for hca, g in d.hca_guids.items():
                by_guid[g] = (d.name, hca)
    switch_descs = Counter(_switch_name(n.desc)[0] for n in fab.nodes.values() if n.kind != "ca")
    out: dict[str, NodeName] = {}
    for guid, node in fab.nodes.items():
        out[guid] = _name_one(node, name_map, by_guid, switch_descs)
        nn = out[guid]
        nn.device = canon.get(nn.device.casefold(), nn.device)
    return out


def _name_one(
    node: DNode, name_map: dict[str, str], by_guid: dict[str, tuple[str, str | None]], switch_descs: Counter[str]
) -> NodeName:
    guids = [node.guid, *(node.port_guids.values())] + ([node.sysimg] if node.sysimg else [])
    for g in guids:
        if g in name_map:
            return _from_text(node, name_map[g], "node-name-map")
    for g in guids:
        if g in by_guid:
            dev, hca = by_guid[g]
            nn = NodeName(dev, node.kind, host_port=hca, named_by="manifest GUID")
            said = _description_name(node)
            if said and said.casefold() != dev.casefold():
                nn.claims = said
            return nn
    if node.name:
        return NodeName(node.name, node.kind, named_by="source")
    if node.kind == "ca":
        if _GENERIC_CA.search(node.desc) or not node.desc.strip():
            return NodeName(f"H-{node.guid}", node.kind, named_by="GUID")
        return _from_text(node, node.desc, "description")
    name, prefix, model = _switch_name(node.desc)
    if switch_descs[name] > 1 and not prefix:
        return NodeName(f"S-{node.guid}", node.kind, named_by="GUID", model=node.desc)
    return NodeName(name, node.kind, port_prefix=prefix, model=model)


def _description_name(node: DNode) -> str | None:
    """The device name a node's own description gives, if it gives one."""
    if node.kind == "ca":
        parts = node.desc.split()
        return None if _GENERIC_CA.search(node.desc) or not parts else parts[0]
    name = _switch_name(node.desc)[0]
    return name or None


def _from_text(node: DNode, text: str, how: str) -> NodeName:
    if node.kind == "ca":
        parts = text.split()
        host = parts[0] if parts else f"H-{node.guid}"
        return NodeName(host, "ca", host_port=parts[1] if len(parts) > 1 else None, named_by=how)
    name, prefix, model = _switch_name(text)
    return NodeName(name, node.kind, port_prefix=prefix, named_by=how, model=model)


def _switch_name(desc: str) -> tuple[str, str, str | None]:
    """``MF0;r03-l1:MQM9700/U1`` -> (``r03-l1``, ``""``, ``MQM9700``); director blades get a port prefix."""
    text = desc.strip()
    if text.upper().startswith("MF0;"):
        text = text[4:]
    if ":" not in text:
        return text, "", None
    name, rest = text.split(":", 1)
    model = rest.split("/", 1)[0] or None
    m = _BLADE.match(rest)
    if m:
        # Director blades are separate ASICs; the chassis is one device with blade-qualified ports.
        return name, f"{m.group(1).upper()}{int(m.group(2))}/U{int(m.group(3))}/", model
    return name, "", model


def endpoint(nn: NodeName, port: int | str) -> PortRef:
    """The manifest endpoint of port ``port`` of a named node."""
    if nn.kind == "ca":
        if nn.host_port:
            hp = nn.host_port if port in (1, "1") else f"{nn.host_port}/{port}"
            return PortRef(nn.device, hp)
        return PortRef(nn.device, str(port))
    if nn.port_prefix:
        blade = nn.port_prefix.rstrip("/")
        kind, num, asic = blade[0], blade[1:].split("/")[0], blade.split("U")[-1]
        if kind == "L":
            return PortRef(nn.device, director_port(int(num), int(asic), int(port)))
        return PortRef(nn.device, f"{blade}/{port}")
    return PortRef(nn.device, str(port))


def resolve(
    fab: DiscoveredFabric, manifest: Manifest | None = None, name_map: dict[str, str] | None = None
) -> ResolvedFabric:
    """Name every discovered link end; drops links inside a director chassis (blade to blade)."""
    names = name_nodes(fab, manifest, name_map)
    out = ResolvedFabric(names=names, source=fab.source)
    for lk in fab.links:
        na, nb = names[lk.a_guid], names[lk.b_guid]
        if _AGGREGATION in fab.nodes[lk.a_guid].desc or _AGGREGATION in fab.nodes[lk.b_guid].desc:
            # SHARP aggregation nodes live inside Quantum switches: their "links" are not cables.
            out.internal_links += 1
            continue
        if (na.port_prefix or nb.port_prefix) and na.device == nb.device and na.kind == nb.kind == "switch":
            out.internal_links += 1
            continue
        out.links.append(RLink(endpoint(na, lk.a_port), endpoint(nb, lk.b_port), lk.width, lk.speed, lk.state,
                               lk.line, lk.a_guid, lk.b_guid, lk.a_port, lk.b_port, lk.source))
    for (guid, port), state in fab.down_ports.items():
        nn = names.get(guid)
        if nn is None and name_map and guid in name_map:
            # A dark HCA is absent from the discovered nodes; ibstat or a map still names it.
            nn = _from_text(DNode(guid=guid, kind="ca", desc=name_map[guid]), name_map[guid], "node-name-map")
        if nn is not None:
            ep = endpoint(nn, port)
            out.down[ep.key] = (ep, state)
    return out
