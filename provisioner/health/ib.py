"""Parsers of ``ibstat`` and of InfiniBand port error counters (sysfs), with deltas between reads."""

from __future__ import annotations

import re
from dataclasses import dataclass

from provisioner.health.errors import ParseError

_CA = re.compile(r"^CA '(?P<name>[^']+)'")
_PORT = re.compile(r"^\s*Port (?P<num>[0-9]{1,9}):\s*$")
_KV = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")


@dataclass
class IbPort:
    """One port of one HCA as ibstat shows it."""

    ca: str
    port: int
    ca_type: str | None
    firmware: str | None
    state: str | None
    physical_state: str | None
    rate: int | None  # Gb/s
    link_layer: str | None
    port_guid: str | None

    @property
    def name(self) -> str:
        """"mlx5_0/1"."""
        return f"{self.ca}/{self.port}"

    @property
    def infiniband(self) -> bool:
        """Link layer InfiniBand (RoCE/Ethernet ports of the same HCAs are not judged here)."""
        return (self.link_layer or "InfiniBand") == "InfiniBand"

    @property
    def active(self) -> bool:
        """State Active and physical state LinkUp."""
        return self.state == "Active" and self.physical_state == "LinkUp"


def parse_ibstat(text: str) -> list[IbPort]:
    """All ports in ``ibstat`` output; raises ParseError when there is no CA at all."""
    ports: list[IbPort] = []
    ca: str | None = None
    ca_fields: dict[str, str] = {}
    port_fields: dict[str, str] | None = None
    port_num = 0

    def flush() -> None:
        if ca is not None and port_fields is not None:
            rate = port_fields.get("Rate", "")
            ports.append(
                IbPort(
                    ca=ca, port=port_num, ca_type=ca_fields.get("CA type"),
                    firmware=ca_fields.get("Firmware version"),
                    state=port_fields.get("State"), physical_state=port_fields.get("Physical state"),
                    rate=int(rate) if rate.isdecimal() and len(rate) < 10 else None,
                    link_layer=port_fields.get("Link layer"), port_guid=port_fields.get("Port GUID"),
                )
            )

    for line in text.splitlines():
        m = _CA.match(line)
        if m:
            flush()
            ca, ca_fields, port_fields = m.group("name"), {}, None
            continue
        p = _PORT.match(line)
        if p and ca is not None:
            flush()
            port_num, port_fields = int(p.group("num")), {}
            continue
        kv = _KV.match(line)
        if kv and ca is not None:
            target = port_fields if port_fields is not None else ca_fields
            target[kv.group("key")] = kv.group("value").strip()
    flush()
    if not ports and text.strip():
        raise ParseError("ibstat", "no \"CA '...'\" block with a port found")
    return ports


# Counters that must not rise on a healthy link, and whether a rise is a failure (vs a warning).
IB_ERROR_COUNTERS: dict[str, bool] = {
    "link_downed": True,
    "link_error_recovery": True,
    "symbol_error": False,
    "port_rcv_errors": False,
    "port_rcv_remote_physical_errors": False,
    "local_link_integrity_errors": True,
    "excessive_buffer_overrun_errors": False,
    "port_xmit_discards": False,
}


# The widest error counter in IBA PortCounters is 16 bits (symbol_error, port_rcv_errors,
# port_xmit_discards...); they saturate at all ones rather than wrap.
MAX_ERROR_COUNTER = 0xFFFF


def parse_counters(text: str) -> dict[str, dict[str, int]]:
    """Lines "mlx5_0/1 symbol_error 12" (the collector's sysfs dump) -> {port: {counter: n}}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        # ASCII digits only: str.isdecimal() accepts Arabic-Indic digits, and int() reads them
        if len(parts) == 3 and re.fullmatch(r"[0-9]{1,30}", parts[2]):
            out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return out


def counter_deltas(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """Counters that rose between two reads: {port: {counter: increase}}.

    A counter that went down was reset (or wrapped) between the reads: not a rise. A reading
    above MAX_ERROR_COUNTER is not a count (a garbage or 64-bit all-ones read): ignored.
    """
    rising: dict[str, dict[str, int]] = {}
    for port, counters in after.items():
        for name, value in counters.items():
            prev = before.get(port, {}).get(name)
            if prev is None or max(prev, value) > MAX_ERROR_COUNTER:
                continue
            if value > prev:
                rising.setdefault(port, {})[name] = value - prev
    return rising


@dataclass
class Transceiver:
    """The module (transceiver/AOC) in one HCA port, from ``mlxlink -d DEV -m``."""

    device: str
    part_number: str | None
    serial: str | None
    firmware: str | None

    def label(self) -> str:
        """How a technician finds it."""
        return f"transceiver in {self.device} ({self.part_number or '?'} serial {self.serial or '?'})"


_MLX_KV = re.compile(r"^(?P<key>[A-Za-z][^:]*?)\s*:\s*(?P<value>.*?)\s*$")


def parse_transceivers(text: str) -> list[Transceiver]:
    """The collector's "== mlx5_N" + ``mlxlink -m`` blocks -> modules that report a part number."""
    out: list[Transceiver] = []
    device: str | None = None
    fields: dict[str, str] = {}

    def flush() -> None:
        if device and fields.get("Vendor Part Number"):
            out.append(Transceiver(device, fields.get("Vendor Part Number"),
                                   fields.get("Vendor Serial Number"), fields.get("FW Version")))

    for line in text.splitlines():
        if line.startswith("== "):
            flush()
            device, fields = line[3:].strip(), {}
            continue
        m = _MLX_KV.match(line.strip())
        if m and device:
            # Colours/escape codes are absent with a non-tty stdout; N/A means "not reported".
            value = m.group("value")
            if value and value != "N/A":
                fields.setdefault(m.group("key"), value)
    flush()
    return out
