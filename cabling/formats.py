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
    "ibnetdiscover output (--ibnetdiscover)",
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
    ("XML (such as an ibfabricconf or OpenSM topology file)", re.compile(r"\A\s*(?:\ufeff)?<(?:\?xml|[A-Za-z])"),
     (".xml",)),
)


def unsupported_format(path: Path, head: str) -> str | None:
    """The name of a known format we do not read, from the file's suffix or its first bytes."""
    suffix = path.suffix.lower()
    for name, pattern, suffixes in _KNOWN:
        if suffix in suffixes or pattern.search(head):
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
