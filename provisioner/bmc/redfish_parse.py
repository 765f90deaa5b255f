"""Pure functions turning Redfish JSON (as real BMCs write it) into the facts of bmc.base.

Kept free of I/O so every recorded vendor mockup can be parsed in unit tests.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from provisioner.bmc.base import (
    LOCATION_EMBEDDED,
    LOCATION_OCP,
    LOCATION_SLOT,
    ONBOARD_LOCATIONS,
    Drive,
    NicPort,
)
from provisioner.macaddr import canonical_mac, parse_mac
from provisioner.macaddr import locally_administered as is_local

_ONBOARD_RE = re.compile(r"(embedded|integrated|onboard|lom)", re.IGNORECASE)
_SLOT_RE = re.compile(r"(slot|aoc|pcie)", re.IGNORECASE)
# Supermicro's OCP 3.0 slot is the "AIOM"; HPE's older one the "FlexibleLOM"; Dell's the
# network daughter card (rNDC/bNDC), as DMTF's mockups label it too; Cisco's the modular LOM
# ("MLOM", where its VIC sits).
_OCP_RE = re.compile(r"\bocp|flex(ible)?lom|mezz|\baiom|daughter ?card|\b[rb]ndc\b|\bmlom",
                     re.IGNORECASE)
_EMBEDDED_RE = re.compile(r"(embedded|integrated|on-?board|\blom\b|\.lom\.)", re.IGNORECASE)
_UEFI_MAC_RE = re.compile(r"MAC\(([0-9A-Fa-f]{12}),", re.IGNORECASE)
# Starting/Training and the like are transitions, not a state: they stay unknown.
_LINK_UP = {"linkup": True, "up": True, "nolink": False, "linkdown": False, "down": False}
# PCIeSlot SlotType values (PCIeDevice schema) that name an OCP/mezzanine slot.
_OCP_SLOT_TYPES = {"ocp3small", "ocp3large", "mezzanine"}


def norm_mac(value: Any) -> str | None:
    """A MAC as lower-case colon-separated text (provisioner.macaddr), or None when ``value``
    is not a MAC; the all-zero MAC BMCs write for "none" is none."""
    text = canonical_mac(value)
    return None if text == "00:00:00:00:00:00" else text


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a BMC may send anything)."""
    return value if isinstance(value, dict) else {}


def text(value: Any) -> str | None:
    """A scalar property as text: None for a missing or empty value, and for a list, object
    or boolean where a string belongs; control characters (a NUL in a serial) dropped."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    cleaned = "".join(ch for ch in str(value) if ch.isprintable()).strip()
    return cleaned or None


def action(resource: dict[str, Any], name: str) -> dict[str, Any]:
    """The ``Actions[name]`` object of a resource (``#ComputerSystem.Reset``); empty when the
    BMC offers none, or sends something else there."""
    return obj(obj(resource.get("Actions")).get(name))


def items(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


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


def location_from_text(*texts: str | None) -> str | None:
    """A LOCATION_* from a location label ("OCP 3.0 Slot 10", "OnBoard", "NIC.LOM.1.1",
    "PCI-E Slot 1"): OCP before LOM before slot."""
    joined = " ".join(t for t in texts if t)
    if not joined:
        return None
    if _OCP_RE.search(joined):
        return LOCATION_OCP
    if _EMBEDDED_RE.search(joined):
        return LOCATION_EMBEDDED
    if _SLOT_RE.search(joined):
        return LOCATION_SLOT
    return None


def location_from_name(*texts: str | None) -> str | None:
    """A LOCATION_* from a product name: only the form factor it names (OCP, LOM).

    Names are not labels: "integrated BMC, 32GB on-board DDR" describes a DPU card's features.
    """
    joined = " ".join(t for t in texts if t)
    if _OCP_RE.search(joined):
        return LOCATION_OCP
    if re.search(r"\bLOM\b", joined):
        return LOCATION_EMBEDDED
    return None


def part_location(resource: dict[str, Any], where: str) -> tuple[str, str, str | None] | None:
    """(location, what said so, slot label) from a resource's Location (Redfish Resource.Location).

    ``LocationType: Embedded`` is on the board; ``Slot`` is an add-in card unless its label
    names an OCP/mezzanine or "OnBoard" position (Lenovo labels onboard devices that way).
    """
    loc = resource.get("Location")
    if not isinstance(loc, dict):
        return None
    raw = loc.get("PartLocation")
    part: dict[str, Any] = raw if isinstance(raw, dict) else {}
    kind = str(part.get("LocationType") or "")
    label = _clean(part.get("ServiceLabel")) or _clean(loc.get("Info"))
    said = f"{where} Location {kind or 'Info'}" + (f" {label!r}" if label else "")
    text_loc = location_from_text(label)
    if kind.lower() == "embedded":
        return LOCATION_EMBEDDED, said, label
    if text_loc in ONBOARD_LOCATIONS:
        return text_loc, said, label
    if kind.lower() in {"slot", "bay", "connector"}:
        return LOCATION_SLOT, said, label
    if text_loc:
        return text_loc, said, label
    return None


def slot_location(slot: dict[str, Any], where: str) -> tuple[str, str, str | None] | None:
    """(location, what said so, label) from a PCIeSlots entry or a PCIeDevice's Slot."""
    slot_type = str(slot.get("SlotType") or "")
    if slot_type.lower() in _OCP_SLOT_TYPES:
        label = None
        if isinstance(slot.get("Location"), dict):
            label = _clean(obj(slot["Location"].get("PartLocation")).get("ServiceLabel"))
        return LOCATION_OCP, f"{where} SlotType {slot_type}", label
    return part_location(slot, where)


def device_location(device: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """Where a PCIeDevice sits: its Slot, else its name/model ("... OCP Ethernet Adapter")."""
    where = str(device.get("@odata.id") or "PCIeDevice")
    slot = device.get("Slot")
    found = slot_location(slot, f"{where} Slot") if isinstance(slot, dict) else None
    named = location_from_name(_clean(device.get("Name")), _clean(device.get("Model")))
    if named in ONBOARD_LOCATIONS and (found is None or found[0] == LOCATION_SLOT):
        label = found[2] if found else None
        return named, f"{where} Name {device.get('Name')!r}", label
    return found


def boot_option_entry(option: dict[str, Any]) -> tuple[str, str, bool] | None:
    """(mac, "Boot0003 UEFI PXEv4 ...", over USB) of a BootOption whose device path names a MAC."""
    path = option.get("UefiDevicePath")
    if not isinstance(path, str):
        return None
    found = _UEFI_MAC_RE.search(path)
    if not found:
        return None
    mac = norm_mac(":".join(found.group(1)[i:i + 2] for i in range(0, 12, 2)))
    if not mac:
        return None
    ref = _clean(option.get("BootOptionReference")) or _clean(option.get("Id")) or "?"
    label = _clean(option.get("DisplayName")) or _clean(option.get("Name")) or ""
    if "/Uri(" in path:
        label = label if "http" in label.lower() else f"{label} (HTTP)".strip()
    return mac, f"{ref} {label}".strip(), "/USB(" in path.upper()


def with_location(port: NicPort, found: tuple[str, str, str | None] | None) -> NicPort:
    """The port with a location fact (kept if it already has one); onboard follows from it."""
    if found is None or port.location is not None:
        return port
    location, said, label = found
    onboard = port.onboard
    if location in ONBOARD_LOCATIONS:
        onboard = True
    elif onboard is None:
        onboard = False
    return replace(port, location=location, location_from=said, onboard=onboard,
                   pcie_slot=port.pcie_slot or label)


def complete(port: NicPort, extra: NicPort) -> NicPort:
    """``port`` with every fact it lacks taken from ``extra`` (another view of the same MAC)."""
    changes: dict[str, Any] = {}
    for f in fields(NicPort):
        if f.name in {"id", "mac", "source"}:
            continue
        mine, theirs = getattr(port, f.name), getattr(extra, f.name)
        if mine in (None, ()) and theirs not in (None, ()):
            changes[f.name] = theirs
    if port.link_up is False and extra.link_up is True:
        changes["link_up"] = True  # one view says up: believe the port is cabled and lit
    if port.excluded is None or extra.excluded is None:
        # Any view of the MAC as an Ethernet function makes it one: an FCoE function sharing
        # the MAC does not take the port out of the candidates.
        changes["excluded"] = None
    if port.location is None and extra.location is not None:
        # Vendor port naming that says onboard (Dell NIC.Integrated, Cisco MLOM) is kept, as
        # in with_location; otherwise the location decides.
        changes["onboard"] = True if port.onboard else extra.onboard
    return replace(port, **changes) if changes else port


def locally_administered(mac: str) -> bool:
    """Whether a MAC is locally administered, as the MACs a BMC makes up for its USB host
    interface are."""
    parsed = parse_mac(mac)
    return parsed is not None and is_local(parsed)


# NetworkDeviceFunction NetDevFuncType values of storage functions: they carry a MAC (FCoE)
# but no firmware network-boots through them.
_STORAGE_FUNCTIONS = {"fibrechannel": "a Fibre Channel function (a storage HBA)",
                      "fibrechanneloverethernet": "a Fibre Channel over Ethernet function "
                                                  "(a storage HBA)"}


def storage_function(function: dict[str, Any]) -> str | None:
    """Why a network device function is storage, not a network port (FC, FCoE); else None."""
    kind = function.get("NetDevFuncType")
    return _STORAGE_FUNCTIONS.get(kind.lower()) if isinstance(kind, str) else None


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
    eth = obj(function.get("Ethernet"))
    mac = norm_mac(eth.get("PermanentMACAddress")) or norm_mac(eth.get("MACAddress"))
    if not mac and port:
        addrs = items(port.get("AssociatedNetworkAddresses"))
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
        excluded=storage_function(function),
        # NetworkDeviceFunction.BootMode: the function's option ROM boots PXE.
        boot_options=("NetworkDeviceFunction BootMode PXE",)
        if str(function.get("BootMode") or "").upper() == "PXE" else (),
    )


def function_port_links(function: dict[str, Any]) -> list[str]:
    """Every physical port a device function names, in the order the schema versions prefer.

    Schemas before NetworkAdapter 1.x name a ``NetworkPorts`` member, later ones a ``Ports``
    member; XCC fills both, so each is tried against the ports actually read.
    """
    links = obj(function.get("Links"))
    candidates = [
        odata_id(links.get("PhysicalPortAssignment")),
        odata_id(function.get("PhysicalPortAssignment")),
        odata_id(links.get("PhysicalNetworkPortAssignment")),
        *link_list(function.get("AssignablePhysicalPorts")),
        *link_list(function.get("AssignablePhysicalNetworkPorts")),
        *link_list(links.get("Ports")),
    ]
    out: list[str] = []
    for candidate in candidates:
        if candidate and candidate.rstrip("/") not in out:
            out.append(candidate.rstrip("/"))
    return out


def best_port(views: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Of the Port and NetworkPort a function names (XCC lists both, one may be stale), the
    one saying link up, else one with any link state, else the first."""
    for wanted in (True, False):
        for view in views:
            if _link_state(view.get("LinkStatus")) is wanted:
                return view
    return views[0] if views else None


def function_port_link(function: dict[str, Any]) -> str | None:
    """The first physical port a device function is assigned to."""
    links = function_port_links(function)
    return links[0] if links else None


def pcie_device_of(function: dict[str, Any]) -> str | None:
    """The PCIeDevice a NetworkDeviceFunction's ``Links.PCIeFunction`` belongs to.

    The PCIeFunction URI is ``.../PCIeDevices/<device>/PCIeFunctions/<function>`` by the
    Redfish URI rules, so the device is named without another request.
    """
    link = odata_id(obj(function.get("Links")).get("PCIeFunction"))
    if not link or "/PCIeFunctions/" not in link:
        return None
    return link.split("/PCIeFunctions/", 1)[0]


def location_from_id(port: NicPort) -> NicPort:
    """A port whose location no Redfish property gave: what its Id says (Dell
    NIC.Embedded/Integrated/Mezzanine/Slot, Cisco MLOM), else its name (Supermicro
    "OnBoard LAN 1")."""
    if port.location is not None:
        return port
    found, said = location_from_text(port.id), f"port Id {port.id!r}"
    if found is None and port.name:
        found, said = location_from_text(port.name), f"port name {port.name!r}"
    if found is None:
        return port
    onboard = port.onboard if port.onboard is not None else found in ONBOARD_LOCATIONS
    return replace(port, location=found, location_from=said, onboard=onboard)


def merge_nics(primary: list[NicPort], secondary: list[NicPort]) -> list[NicPort]:
    """Ports from EthernetInterfaces, completed by NetworkAdapters data for the same MAC."""
    by_mac: dict[str, NicPort] = {}
    for port in secondary:
        by_mac[port.mac] = complete(by_mac[port.mac], port) if port.mac in by_mac else port
    out: list[NicPort] = []
    seen: set[str] = set()
    for port in primary:
        if port.mac in seen:
            continue
        seen.add(port.mac)
        extra = by_mac.get(port.mac)
        out.append(complete(port, extra) if extra else port)
    for port in secondary:
        if port.mac not in seen:
            seen.add(port.mac)
            out.append(by_mac[port.mac])
    return out


def unique_ids(ports: list[NicPort]) -> list[NicPort]:
    """Ports whose Id another port shares get their adapter's Id in front ("slot3/1"): many
    BMCs number device functions per adapter, and a rule's port_id must name one port. Where
    adapters of two chassis share an Id too, the chassis Id goes in front ("riser/slot3/1")."""
    out = ports
    for pattern in (r"/NetworkAdapters/([^/]+)/NetworkDeviceFunctions/",
                    r"/Chassis/([^/]+)/NetworkAdapters/"):
        counts: dict[str, int] = {}
        for port in out:
            counts[port.id] = counts.get(port.id, 0) + 1
        renamed = []
        for port in out:
            found = re.search(pattern, port.source)
            if counts[port.id] > 1 and found:
                port = replace(port, id=f"{found.group(1)}/{port.id}")
            renamed.append(port)
        out = renamed
    return out


def parse_drive(drive: dict[str, Any]) -> Drive:
    """A Redfish Drive resource."""
    wwn = None
    for ident in items(drive.get("Identifiers")):
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
    for index, dev in enumerate(items(simple.get("Devices"))):
        if not isinstance(dev, dict):
            continue
        state = str(obj(dev.get("Status")).get("State") or "Enabled")
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
    for param in items(info.get("Parameters")):
        if isinstance(param, dict) and param.get("Name") == "ResetType":
            values = param.get("AllowableValues")
            if isinstance(values, list):
                return [str(v) for v in values]
    return None
