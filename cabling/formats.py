"""Which file formats the cabling commands read, and a plain refusal naming those they do not."""

from __future__ import annotations

import re
from pathlib import Path

from cabling.errors import CablingInputError

MANIFEST_FORMATS = (
    "YAML or JSON manifest (.yaml, .yml, .json; 'provision cabling schema')",
    "CSV cable list (.csv: a_device,a_port,b_device,b_port,...)",
    "UFM NDT (.ndt, or NDT .csv; several combine)",
)
DISCOVERY_FORMATS = (
    "ibnetdiscover output, plain, -g or -f; any file name, .topo too (--ibnetdiscover)",
    "iblinkinfo output: blocks, -l lines, or filtered as 'iblinkinfo | grep Up' (--iblinkinfo)",
    "UFM REST API or its saved systems/ports/links JSON (--ufm, --ufm-dir)",
    "lldpctl -f json per host (--lldp)",
    "ibstat per host (--ibstat), node-name-map (--node-name-map)",
)

# (format name, test on the first few KiB, file suffixes) of formats we know and do not read.
_KNOWN: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("ibdm topology (.topo)", re.compile(r"^\s*P\d+\s+-\d+[xX]-[\d.]+G?\w*->", re.MULTILINE), (".topo",)),
    ("ibdm/ibdiagnet cable list (.cables)", re.compile(r"^-{10,}\s*$[\s\S]*Port\s*=", re.MULTILINE), (".cables",)),
    ("ibdiagnet database (.db_csv)", re.compile(r"^START_\w+\s*$", re.MULTILINE), (".db_csv",)),
    ("ibdiagnet subnet list (.lst)", re.compile(r"^\{\s*(?:CA|SW)\s+Ports:", re.MULTILINE), (".lst",)),
    # rdma-core dump_ports_report: "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x... ( 'a' - 'b' )".
    ("'ibnetdiscover -p' ports report (it gives CA port GUIDs, not node GUIDs)",
     re.compile(r"^(?:SW|CA|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s+\S+\s+\S+\s+(?:-\s+(?:SW|CA|RT)\b|'|\S)",
                re.MULTILINE), ()),
    # rdma-core list_node: "Switch\t : 0x0002c90200402b48 ports 36 devid 0xbd36 vendid 0x2c9 \"name\"".
    ("'ibnetdiscover -l' node list (it has no links)",
     re.compile(r"^(?:Switch|Ca|Router)\s*:\s*0x[0-9a-fA-F]+\s+ports\s+\d+", re.MULTILINE), ()),
    ("XML (such as an ibfabricconf or OpenSM topology file)", re.compile(r"\A\s*(?:\ufeff)?<(?:\?xml|[A-Za-z])"),
     (".xml",)),
)


# An ibnetdiscover node header ('Switch\t36 "S-f452..."'): ibnetdiscover output is often saved as
# .topo or .topofile, the suffix ibdm uses too; the content decides.
_IBNETDISCOVER = re.compile(r'^\s*(?:Switch|Ca|Rt)\s+\d+\s+"[SHR]-[0-9a-fA-F]+"', re.MULTILINE)


def unsupported_format(path: Path, head: str) -> str | None:
    """The name of a known format we do not read, from the file's first bytes, or from its suffix
    when the first bytes are not ibnetdiscover output either."""
    suffix = path.suffix.lower()
    for name, pattern, _suffixes in _KNOWN:
        if pattern.search(head):
            return name
    if _IBNETDISCOVER.search(head):
        return None
    for name, _pattern, suffixes in _KNOWN:
        if suffix in suffixes:
            return name
    return None


def refuse(path: Path, fmt: str, expected: tuple[str, ...], what: str) -> CablingInputError:
    """The error for a file in a format we do not read, listing the ones we do."""
    return CablingInputError(
        f"this is {fmt}, which is not supported as {what}", file=str(path),
        hint="supported: " + "; ".join(expected),
    )


def check_manifest_format(path: Path, head: str) -> None:
    """Refuse a manifest file in a known foreign format before the YAML parser reports nonsense."""
    fmt = unsupported_format(path, head)
    if fmt is not None:
        raise refuse(path, fmt, MANIFEST_FORMATS, "a manifest")


def check_discovery_format(path: Path, head: str, option: str) -> None:
    """Refuse a discovery file in a known foreign format before its parser reports a bad line."""
    fmt = unsupported_format(path, head)
    if fmt is not None:
        raise refuse(path, fmt, DISCOVERY_FORMATS, f"{option} input")
