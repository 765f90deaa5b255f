"""Parse ``iblinkinfo`` output (per-node blocks, or ``-l`` one line per port): links and port states."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cabling.discovery.model import (
    ACTIVE,
    DiscoveredFabric,
    DLink,
    DNode,
    NodeKind,
    describes_aggregation_node,
)
from cabling.errors import CablingInputError
from cabling.limits import FABRIC_DUMP
from cabling.speeds import WIDTHS, speed_from_lane_gbps
from cabling.textio import read_text

# GUIDs are 64 bits: a 17th hex digit leaves the line unread (an error naming it), never a GUID.
_SW_HEADER = re.compile(r"^Switch:?\s+0x([0-9a-fA-F]{1,16})(?![0-9a-fA-F])\s*(.*?):?\s*$")
_CA_HEADER = re.compile(r"^CA:\s+(.*?):?\s*$")
# "( 4X 53.125 Gbps Active/  LinkUp)", "( 4X 10.0 Gbps (FDR10) Active/ LinkUp)", "( Down/ Polling)"
_LINK = re.compile(
    r"==\(\s*(?:(\d{1,3})X\s+([\d.]{1,12})\s+Gbps\s+(?:\(?(FDR10)\)?\s+)?)?([A-Za-z]+)\s*/\s*([A-Za-z]+)\s*\)==>"
)
_LOCAL = re.compile(r"^(?:0x([0-9a-fA-F]{1,16})(?![0-9a-fA-F])\s+)?(?:\"\s*(.*?)\"\s+)?(\d{1,9})\s+(\d{1,9})\[[^\]]*\]\s*$")
_REMOTE = re.compile(
    r'^\s*(?:0x([0-9a-fA-F]{1,16})(?![0-9a-fA-F])\s+)?(?:(\d{1,9})\s+(\d{1,9})\[[^\]]*\])?\s*(?:\[[^\]]*\])?\s*"(.*)"\s*(?:\(.*\))?\s*$'
)
# A CA's node description is "<host> <hca>" (rdma-ndd's default "%h %d"), or without rdma-ndd
# the adapter's model ("MT4123 ConnectX6   Mellanox Technologies"); no switch ASIC is a ConnectX.
_CA_DESC = re.compile(r"^\S+ (?:mlx\d+_\d+|HCA-\d+|ib\S+|hfi\d+_\d+|bnxt_re\d+|irdma\d+)$|^MT\d+ ConnectX",
                      re.IGNORECASE)


@dataclass(slots=True)
class _Port:
    guid: str
    port: int
    lid: int
    width: str | None
    speed: str | None
    logical: str
    physical: str
    peer_guid: str | None
    peer_lid: int | None
    peer_port: int | None
    peer_desc: str
    line: int


def load_iblinkinfo(path: str | Path) -> DiscoveredFabric:
    """Read an iblinkinfo file."""
    p = Path(path)
    return parse_iblinkinfo(read_text(p, "iblinkinfo output", cap=FABRIC_DUMP, strict=False), str(p))


def _guid(text: str) -> str:
    return text.lower().rjust(16, "0")


def parse_iblinkinfo(text: str, source: str = "<iblinkinfo>") -> DiscoveredFabric:
    """Parse iblinkinfo text; a port line that cannot be read is an error naming its line."""
    fab = DiscoveredFabric(source=source)
    if not text.strip():
        # 'iblinkinfo -d' on a fabric with no port down prints nothing at all.
        fab.warnings.append(f"{source} is empty: no port is listed (as 'iblinkinfo -d' prints when no port is down)")
        return fab
    node: DNode | None = None
    known_kind: set[str] = set()
    headless: set[str] = set()
    ports: list[_Port] = []
    for lineno, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lk = _LINK.search(line)
        if lk is None:
            m = _SW_HEADER.match(line)
            if m:
                guid = _guid(m.group(1))
                node = fab.nodes.setdefault(guid, DNode(guid=guid, kind="switch", desc=m.group(2)))
                node.kind = "switch"
                known_kind.add(guid)
                continue
            m = _CA_HEADER.match(line)
            if m:
                node = DNode(guid="", kind="ca", desc=m.group(1))
                continue
            raise CablingInputError(
                f"cannot read iblinkinfo line {line[:70]!r}", file=source, line=lineno,
                hint="expected 'LID PORT[  ] ==( 4X 53.125 Gbps Active/  LinkUp)==> LID PORT[  ] \"peer\" ( )'",
            )
        local = _LOCAL.match(line[: lk.start()].strip())
        remote = _REMOTE.match(line[lk.end():])
        if local is None or remote is None:
            raise CablingInputError(f"cannot read the ports of iblinkinfo line {line[:70]!r}", file=source,
                                    line=lineno)
        lguid, ldesc, lid, port = local.group(1), local.group(2), int(local.group(3)), int(local.group(4))
        if ldesc is not None and lguid:  # -l form: every line names its node
            g = _guid(lguid)
            node = fab.nodes.setdefault(g, DNode(guid=g, kind="ca", desc=ldesc.strip()))
        elif node is None or node.guid in headless:
            # 'iblinkinfo | grep Up' keeps the port lines and drops the headers: a CA's line still
            # carries its port GUID; a switch is known by its LID (its peers' lines give its name).
            node = _headless_node(fab, lguid, lid, port)
            headless.add(node.guid)
            known_kind.add(node.guid)
        elif node.kind == "ca" and lguid:
            # Block form: a CA header is followed by one line per port, each with its port GUID.
            g = _guid(lguid)
            if not node.guid:
                node.guid = g
                node = fab.nodes.setdefault(g, node)
                known_kind.add(g)
            node.port_guids[port] = g
        elif node.kind == "ca" and not node.guid:
            raise CablingInputError("CA port line without its port GUID", file=source, line=lineno)
        if lk.group(1) and f"{lk.group(1)}x" not in WIDTHS:
            raise CablingInputError(f"{lk.group(1)}X is not an InfiniBand link width", file=source, line=lineno,
                                    hint="iblinkinfo prints 1X, 2X, 4X, 8X or 12X; is the file mangled?")
        lane = lk.group(2)
        speed = "FDR10" if lk.group(3) else (speed_from_lane_gbps(lane) if lane else None)
        ports.append(_Port(
            node.guid, port, lid, f"{lk.group(1)}x" if lk.group(1) else None, speed, lk.group(4), lk.group(5),
            _guid(remote.group(1)) if remote.group(1) else None,
            int(remote.group(2)) if remote.group(2) else None, int(remote.group(3)) if remote.group(3) else None,
            remote.group(4), lineno,
        ))
    if not fab.nodes:
        raise CablingInputError("no 'Switch:' or 'CA:' block found: this is not iblinkinfo output",
                                file=source, line=1)
    _infer_kinds(fab, ports, known_kind)
    if headless:
        _name_headless(fab, ports, headless)
    _links(fab, ports)
    return fab


def _headless_node(fab: DiscoveredFabric, lguid: str | None, lid: int, port: int) -> DNode:
    g = _guid(lguid) if lguid else f"lid-{lid}"
    node = fab.nodes.get(g)
    if node is None:
        node = fab.nodes[g] = DNode(guid=g, kind="ca" if lguid else "switch", desc="", lid=lid)
    if lguid:
        node.port_guids[port] = g
    return node


def _name_headless(fab: DiscoveredFabric, ports: list[_Port], headless: set[str]) -> None:
    """Give nodes seen without a header the description their peers' lines print for their LID."""
    desc_of_lid = {p.peer_lid: p.peer_desc for p in ports if p.peer_lid is not None and p.peer_desc}
    for g in headless:
        node = fab.nodes[g]
        if not node.desc and node.lid in desc_of_lid:
            node.desc = desc_of_lid[node.lid]


def _infer_kinds(fab: DiscoveredFabric, ports: list[_Port], known: set[str]) -> None:
    # -l output has no headers: a node with many ports, or a switch-like description, is a switch.
    count: dict[str, int] = {}
    for p in ports:
        count[p.guid] = count.get(p.guid, 0) + 1
    for guid, node in fab.nodes.items():
        if guid not in known:
            node.kind = "ca" if count.get(guid, 0) <= 2 and _looks_like_ca(node.desc) else "switch"


def _looks_like_ca(desc: str) -> bool:
    """A peer seen only by its description: a host HCA ("<host> <hca>") or a SHARP Aggregation
    Node (a CA inside a Quantum switch, which '--switches-only' or '-S' show only as a peer)."""
    return bool(_CA_DESC.search(desc)) or describes_aggregation_node(desc)


def _links(fab: DiscoveredFabric, ports: list[_Port]) -> None:
    by_lid = {p.lid: p.guid for p in ports}
    seen: set[frozenset[tuple[str, int | str]]] = set()
    for p in ports:
        if p.peer_port is None:
            fab.down_ports[(p.guid, p.port)] = p.physical if p.logical.lower() == "down" else p.logical
            continue
        peer = p.peer_guid or by_lid.get(p.peer_lid or -1)
        if peer is None:
            # Partial scans (iblinkinfo -S) print peers they did not visit, by LID only.
            peer = f"lid-{p.peer_lid}"
        if peer not in fab.nodes:
            kind: NodeKind = "ca" if _looks_like_ca(p.peer_desc) else "switch"
            fab.nodes[peer] = DNode(guid=peer, kind=kind, desc=p.peer_desc, lid=p.peer_lid)
        key = frozenset(((p.guid, p.port), (peer, p.peer_port)))
        if key in seen:
            continue
        seen.add(key)
        state = ACTIVE if p.logical.lower() == "active" else p.logical.lower()
        fab.links.append(DLink(p.guid, p.port, peer, p.peer_port, p.width, p.speed, state, p.line))


def format_port_line(lid: int, port: int, width: str | None, speed_gbps: str | None, logical: str,
                     physical: str, peer_lid: int | None = None, peer_port: int | None = None,
                     peer_desc: str = "") -> str:
    """One iblinkinfo port line (used by benchmarks and tests to synthesise fabrics)."""
    if peer_lid is None:
        return f"{lid:>11} {port:>4}[  ] ==({logical:>19}/ {physical})==>             [  ] \"\" ( )"
    rate = f"{width[:-1].upper() if width else '4'}X {speed_gbps:>9} Gbps"
    return (f"{lid:>11} {port:>4}[  ] ==( {rate} {logical}/  {physical})==> {peer_lid:>6} {peer_port:>4}[  ] "
            f"\"{peer_desc}\" ( )")
