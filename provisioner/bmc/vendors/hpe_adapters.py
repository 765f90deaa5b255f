"""HPE iLO's OEM adapter inventory (``Systems/1/BaseNetworkAdapters``) as port facts.

iLO 5 lists every NIC there with its position (``StructuredName`` "OCP.Slot.10.1",
"NIC.LOM.1.1", "NIC.Slot.1.1"; ``Location`` "OCP 3.0 Slot 10") and its ports' MACs, none of
which the DMTF EthernetInterfaces of iLO carry.
"""

from __future__ import annotations

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
