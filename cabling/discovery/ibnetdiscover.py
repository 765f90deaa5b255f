"""Parse ``ibnetdiscover`` topology output (tabs or not, CRLF or bare CR, terminal-log noise)."""

from __future__ import annotations

import re
from pathlib import Path

from cabling.discovery.model import DiscoveredFabric, DLink, DNode, NodeKind
from cabling.errors import CablingInputError
from cabling.limits import FABRIC_DUMP
from cabling.speeds import parse_ibnet_rate, speed_rank, width_lanes
from cabling.textio import read_text

_KINDS: dict[str, NodeKind] = {"switch": "switch", "ca": "ca", "rt": "router"}
_HEADER = re.compile(
    r'^(Switch|Ca|Rt)\s*(\d{1,9})\s*"([SHR])-([0-9a-fA-F]+)"\s*#\s*"(.*)"'
    r"(?:\s+(?:enhanced|base)\s+port\s+\d+)?(?:\s+lid\s+(\d{1,9}))?(?:\s+lmc\s+\d+)?\s*$"
)
# rdma-core's out_switch_port / out_ca_port: "-g" adds "[ext N]" (the front-panel number of a
# chassis port) after either port number; "-f" ends the line with " s=4 w=2 v=3" (raw PortInfo);
# Xsigo peers add " slot N" or " (scp)". The port numbers kept are the IB ones, with or without -g.
_PORT = re.compile(
    r"^\[(\d{1,9})\](?:\[ext \d{1,9}\])?(?:\(([0-9a-fA-F]+)\))?\s*"
    r'"([SHR])-([0-9a-fA-F]+)"\[(\d{1,9})\](?:\[ext \d{1,9}\])?\s*(?:\(([0-9a-fA-F]+)\))?\s*'
    r'#\s*(?:lid\s+\d+\s+lmc\s+\d+\s+)?"(.*)"\s+lid\s+(\d{1,9})\s+(\S+)'
    r"(?:\s+s=\d+\s+w=\d+\s+v=\d+)?(?:\s+slot\s+\d+|\s+\(scp\))?\s*$"
)
# A line that starts like a node header: one that then does not parse is a cut or mangled file.
_HEADER_LIKE = re.compile(r"^(?:Switch|Ca|Rt)\s+\d+(?:\s|$)")
_KV = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=(0x[0-9a-fA-F]+)")


def load_ibnetdiscover(path: str | Path) -> DiscoveredFabric:
    """Read an ibnetdiscover file."""
    p = Path(path)
    return parse_ibnetdiscover(read_text(p, "ibnetdiscover output", cap=FABRIC_DUMP, strict=False), str(p))


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
        if m is None and _HEADER_LIKE.match(line):
            # The nodes of this block (and their links) would be missing from the fabric without a word.
            raise CablingInputError(
                f"cannot read this node header: {line[:80]!r}", file=source, line=lineno,
                hint="expected 'Switch 36 \"S-<guid>\" # \"desc\" enhanced port 0 lid N lmc 0'; is the file cut short?",
            )
        if m:
            guid = _checked_guid(m.group(4), source, lineno)
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
            hint="capture it with 'ibnetdiscover > fabric.txt' (plain, -g or -f; not -l or -p)",
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


def _checked_guid(text: str, source: str, lineno: int) -> str:
    """A GUID is 64 bits (rdma-core prints ``%016x``): more digits is a mangled line, which would
    otherwise give an as-built manifest that validate then refuses."""
    if len(text) > 16:
        raise CablingInputError(f"{text!r} is not a GUID: more than 16 hex digits", file=source, line=lineno,
                                hint="a GUID is 64 bits, at most 16 hex digits")
    return _guid(text)


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
    if len(g_peer) > 16 or len(g_pguid or "") > 16 or len(g_peer_pguid or "") > 16:
        for g in (g_peer, g_pguid, g_peer_pguid):
            _checked_guid(g or "", source, lineno)
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
    if rate is None:
        # rdma-core prints a width (1x..12x or ??) and a speed name (or ???); anything else is a
        # mangled line, and guessing would judge a cable on a rate nobody measured.
        raise CablingInputError(
            f"{g_rate[:40]!r} is not a link rate", file=source, line=lineno,
            hint="ibnetdiscover prints rates like 4xHDR, 1xSDR, 2x??? or ??NDR; is the file mangled?",
        )
    width, speed = rate
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
