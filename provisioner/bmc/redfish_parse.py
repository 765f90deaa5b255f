"""Pure functions turning Redfish JSON (as real BMCs write it) into the facts of bmc.base.

Kept free of I/O so every recorded vendor mockup can be parsed in unit tests.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from provisioner.bmc.base import Drive, NicPort

_MAC_RE = re.compile(r"^[0-9a-f]{2}([:-][0-9a-f]{2}){5}$", re.IGNORECASE)
_ONBOARD_RE = re.compile(r"(embedded|integrated|onboard|lom)", re.IGNORECASE)
_SLOT_RE = re.compile(r"(slot|aoc|pcie)", re.IGNORECASE)
_LINK_UP = {"linkup": True, "up": True, "nolink": False, "linkdown": False, "down": False}


def norm_mac(value: Any) -> str | None:
    """A MAC as lower-case colon-separated text, or None when ``value`` is not a MAC."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower().replace("-", ":")
    if not _MAC_RE.match(text) or text == "00:00:00:00:00:00":
        return None
    return text


def odata_id(value: Any) -> str | None:
    """The ``@odata.id`` of a link object, if any."""
    if isinstance(value, dict):
        link = value.get("@odata.id")
        return link if isinstance(link, str) else None
    return None


def link_list(value: Any) -> list[str]:
    """The ``@odata.id`` of each link in a list of link objects."""
    if not isinstance(value, list):
        return []
    return [link for link in (odata_id(v) for v in value) if link]


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None  # JSON allows 1e999 (inf)
    if isinstance(value, str):
        text = value.strip()
        # ASCII digits only ("²".isdigit() is True), and short: int() refuses 4,300+ digits
        if text.isascii() and text.isdigit() and len(text) <= 30:
            return int(text)
    return None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a BMC may send any type anywhere)."""
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def _link_state(value: Any) -> bool | None:
    if isinstance(value, str):
        return _LINK_UP.get(value.replace(" ", "").lower())
    return None


def onboard_from_id(*texts: str | None) -> bool | None:
    """Whether a port id/name says it is on the motherboard (Dell NIC.Embedded/Integrated...)."""
    joined = " ".join(t for t in texts if t)
    if not joined:
        return None
    if _ONBOARD_RE.search(joined):
        return True
    if _SLOT_RE.search(joined):
        return False
    return None


def is_host_interface(eth: dict[str, Any]) -> bool:
    """Interfaces between host and BMC (Redfish host interface) or virtual/VLAN ones."""
    ident = str(eth.get("Id") or "")
    if ident.lower() in {"tomanager", "hostinterface"} or "host interface" in str(
        eth.get("Name") or ""
    ).lower():
        return True
    return str(eth.get("EthernetInterfaceType") or "").lower() == "virtual"


def parse_ethernet_interface(eth: dict[str, Any]) -> NicPort | None:
    """One Systems/*/EthernetInterfaces member as a NicPort; None if it has no usable MAC."""
    if is_host_interface(eth):
        return None
    mac = norm_mac(eth.get("PermanentMACAddress")) or norm_mac(eth.get("MACAddress"))
    if not mac:
        return None
    ident = str(eth.get("Id") or mac)
    link_up = _link_state(eth.get("LinkStatus"))
    speed = _int(eth.get("SpeedMbps")) or None  # BMCs report 0 for "no link"
    name = eth.get("Name") if isinstance(eth.get("Name"), str) else None
    return NicPort(
        id=ident,
        mac=mac,
        name=name or None,
        link_up=link_up,
        speed_mbps=speed,
        source=odata_id(eth) or str(eth.get("@odata.id") or ""),
        onboard=onboard_from_id(ident, str(eth.get("Description") or "")),
    )


def is_infiniband(function: dict[str, Any], port: dict[str, Any] | None, adapter_id: str) -> bool:
    """Whether a network device function is an InfiniBand port (never a PXE candidate)."""
    if str(function.get("NetDevFuncType") or "").lower() == "infiniband":
        return True
    if port and str(port.get("ActiveLinkTechnology") or "").lower() == "infiniband":
        return True
    return adapter_id.lower().startswith("infiniband") or "infiniband" in str(
        function.get("Id") or ""
    ).lower()


def parse_device_function(
    function: dict[str, Any], port: dict[str, Any] | None, adapter_id: str
) -> NicPort | None:
    """A Chassis NetworkAdapters device function (+ its physical port) as a NicPort."""
    eth = _obj(function.get("Ethernet"))
    mac = norm_mac(eth.get("PermanentMACAddress")) or norm_mac(eth.get("MACAddress"))
    if not mac and port:
        addrs = _items(port.get("AssociatedNetworkAddresses"))
        mac = next((m for m in (norm_mac(a) for a in addrs) if m), None)
    if not mac:
        return None
    ident = str(function.get("Id") or mac)
    link_up: bool | None = None
    speed: int | None = None
    if port:
        link_up = _link_state(port.get("LinkStatus"))
        speed = _int(port.get("CurrentLinkSpeedMbps"))
        if speed is None:
            speed = _int(port.get("CurrentSpeedGbps"))
            speed = speed * 1000 if speed is not None else None
    return NicPort(
        id=ident,
        mac=mac,
        name=str(function.get("Name") or "") or None,
        link_up=link_up,
        speed_mbps=speed or None,
        source=odata_id(function) or "",
        onboard=onboard_from_id(adapter_id, ident),
    )


def function_port_link(function: dict[str, Any]) -> str | None:
    """The physical port a device function is assigned to, wherever the schema version puts it."""
    links = _obj(function.get("Links"))
    candidates = [
        odata_id(links.get("PhysicalPortAssignment")),
        odata_id(function.get("PhysicalPortAssignment")),
        odata_id(links.get("PhysicalNetworkPortAssignment")),
        *link_list(function.get("AssignablePhysicalPorts")),
        *link_list(links.get("Ports")),
    ]
    for candidate in candidates:
        if candidate:
            return candidate
    return None


def merge_nics(primary: list[NicPort], secondary: list[NicPort]) -> list[NicPort]:
    """Ports from EthernetInterfaces, completed by NetworkAdapters data for the same MAC."""
    by_mac = {p.mac: p for p in secondary}
    out: list[NicPort] = []
    seen: set[str] = set()
    for port in primary:
        if port.mac in seen:
            continue
        seen.add(port.mac)
        extra = by_mac.get(port.mac)
        if extra:
            port = NicPort(
                id=port.id,
                mac=port.mac,
                name=port.name or extra.name,
                link_up=port.link_up if port.link_up is not None else extra.link_up,
                speed_mbps=port.speed_mbps or extra.speed_mbps,
                source=port.source,
                onboard=port.onboard if port.onboard is not None else extra.onboard,
            )
        out.append(port)
    for port in secondary:
        if port.mac not in seen:
            seen.add(port.mac)
            out.append(port)
    return out


def parse_drive(drive: dict[str, Any]) -> Drive:
    """A Redfish Drive resource."""
    wwn = None
    for ident in _items(drive.get("Identifiers")):
        if isinstance(ident, dict) and ident.get("DurableName"):
            fmt = str(ident.get("DurableNameFormat") or "").upper()
            if fmt in {"NAA", "EUI", "NGUID", "WWN", "FC_WWN"} or wwn is None:
                wwn = str(ident["DurableName"])
    return Drive(
        id=str(drive.get("Id") or odata_id(drive) or ""),
        serial=_clean(drive.get("SerialNumber")),
        model=_clean(drive.get("Model")),
        size_bytes=_int(drive.get("CapacityBytes")),
        media=_clean(drive.get("MediaType")),
        protocol=_clean(drive.get("Protocol")),
        wwn=wwn,
    )


def parse_simple_storage(simple: dict[str, Any]) -> list[Drive]:
    """The Devices of a SimpleStorage resource (older BMCs, DMTF mockups)."""
    out = []
    sid = str(simple.get("Id") or "")
    for index, dev in enumerate(_items(simple.get("Devices"))):
        if not isinstance(dev, dict):
            continue
        state = str(_obj(dev.get("Status")).get("State") or "Enabled")
        if state == "Absent":
            continue
        out.append(
            Drive(
                id=f"{sid}/{dev.get('Name') or index}",
                model=_clean(dev.get("Model")),
                size_bytes=_int(dev.get("CapacityBytes")),
            )
        )
    return out


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def parse_datetime(value: Any) -> datetime | None:
    """A Manager DateTime (ISO 8601 with offset or Z) as an aware datetime."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)  # noqa: UP017 - explicit for readers
    return parsed


def clock_skew_s(
    bmc_time: datetime | None, local_before: datetime, local_after: datetime
) -> float | None:
    """BMC clock minus local clock, against the midpoint of the request (seconds, 1 s grain)."""
    if bmc_time is None:
        return None
    midpoint = local_before + (local_after - local_before) / 2
    return round((bmc_time - midpoint) / timedelta(seconds=1), 1)


def parse_firmware(item: dict[str, Any]) -> tuple[str, str] | None:
    """(name, version) of a FirmwareInventory member; None without a version."""
    version = _clean(item.get("Version"))
    if not version or str(item.get("Id") or "").startswith("Previous"):
        return None  # Dell lists the firmware it would roll back to as "Previous-..."
    name = _clean(item.get("Name")) or _clean(item.get("Id")) or "?"
    ident = _clean(item.get("Id"))
    # Several members often share a Name (one per NIC port or PSU): keep them apart.
    key = f"{name} [{ident}]" if ident and ident != name else name
    return key, version


def allowable_values(resource: dict[str, Any], prop: str) -> list[str] | None:
    """``prop@Redfish.AllowableValues`` of a resource, or None when the BMC does not say."""
    values = resource.get(f"{prop}@Redfish.AllowableValues")
    if isinstance(values, list):
        return [str(v) for v in values]
    return None


def reset_types_from_action_info(info: dict[str, Any]) -> list[str] | None:
    """ResetType allowable values from an ActionInfo resource (Supermicro, OpenBMC)."""
    for param in _items(info.get("Parameters")):
        if isinstance(param, dict) and param.get("Name") == "ResetType":
            values = param.get("AllowableValues")
            if isinstance(values, list):
                return [str(v) for v in values]
    return None
