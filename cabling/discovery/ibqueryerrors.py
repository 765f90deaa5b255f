"""Parse ``ibqueryerrors`` output: the error counters of every port that has any.

With every threshold at 0 (its default, and what ``validate --live`` asks for) ibqueryerrors
lists each port with a counter above zero, as ``GUID 0x... port 3: [SymbolErrorCounter == 12]``
under an ``Errors for 0x... "description"`` header, and ends with how many ports it checked: the
ports it does not list count zero, which is what the fabric's median is taken over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cabling.errors import CablingInputError
from cabling.limits import FABRIC_DUMP
from cabling.textio import read_text

_NODE = re.compile(r'^(?:Errors|Data Counters|Details) for (?:0x([0-9a-fA-F]{1,16}) )?"(.*)"\s*$')
_PORT = re.compile(r"^GUID 0x([0-9a-fA-F]{1,16}) port (\d{1,4}|ALL):((?:\s*\[[^\]]*\])*)\s*$")
_COUNTER = re.compile(r"\[\s*([A-Za-z][A-Za-z0-9]*)\s*==\s*(\d{1,20})(?:\s*\([^)]*\))?\s*\]")
_CHECKED = re.compile(r"(\d{1,9}) ports checked")
# Lines ibqueryerrors prints that carry no counter: link details (-r), summary and option echoes.
_OTHER = re.compile(r"^(?:Link info:|##|Suppressing:|Using )")


@dataclass(slots=True)
class PortCounters:
    """The counters one port reported above zero."""

    guid: str  # the GUID on the port's line (a switch's node GUID, an HCA's port GUID)
    port: int
    desc: str
    node_guid: str | None
    counters: dict[str, int] = field(default_factory=dict)
    line: int = 0


@dataclass
class CounterReport:
    """Every port with a counter above zero, and how many ports were checked in all."""

    ports: list[PortCounters] = field(default_factory=list)
    checked: int | None = None
    source: str = ""

    def values(self, counter: str) -> list[int]:
        """The counter over every port checked (those not listed count zero)."""
        listed = [p.counters[counter] for p in self.ports if counter in p.counters]
        zeros = max((self.checked or len(self.ports)) - len(listed), 0)
        return listed + [0] * zeros


def load_ibqueryerrors(path: str | Path) -> CounterReport:
    """Read an ibqueryerrors file."""
    p = Path(path)
    return parse_ibqueryerrors(read_text(p, "ibqueryerrors output", cap=FABRIC_DUMP, strict=False), str(p))


def parse_ibqueryerrors(text: str, source: str = "<ibqueryerrors>") -> CounterReport:
    """Parse ibqueryerrors text; a line of none of its forms is an error naming the line."""
    out = CounterReport(source=source)
    desc, node_guid = "", None
    for lineno, raw in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        m = _NODE.match(line)
        if m:
            node_guid = m.group(1).lower().rjust(16, "0") if m.group(1) else None
            desc = m.group(2)
            continue
        m = _PORT.match(line)
        if m:
            if m.group(2) == "ALL":  # the node's sum over its ports: each port is listed too
                continue
            counters = {name: int(value) for name, value in _COUNTER.findall(m.group(3))}
            out.ports.append(PortCounters(m.group(1).lower().rjust(16, "0"), int(m.group(2)), desc, node_guid,
                                          counters, lineno))
            continue
        checked = _CHECKED.search(line)
        if checked and line.startswith("##"):
            out.checked = int(checked.group(1))
            continue
        if _OTHER.match(line):
            continue
        raise CablingInputError(f"cannot read ibqueryerrors line {line[:70]!r}", file=source, line=lineno,
                                hint="expected 'Errors for 0x<guid> \"desc\"' and 'GUID 0x<guid> port N: "
                                "[Counter == value]' lines, as ibqueryerrors prints them")
    if out.checked is None and not out.ports:
        raise CablingInputError("no port counters and no '## Summary': this is not ibqueryerrors output",
                                file=source, line=1)
    return out
