"""Where HPE iLO says a port sits, in its OEM data, as port facts.

iLO 5 lists every NIC in ``Systems/1/BaseNetworkAdapters`` with its position
(``StructuredName`` "OCP.Slot.10.1", "NIC.LOM.1.1", "NIC.Slot.1.1"; ``Location`` "OCP 3.0
Slot 10") and its ports' MACs, none of which the DMTF EthernetInterfaces of iLO carry.
iLO 6 and 7 dropped that resource and give no NetworkAdapter a Location; what remains is the
name iLO gives each UEFI network boot entry: "<position> Port <n> : <product> (PXE IPv4)".
"""

from __future__ import annotations

import re
from typing import Any

from provisioner.bmc import redfish_parse as rp


def adapter_locations(adapter: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    """MAC -> (location, what said so, slot label) for one BaseNetworkAdapter."""
    structured = str(adapter.get("StructuredName") or "")
    label = str(adapter.get("Location") or "") or None
    found = rp.location_from_text(structured or None, label)
    if found is None:
        return {}
    where = f"{adapter.get('@odata.id')} StructuredName {structured!r}"
    out: dict[str, tuple[str, str, str | None]] = {}
    for port in rp.items(adapter.get("PhysicalPorts")):
        if isinstance(port, dict):
            mac = rp.norm_mac(port.get("MacAddress"))
            if mac:
                out[mac] = (found, where, label)
    return out


def port_link(adapter: dict[str, Any]) -> dict[str, bool]:
    """MAC -> link up/down where iLO reports it (``LinkStatus`` is null on many ports)."""
    out: dict[str, bool] = {}
    for port in rp.items(adapter.get("PhysicalPorts")):
        if isinstance(port, dict):
            mac = rp.norm_mac(port.get("MacAddress"))
            state = str(port.get("LinkStatus") or "").replace(" ", "").lower()
            if mac and state in {"linkup", "up"}:
                out[mac] = True
            elif mac and state in {"linkdown", "nolink", "down"}:
                out[mac] = False
    return out


# "Slot 2 Port 1 : ...", "OCP Slot 10 Port 1 : ...", "Embedded LOM 1 Port 1 : ..."
_BOOT_ENTRY_RE = re.compile(r"^\s*(?P<where>\S.*?)\s+Port\s+\d+\s*:")


def boot_entry_locations(options: list[dict[str, Any]]
                         ) -> dict[str, tuple[str, str, str | None]]:
    """MAC -> (location, what said so, slot label) from iLO's names of network boot entries."""
    out: dict[str, tuple[str, str, str | None]] = {}
    for option in options:
        entry = rp.boot_option_entry(option)
        found = _BOOT_ENTRY_RE.match(str(option.get("DisplayName") or ""))
        if entry is None or found is None or entry[0] in out:
            continue
        where = found.group("where")
        location = rp.location_from_text(where)
        if location is not None:
            said = f"{option.get('@odata.id')} DisplayName {where!r} (iLO boot entry)"
            out[entry[0]] = (location, said, where)
    return out
