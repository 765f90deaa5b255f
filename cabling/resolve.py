"""Give discovered nodes and ports the names a manifest uses (GUID maps, node descriptions)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from cabling.discovery.model import ACTIVE, DiscoveredFabric, DNode, is_aggregation_node
from cabling.model import Manifest, PortRef
from cabling.ports import director_port

# Vendor default node descriptions carry no host name: the node needs a GUID map.
_GENERIC_CA = re.compile(r"^MT\d+\b|Mellanox Technologies|ConnectX|^\s*$", re.IGNORECASE)
# A fresh switch's description is its ASIC or model and vendor ("Quantum Mellanox Technologies",
# "SwitchIB Mellanox Technologies", "Infiniscale-IV Mellanox Technologies", "ISR9024 Voltaire",
# "Voltaire 4036 - 36 QDR ports switch", "Sun DCS 36 QDR switch localhost"): not a name, even when
# no other switch shares it.
# The vendor words stand alone: "nvidia-sw01" or "voltaire_core1" is a name someone chose.
_GENERIC_SWITCH = re.compile(r"Mellanox Technologies|^MT\d+\b|(?<!\S)(?:Voltaire|NVIDIA)(?!\S)"
                             r"|^Sun DCS\b|^\s*$", re.IGNORECASE)
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
    shared_name: bool = False  # its description gives a name another switch's gives too


@dataclass
class Ambiguity:
    """One identity that names more than one physical port: a GUID two nodes share, or a name two
    GUIDs resolve to. Its links are set aside: no fix may rest on them."""

    kind: str  # "duplicate_guid" or "duplicate_name"
    identity: str  # the GUID (hex) or the endpoint name
    guids: list[str] = field(default_factory=list)
    descriptions: list[str] = field(default_factory=list)
    links: list[RLink] = field(default_factory=list)
    peers: list[PortRef] = field(default_factory=list)  # the far end of each link: where to look
    node_kind: str = "ca"

    def keys(self) -> set[tuple[str, str]]:
        """Every named port the set-aside links touch."""
        return {k for rl in self.links for k in (rl.a.key, rl.b.key)}


@dataclass
class ResolvedFabric:
    """The discovered fabric in manifest names."""

    links: list[RLink] = field(default_factory=list)
    down: dict[tuple[str, str], tuple[PortRef, str]] = field(default_factory=dict)
    names: dict[str, NodeName] = field(default_factory=dict)
    internal_links: int = 0  # blade to blade inside a director chassis
    aggregation_links: int = 0  # switch to its own SHARP aggregation node
    source: str = ""
    ambiguous: list[Ambiguity] = field(default_factory=list)
    # Nodes that are not end points of cables a person pulls (SHARP aggregation nodes).
    aggregation_nodes: list[str] = field(default_factory=list)


def name_nodes(
    fab: DiscoveredFabric, manifest: Manifest | None = None, name_map: dict[str, str] | None = None,
    inferred: dict[str, str] | None = None,
) -> dict[str, NodeName]:
    """Name every node: node-name-map first, then GUIDs in the manifest, then node descriptions;
    ``inferred`` (GUID -> planned name, from the topology) names switches that said nothing."""
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
    # A system image GUID several nodes report (the HCAs of one adapter or host, the ASICs of a
    # director) names the system, not one of its nodes.
    systems = Counter(n.sysimg for n in fab.nodes.values() if n.sysimg)
    shared = {g for g, count in systems.items() if count > 1}
    out: dict[str, NodeName] = {}
    for guid, node in fab.nodes.items():
        if inferred and guid in inferred:
            out[guid] = _from_text(node, inferred[guid], "topology")
            out[guid].claims = node.desc  # what it says about itself: its vendor default
        else:
            out[guid] = _name_one(node, name_map, by_guid, switch_descs, shared)
        nn = out[guid]
        nn.device = canon.get(nn.device.casefold(), nn.device)
    if by_guid:
        # The manifest's GUID is the stronger evidence: a node only *describing* itself with a name the
        # manifest gives to another GUID keeps its GUID as its name instead of taking that device's ports.
        owned = {(nn.device.casefold(), (nn.host_port or "").casefold())
                 for nn in out.values() if nn.named_by == "manifest GUID"}
        for guid, nn in out.items():
            if nn.named_by in ("description", "source") and \
                    (nn.device.casefold(), (nn.host_port or "").casefold()) in owned:
                prefix = "H" if nn.kind == "ca" else "S"
                out[guid] = NodeName(f"{prefix}-{guid}", nn.kind, named_by="GUID", model=nn.model)
    return out


def _name_one(
    node: DNode, name_map: dict[str, str], by_guid: dict[str, tuple[str, str | None]], switch_descs: Counter[str],
    shared: set[str],
) -> NodeName:
    # A node is one thing whichever of its GUIDs names it: node, port or system image GUID; a
    # system image GUID its siblings share names the system, and the node its part of it.
    own = [node.guid, *(node.port_guids.values())]
    guids = own + ([node.sysimg] if node.sysimg and node.sysimg not in own else [])
    for g in guids:
        if g in name_map:
            nn = _from_text(node, name_map[g], "node-name-map")
            if g not in shared or g in own:
                return nn
            part = _own_part(node, nn.device)
            if part is not None:
                return part
    for g in guids:
        if g in by_guid:
            dev, hca = by_guid[g]
            if g in shared and g not in own:
                part = _own_part(node, dev)
                if part is None:
                    continue
                hca = part.host_port
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
    if _vendor_default(name, prefix, model):
        return NodeName(f"S-{node.guid}", node.kind, named_by="GUID", model=node.desc)
    if switch_descs[name] > 1 and not prefix:
        nn = NodeName(f"S-{node.guid}", node.kind, named_by="GUID", model=node.desc)
        if model is not None:
            # "MF0;r03-l1:MQM9700" is a name someone configured, unlike a vendor default: two
            # switches configured alike are ambiguous, not two unknown switches.
            nn.claims = name
            nn.shared_name = True
        return nn
    return NodeName(name, node.kind, port_prefix=prefix, model=model)


def _own_part(node: DNode, system: str) -> NodeName | None:
    """The name of one HCA of a system named by a system image GUID it shares with its siblings:
    the system's name with the HCA its own description gives ("gpu042 mlx5_3"), else None."""
    parts = node.desc.split()
    if node.kind != "ca" or len(parts) != 2 or _GENERIC_CA.search(node.desc) \
            or parts[0].casefold() != system.casefold():
        return None
    return NodeName(system, "ca", host_port=parts[1], named_by="system image GUID")


def _description_name(node: DNode) -> str | None:
    """The device name a node's own description gives, if it gives one."""
    if node.kind == "ca":
        parts = node.desc.split()
        return None if _GENERIC_CA.search(node.desc) or not parts else parts[0]
    name, prefix, model = _switch_name(node.desc)
    return None if _vendor_default(name, prefix, model) else name or None


def vendor_default_switch(node: DNode) -> bool:
    """Whether a switch still gives the vendor's default description (no name of its own)."""
    return node.kind == "switch" and _vendor_default(*_switch_name(node.desc))


def _vendor_default(name: str, prefix: str, model: str | None) -> bool:
    """Whether a switch description is the vendor's default ("MF0;name:model" is configured)."""
    return not prefix and model is None and bool(_GENERIC_SWITCH.search(name))


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
    fab: DiscoveredFabric, manifest: Manifest | None = None, name_map: dict[str, str] | None = None,
    inferred: dict[str, str] | None = None,
) -> ResolvedFabric:
    """Name every discovered link end; drops links inside a director chassis (blade to blade).
    ``inferred``: names the topology gave switches still at their vendor description."""
    names = name_nodes(fab, manifest, name_map, inferred)
    out = ResolvedFabric(names=names, source=fab.source)
    sharp = {g for g, n in fab.nodes.items() if is_aggregation_node(n)}
    out.aggregation_nodes = sorted(sharp)
    for lk in fab.links:
        na, nb = names[lk.a_guid], names[lk.b_guid]
        if sharp and (lk.a_guid in sharp or lk.b_guid in sharp):
            # A SHARP aggregation node lives inside its Quantum switch: its "link" is not a cable.
            out.aggregation_links += 1
            continue
        if (na.port_prefix or nb.port_prefix) and na.device == nb.device and na.kind == nb.kind == "switch":
            out.internal_links += 1
            continue
        out.links.append(RLink(endpoint(na, lk.a_port), endpoint(nb, lk.b_port), lk.width, lk.speed, lk.state,
                               lk.line, lk.a_guid, lk.b_guid, lk.a_port, lk.b_port, lk.source))
    _set_aside_ambiguous(fab, out)
    for (guid, port), state in fab.down_ports.items():
        nn = names.get(guid)
        if nn is None and name_map and guid in name_map:
            # A dark HCA is absent from the discovered nodes; ibstat or a map still names it.
            nn = _from_text(DNode(guid=guid, kind="ca", desc=name_map[guid]), name_map[guid], "node-name-map")
        if nn is not None:
            ep = endpoint(nn, port)
            out.down[ep.key] = (ep, state)
    return out


def _set_aside_ambiguous(fab: DiscoveredFabric, out: ResolvedFabric) -> None:
    """Move links whose end identity is ambiguous out of ``out.links`` into ``out.ambiguous``.

    A GUID whose port is cabled twice (or which two node blocks reported) is two devices; two
    GUIDs whose ends get one name are two devices too. Either way a fix resting on it would be wrong.
    """
    # First a cheap pass that only looks for a clash; most fabrics have none.
    end_of: dict[tuple[str, int | str], int] = {}
    owner: dict[tuple[str, str], tuple[str, int | str]] = {}
    shared: dict[str, list[str]] = defaultdict(list)
    for g, nn in out.names.items():
        if nn.shared_name and nn.claims:
            shared[nn.claims.casefold()].append(g)
    clash = bool(fab.duplicate_guids) or bool(shared)
    for i, rl in enumerate(out.links):
        ea, eb = (rl.a_guid, rl.a_num), (rl.b_guid, rl.b_num)
        if end_of.setdefault(ea, i) != i or end_of.setdefault(eb, i) != i \
                or owner.setdefault(rl.a.key, ea) != ea or owner.setdefault(rl.b.key, eb) != eb:
            clash = True
            break
    if not clash:
        return
    by_end: dict[tuple[str, int | str], list[int]] = defaultdict(list)
    by_name: dict[tuple[str, str], set[tuple[str, int | str]]] = defaultdict(set)
    for i, rl in enumerate(out.links):
        for g, n, ref in ((rl.a_guid, rl.a_num, rl.a), (rl.b_guid, rl.b_num, rl.b)):
            by_end[(g, n)].append(i)
            by_name[ref.key].add((g, n))
    groups: dict[tuple[str, str], Ambiguity] = {}
    taken: set[int] = set()
    dup_guids = {g for (g, _n), idx in by_end.items() if len(idx) > 1} | set(fab.duplicate_guids)
    for (g, n), idx in by_end.items():
        if g not in dup_guids:
            continue
        amb = groups.get(("guid", g))
        if amb is None:
            node = fab.nodes.get(g)
            descs = list(fab.duplicate_guids.get(g, [])) or ([repr(node.desc)] if node else [])
            amb = groups[("guid", g)] = Ambiguity("duplicate_guid", g, [g], descs,
                                                  node_kind=node.kind if node else "ca")
        for i in idx:
            if i not in taken:
                taken.add(i)
                rl = out.links[i]
                amb.links.append(rl)
                amb.peers.append(rl.b if (rl.a_guid, rl.a_num) == (g, n) else rl.a)
    for key, ends in by_name.items():
        guids = sorted({g for g, _n in ends})
        if len(ends) < 2 or len(guids) < 2:
            continue  # one GUID's port twice is a duplicate GUID (above), not a name clash
        # sorted: a report must not change with Python's string-hash seed
        ref = next(r for i in by_end[min(ends)] for r in (out.links[i].a, out.links[i].b) if r.key == key)
        amb = groups.setdefault(("name", str(ref)), Ambiguity(
            "duplicate_name", str(ref), guids,
            [repr(fab.nodes[g].desc) for g in guids if g in fab.nodes]))
        for end in sorted(ends):
            for i in by_end[end]:
                if i not in taken:
                    taken.add(i)
                    rl = out.links[i]
                    amb.links.append(rl)
                    amb.peers.append(rl.b if (rl.a_guid, rl.a_num) == end else rl.a)
    for name, guids in shared.items():
        amb = groups.setdefault(("name", name), Ambiguity(
            "duplicate_name", out.names[guids[0]].claims or name, sorted(guids),
            [repr(fab.nodes[g].desc) for g in sorted(guids)], node_kind="switch"))
        mine = set(guids)
        for i, rl in enumerate(out.links):
            if i not in taken and (rl.a_guid in mine or rl.b_guid in mine):
                taken.add(i)
                amb.links.append(rl)
                amb.peers.append(rl.b if rl.a_guid in mine else rl.a)
    if taken or groups:
        out.links = [rl for i, rl in enumerate(out.links) if i not in taken]
        out.ambiguous = list(groups.values())
