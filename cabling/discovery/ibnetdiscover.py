"""Parse ``ibnetdiscover`` topology output (tabs or not, CRLF or bare CR, terminal-log noise)."""

from __future__ import annotations

import re
from pathlib import Path

from cabling.discovery.model import DiscoveredFabric, DLink, DNode, NodeKind
from cabling.errors import CablingInputError
from cabling.speeds import parse_ibnet_rate
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
    seen: dict[frozenset[tuple[str, int | str]], int] = {}
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


def _port_line(
    fab: DiscoveredFabric, node: DNode, line: str, lineno: int, source: str,
    seen: dict[frozenset[tuple[str, int | str]], int],
) -> None:
    m = _PORT.match(line)
    if not m:
        raise CablingInputError(
            f"cannot read port line of {node.desc!r}: {line[:80]!r}", file=source, line=lineno,
            hint="expected '[port](portguid) \"S-<guid>\"[port] # \"desc\" lid N 4xHDR'",
        )
    port = int(m.group(1))
    if m.group(2):
        node.port_guids[port] = m.group(2).lower().rjust(16, "0")
    peer = m.group(4).lower().rjust(16, "0")
    peer_port = int(m.group(5))
    if peer not in fab.nodes:
        kind: NodeKind = {"S": "switch", "H": "ca", "R": "router"}[m.group(3)]  # type: ignore[assignment]
        fab.nodes[peer] = DNode(guid=peer, kind=kind, desc=m.group(7), lid=int(m.group(8)))
    if m.group(6):
        fab.nodes[peer].port_guids[peer_port] = m.group(6).lower().rjust(16, "0")
    rate = parse_ibnet_rate(m.group(9))
    key = frozenset(((node.guid, port), (peer, peer_port)))
    if key in seen:
        return
    seen[key] = len(fab.links)
    fab.links.append(DLink(node.guid, port, peer, peer_port, rate[0] if rate else None,
                           rate[1] if rate else None, line=lineno))
