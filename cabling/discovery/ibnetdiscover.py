"""Parse ``ibnetdiscover`` topology output (tabs or not, CRLF or bare CR, terminal-log noise)."""

from __future__ import annotations

import re
from pathlib import Path

from cabling.discovery.model import DiscoveredFabric, DLink, DNode, NodeKind
from cabling.errors import CablingInputError
from cabling.speeds import parse_ibnet_rate, speed_rank, width_lanes
from cabling.textio import read_text

_KINDS: dict[str, NodeKind] = {"switch": "switch", "ca": "ca", "rt": "router"}
_HEADER = re.compile(
    r'^(Switch|Ca|Rt)\s*(\d{1,9})\s*"([SHR])-([0-9a-fA-F]+)"\s*#\s*"(.*)"'
    r"(?:\s+(?:enhanced|base)\s+port\s+\d+)?(?:\s+lid\s+(\d{1,9}))?(?:\s+lmc\s+\d+)?\s*$"
)
_PORT = re.compile(
    r"^\[(\d{1,9})\](?:\(([0-9a-fA-F]+)\))?\s*"
    r'"([SHR])-([0-9a-fA-F]+)"\[(\d{1,9})\](?:\(([0-9a-fA-F]+)\))?\s*'
    r'#\s*(?:lid\s+\d+\s+lmc\s+\d+\s+)?"(.*)"\s+lid\s+(\d{1,9})\s+(\S+)\s*$'
)
_KV = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=(0x[0-9a-fA-F]+)")


def load_ibnetdiscover(path: str | Path) -> DiscoveredFabric:
    """Read an ibnetdiscover file."""
    p = Path(path)
    return parse_ibnetdiscover(read_text(p, "ibnetdiscover output", strict=False), str(p))


def parse_ibnetdiscover(text: str, source: str = "<ibnetdiscover>") -> DiscoveredFabric:
    """Parse ibnetdiscover text. Lines outside node blocks that are not ibnetdiscover syntax
    (a terminal log banner, a shell prompt) are skipped and listed in ``skipped_lines``; a bad
    line inside a node block is an error naming its line."""
    fab = DiscoveredFabric(source=source)
    seen: dict[tuple[str, int, str, int], int] = {}  # a cable's two ends -> its index in fab.links
    headers: dict[str, int] = {}  # GUID -> line of its node block: a second block is a duplicate GUID
    current: DNode | None = None
    sysimg: str | None = None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            current = None
            continue
        if line[0] == "[":  # port lines are most of the file: test them first
            if current is None:
                raise CablingInputError(
                    f"port line outside a node block: {line[:60]!r}", file=source, line=lineno,
                    hint="each port list must follow its 'Switch' or 'Ca' line, without blank lines",
                )
            _port_line(fab, current, line, lineno, source, seen)
            continue
        if line[0] == "#":
            continue
        kv = _KV.match(line)
        if kv:
            if kv.group(1) == "sysimgguid":
                sysimg = kv.group(2)[2:].rjust(16, "0").lower()
            continue
        m = _HEADER.match(line)
        if m:
            guid = m.group(4).lower().rjust(16, "0")
            current = fab.nodes.get(guid) or DNode(guid=guid, kind=_KINDS[m.group(1).lower()], desc=m.group(5))
            if guid in headers:
                # Two devices answer with one GUID (a mis-flashed HCA): keep both descriptions so the
                # finding can name them; the links of both blocks stay, on the one shared node.
                fab.note_duplicate(guid, current.desc, headers[guid])
                fab.note_duplicate(guid, m.group(5), lineno)
            headers[guid] = lineno
            current.nports = int(m.group(2))
            current.desc = m.group(5)
            current.lid = int(m.group(6)) if m.group(6) else None
            current.sysimg = sysimg
            fab.nodes[guid] = current
            continue
        if current is not None:
            raise CablingInputError(
                f"cannot read this line of node {current.desc!r}: {line[:60]!r}", file=source, line=lineno,
                hint="expected '[port] \"S-<guid>\"[port] # \"desc\" lid N 4xHDR'",
            )
        fab.skipped_lines.append(lineno)
    if not fab.nodes:
        raise CablingInputError(
            "no 'Switch' or 'Ca' node found: this is not ibnetdiscover output", file=source, line=1,
            hint="capture it with 'ibnetdiscover > fabric.txt' (or 'ibnetdiscover -g' for GUIDs)",
        )
    return fab


_RATES: dict[str, tuple[str | None, str | None] | None] = {}
_GUIDS: dict[str, str] = {}


def _guid(text: str) -> str:
    """``c42a10300fb52ec`` -> ``0c42a10300fb52ec`` (a switch GUID recurs on every port line: cached)."""
    g = _GUIDS.get(text)
    if g is None:
        g = _GUIDS[text] = text.lower().rjust(16, "0")
        if len(_GUIDS) > 100_000:
            _GUIDS.clear()
    return g


def _port_line(
    fab: DiscoveredFabric, node: DNode, line: str, lineno: int, source: str,
    seen: dict[tuple[str, int, str, int], int],
) -> None:
    m = _PORT.match(line)
    if not m:
        raise CablingInputError(
            f"cannot read port line of {node.desc!r}: {line[:80]!r}", file=source, line=lineno,
            hint="expected '[port](portguid) \"S-<guid>\"[port] # \"desc\" lid N 4xHDR'",
        )
    # One groups() call: a 12,000-link dump has 25,000 port lines.
    g_port, g_pguid, g_kind, g_peer, g_peer_port, g_peer_pguid, g_desc, g_lid, g_rate = m.groups()
    port = int(g_port)
    if g_pguid:
        node.port_guids[port] = _guid(g_pguid)
    peer = _guid(g_peer)
    peer_port = int(g_peer_port)
    peer_node = fab.nodes.get(peer)
    if peer_node is None:
        kind: NodeKind = {"S": "switch", "H": "ca", "R": "router"}[g_kind]  # type: ignore[assignment]
        peer_node = fab.nodes[peer] = DNode(guid=peer, kind=kind, desc=g_desc, lid=int(g_lid))
    if g_peer_pguid:
        peer_node.port_guids[peer_port] = _guid(g_peer_pguid)
    if g_rate in _RATES:
        rate = _RATES[g_rate]
    else:
        rate = _RATES[g_rate] = parse_ibnet_rate(g_rate)
    width, speed = rate if rate else (None, None)
    # Each cable is listed from both ends: keep it once, in the order of the two ends.
    mine = node.guid
    key = (mine, port, peer, peer_port) if (mine, port) <= (peer, peer_port) else (peer, peer_port, mine, port)
    first = seen.get(key)
    if first is not None:
        _keep_lower_rate(fab.links[first], width, speed)
        return
    seen[key] = len(fab.links)
    fab.links.append(DLink(mine, port, peer, peer_port, width, speed, line=lineno))


def _keep_lower_rate(link: DLink, width: str | None, speed: str | None) -> None:
    """Each end prints its own PortInfo, so the two lines of a cable can disagree (one end at
    1x): the link carries traffic at the lower of the two, which is what validate must judge."""
    if width and (link.width is None or width_lanes(width) < width_lanes(link.width)):
        link.width = width
    if speed and (link.speed is None or speed_rank(speed) < speed_rank(link.speed)):
        link.speed = speed
