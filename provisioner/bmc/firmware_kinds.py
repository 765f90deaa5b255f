"""What kind of component a FirmwareInventory member is, which decides the order of a host's
updates and the reset each needs: the BMC first (it reboots itself), the BIOS (a host reset),
other devices, NIC/HCA/DPU firmware last (activated by the host reset). Redfish says it first
(``RelatedItem``: a Manager, a System's Bios, a NetworkAdapter...); vendors' own markers only
where the standard is silent; the member's name last. Also which host system of a BMC that
serves several a member belongs to. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from provisioner.bmc import redfish_parse as rp


class Kind(IntEnum):
    """A component's kind, in update order."""

    BMC = 0
    BIOS = 1
    DEVICE = 2
    NIC = 3


@dataclass(frozen=True)
class KindOf:
    """A component's kind and what said so."""

    kind: Kind
    why: str


# RelatedItem links (DMTF resource paths), most specific first.
_LINKS: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (re.compile(r"/Managers/[^/]+/?$"), Kind.BMC),
    (re.compile(r"/Bios/?$"), Kind.BIOS),
    (re.compile(r"/(NetworkAdapters|NetworkInterfaces|NetworkDeviceFunctions)(/|$)"),
     Kind.NIC),
)
_SYSTEM = re.compile(r"/Systems/([^/]+)/?$")
_UNDER_SYSTEM = re.compile(r"/Systems/([^/]+)(/|$)")

# HPE iLO's Oem.Hpe.DeviceClass (a UEFI device-class GUID) where iLO gives no RelatedItem.
_HPE_CLASSES = {"2f317b9d-c9e3-4d76-bff6-b9d0d085a952": Kind.BMC,  # iLO
                "aa148d2e-6e09-453e-bc6f-63baa5f5ccc4": Kind.BIOS}  # System ROM
# AMI-based BMCs (NVIDIA DGX): Oem.Ami.DeviceClass.
_AMI_CLASSES = {"bmc": Kind.BMC, "bios": Kind.BIOS}

_NAME_BMC = re.compile(r"\b(bmc|idrac|ilo|xcc|imm2?|cimc)\b|remote access controller|"
                       r"baseboard management", re.I)
_NAME_BIOS = re.compile(r"\bbios\b|system rom|\buefi\b", re.I)
_NAME_NIC = re.compile(r"\bnic\b|infiniband|connectx|ethernet|network adapter|bluefield|"
                       r"\bhca\b|\beth adptr\b", re.I)
# Vendors' member names where the standard says nothing: Supermicro NIC1..NICn (linked
# only to a PCIeDevice), NVIDIA's CX7_n/NIC_n (GB200) and DPU_NIC (BlueField).
_VENDOR_NIC = {"supermicro": re.compile(r"NIC\d+"),
               "nvidia": re.compile(r"(CX\d+|NIC)_\d+|DPU_NIC")}
# NVIDIA HGX baseboard members are devices of the host, even the HGX's own BMC; a root of
# trust (ERoT) guarding the BMC or BIOS is a device of its own.
_HGX = re.compile(r"HGX_", re.I)
_EROT = re.compile(r"(^|[_\s])erot([_\s]|$)", re.I)


def related(item: Mapping[str, Any]) -> tuple[str, ...]:
    """A member's ``RelatedItem`` links."""
    links = item.get("RelatedItem")
    if not isinstance(links, list):
        return ()
    return tuple(link for link in (rp.odata_id(x) for x in links) if link)


def classify(item: Mapping[str, Any], vendor: str = "generic") -> KindOf:
    """The kind of one FirmwareInventory member, and why."""
    ident = str(item.get("Id") or "")
    name = str(item.get("Name") or ident)
    links = related(item)
    found = [(kind, link) for link in links for pattern, kind in _LINKS
             if pattern.search(link)]
    if found:
        kind, link = max(found, key=lambda f: (f[0] is Kind.NIC, f[0] is Kind.BMC))
        return KindOf(kind, f"RelatedItem {link}")
    oem = rp.obj(item.get("Oem"))
    hpe = str(rp.obj(oem.get("Hpe")).get("DeviceClass") or "").lower()
    if hpe in _HPE_CLASSES:
        return KindOf(_HPE_CLASSES[hpe], f"Oem.Hpe.DeviceClass {hpe}")
    ami = str(rp.obj(oem.get("Ami")).get("DeviceClass") or "")
    if ami.lower() in _AMI_CLASSES:
        return KindOf(_AMI_CLASSES[ami.lower()], f"Oem.Ami.DeviceClass {ami}")
    pattern = _VENDOR_NIC.get(vendor)
    if pattern is not None and pattern.fullmatch(ident):
        return KindOf(Kind.NIC, f"{vendor} names its NIC members {pattern.pattern}")
    system = next((m for link in links if (m := _SYSTEM.search(link))), None)
    text = f"{ident} {name}".replace(".", " ").replace("_", " ")
    if _HGX.match(ident):
        return KindOf(Kind.DEVICE, "an HGX baseboard member")
    if _EROT.search(ident) or _EROT.search(name):
        return KindOf(Kind.DEVICE, "a root of trust (ERoT)")
    for regex, kind in ((_NAME_BMC, Kind.BMC), (_NAME_BIOS, Kind.BIOS), (_NAME_NIC, Kind.NIC)):
        if regex.search(text) and not (kind is Kind.BMC and system):
            return KindOf(kind, f"its name {name!r}")
    if system:
        return KindOf(Kind.DEVICE, f"RelatedItem {system.group(0)}")
    return KindOf(Kind.DEVICE, "no marker: a device")


def owner(ident: str, name: str, links: Sequence[str], systems: Sequence[str]) -> str | None:
    """Which of a BMC's host systems (their Ids) a member belongs to: one its RelatedItem
    points into, else one whose Id prefixes the member's (HPE Cray ``Node0.BIOS``); None for
    a member of the BMC or chassis that every system on it shares."""
    for link in links:
        found = _UNDER_SYSTEM.search(link)
        if found and found.group(1) in systems:
            return found.group(1)
    for system in systems:
        for text in (ident, name):
            if re.match(re.escape(system) + r"[._\-:]", text, re.I):
                return system
    return None
