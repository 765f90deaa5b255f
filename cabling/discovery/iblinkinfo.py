"""Parse ``iblinkinfo`` output (per-node blocks, or ``-l`` one line per port): links and port states."""

from __future__ import annotations

import re
from pathlib import Path

from cabling.discovery.model import ACTIVE, DiscoveredFabric, DLink, DNode
from cabling.errors import CablingInputError
from cabling.speeds import speed_from_lane_gbps

_SW_HEADER = re.compile(r"^Switch:?\s+0x([0-9a-fA-F]+)\s+(.*?):?\s*$")
_CA_HEADER = re.compile(r"^CA:\s+(.*?):?\s*$")
_LINK = re.compile(
    r"==\(\s*(?:(\d+)X\s+([\d.]+)\s+Gbps(?:\s+\w+)?\s+)?([A-Za-z]+)\s*/\s*([A-Za-z]+)\s*\)==>"
)
_LOCAL = re.compile(r"^(?:0x([0-9a-fA-F]+)\s+)?(?:\"\s*(.*?)\"\s+)?(\d+)\s+(\d+)\[[^\]]*\]\s*$")
_REMOTE = re.compile(r'^\s*(?:0x([0-9a-fA-F]+)\s+)?(?:(\d+)\s+(\d+)\[[^\]]*\])?\s*(?:\[[^\]]*\])?\s*"(.*)"\s*\(.*\)\s*$')


def load_iblinkinfo(path: str | Path) -> DiscoveredFabric:
    """Read an iblinkinfo file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CablingInputError(f"cannot read iblinkinfo output: {exc.strerror}", file=str(p)) from None
    return parse_iblinkinfo(text, str(p))


def parse_iblinkinfo(text: str, source: str = "<iblinkinfo>") -> DiscoveredFabric:
    """Parse iblinkinfo text; a port line that cannot be read is an error naming its line."""
    fab = DiscoveredFabric(source=source)
    node: DNode | None = None
    by_lid: dict[int, str] = {}
    pending: list[tuple[str, int, int, int, str, str | None, str | None, str, int]] = []
    for lineno, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _SW_HEADER.match(line)
        if m and "==(" not in line:
            guid = m.group(1).lower().rjust(16, "0")
            node = fab.nodes.setdefault(guid, DNode(guid=guid, kind="switch", desc=m.group(2)))
            continue
        m = _CA_HEADER.match(line)
        if m and "==(" not in line:
            node = DNode(guid="", kind="ca", desc=m.group(1))
            continue
        lk = _LINK.search(line)
        if lk is None:
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
            g = lguid.lower().rjust(16, "0")
            kind = "ca" if node is None or ldesc.strip() != node.desc else node.kind
            node = fab.nodes.setdefault(g, DNode(guid=g, kind=kind, desc=ldesc.strip()))
        if node is None:
            raise CablingInputError("port line before any 'Switch:' or 'CA:' header", file=source, line=lineno)
        if node.kind == "ca" and not node.guid:
            if not lguid:
                raise CablingInputError("CA port line without its port GUID", file=source, line=lineno)
            node.guid = lguid.lower().rjust(16, "0")
            node = fab.nodes.setdefault(node.guid, node)
        if node.kind == "ca" and lguid:
            node.port_guids[port] = lguid.lower().rjust(16, "0")
        by_lid.setdefault(lid, node.guid)
        width = f"{lk.group(1)}x" if lk.group(1) else None
        speed = speed_from_lane_gbps(lk.group(2)) if lk.group(2) else None
        logical, physical = lk.group(3), lk.group(4)
        if remote.group(2) is None:
            fab.down_ports[(node.guid, port)] = physical if logical.lower() == "down" else logical
            continue
        pending.append((node.guid, port, int(remote.group(2)), int(remote.group(3)), remote.group(4),
                        width, speed, logical, lineno))
    seen: set[frozenset[tuple[str, int | str]]] = set()
    for guid, port, rlid, rport, rdesc, width, speed, logical, lineno in pending:
        peer = by_lid.get(rlid)
        if peer is None:
            # Partial scans (iblinkinfo -S) print peers they did not visit.
            peer = f"lid-{rlid}"
            kind = "ca" if len(rdesc.split()) == 2 and not rdesc.startswith("MF0;") else "switch"
            fab.nodes.setdefault(peer, DNode(guid=peer, kind=kind, desc=rdesc, lid=rlid))
        key = frozenset(((guid, port), (peer, rport)))
        if key in seen:
            continue
        seen.add(key)
        state = ACTIVE if logical.lower() == "active" else logical.lower()
        fab.links.append(DLink(guid, port, peer, rport, width, speed, state, lineno))
    if not fab.nodes:
        raise CablingInputError("no 'Switch:' or 'CA:' block found: this is not iblinkinfo output",
                                file=source, line=1)
    return fab


def format_port_line(lid: int, port: int, width: str | None, speed_gbps: str | None, logical: str,
                     physical: str, peer_lid: int | None = None, peer_port: int | None = None,
                     peer_desc: str = "") -> str:
    """One iblinkinfo port line (used by benchmarks and tests to synthesise fabrics)."""
    if peer_lid is None:
        return f"{lid:>11} {port:>4}[  ] ==({logical:>19}/ {physical})==>             [  ] \"\" ( )"
    rate = f"{width[:-1].upper() if width else '4'}X {speed_gbps:>9} Gbps"
    return (f"{lid:>11} {port:>4}[  ] ==( {rate} {logical}/  {physical})==> {peer_lid:>6} {peer_port:>4}[  ] "
            f"\"{peer_desc}\" ( )")
