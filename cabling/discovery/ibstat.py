"""Parse ``ibstat`` output: each HCA's GUIDs, port state and rate (maps GUIDs to host HCA names)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cabling.errors import CablingInputError
from cabling.limits import IBSTAT
from cabling.speeds import normalize_speed
from cabling.textio import read_text

_CA = re.compile(r"^CA '([^']+)'$")
_PORT = re.compile(r"^Port (\d{1,9}):$")
_KV = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*(.*)$")


@dataclass(slots=True)
class IbstatPort:
    """One HCA port as ibstat reports it."""

    hca: str
    port: int
    state: str = ""
    physical_state: str = ""
    rate: int | None = None
    node_guid: str = ""
    port_guid: str = ""
    link_layer: str = ""
    ca_type: str = ""

    @property
    def speed(self) -> str | None:
        """The IB speed name of the port's rate (``400`` -> ``NDR``), if it is a known 4x rate."""
        try:
            return normalize_speed(self.rate) if self.rate else None
        except ValueError:
            return None


def load_ibstat(path: str | Path) -> list[IbstatPort]:
    """Read one host's ibstat output."""
    p = Path(path)
    return parse_ibstat(read_text(p, "ibstat output", cap=IBSTAT, strict=False), str(p))


def parse_ibstat(text: str, source: str = "<ibstat>") -> list[IbstatPort]:
    """Parse ibstat text into ports; a stray line is an error naming its line."""
    out: list[IbstatPort] = []
    hca = ""
    node_guid = ""
    ca_type = ""
    port: IbstatPort | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _CA.match(line)
        if m:
            hca, node_guid, ca_type, port = m.group(1), "", "", None
            continue
        m = _PORT.match(line)
        if m and hca:
            port = IbstatPort(hca=hca, port=int(m.group(1)), node_guid=node_guid, ca_type=ca_type)
            out.append(port)
            continue
        m = _KV.match(line)
        if m is None or not hca:
            raise CablingInputError(f"cannot read ibstat line {line[:60]!r}", file=source, line=lineno,
                                    hint="expected \"CA 'mlx5_0'\" blocks as printed by ibstat")
        key, value = m.group(1).strip().lower(), m.group(2).strip()
        if port is None:
            if key == "node guid":
                node_guid = value.lower().removeprefix("0x")
            elif key == "ca type":
                ca_type = value
            continue
        if key == "state":
            port.state = value
        elif key == "physical state":
            port.physical_state = value
        elif key == "rate":
            port.rate = int(value) if value.isdecimal() and len(value) < 10 else None
        elif key == "port guid":
            port.port_guid = value.lower().removeprefix("0x")
        elif key == "link layer":
            port.link_layer = value
    if not out:
        raise CablingInputError("no \"CA '...'\" block with a port: this is not ibstat output", file=source, line=1)
    return out
