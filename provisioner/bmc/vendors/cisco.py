"""Cisco UCS C-series Integrated Management Controller (CIMC)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, ClassVar

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import LOCATION_EMBEDDED, LOCATION_OCP, LOCATION_SLOT, NicPort
from provisioner.bmc.redfish_bmc import RedfishBMC

# CIMC names a host port "<PCIe device Id>.<port>": "L.1" the first port of the onboard LOM
# (PCIeDevices/L, an Intel I350 or X550), "MLOM.0" the first vNIC of the VIC in the modular
# LOM slot, "1.0" one of a card in PCIe slot 1.
_PORT_ID = re.compile(r"^(?P<device>L|MLOM|\d{1,2})\.\d{1,3}$", re.IGNORECASE)


def _where(device_id: str) -> tuple[str, str | None]:
    """(LOCATION_*, slot label) of a CIMC PCIe device Id."""
    if device_id.upper() == "L":
        return LOCATION_EMBEDDED, None
    if device_id.upper() == "MLOM":
        return LOCATION_OCP, "MLOM"
    return LOCATION_SLOT, f"PCIe slot {device_id}"


class CiscoBMC(RedfishBMC):
    """CIMC lists the host's ports in the System's EthernetInterfaces only, by Ids that name
    the PCIe device they belong to (``L.1``, ``MLOM.0``, ``1.0``) and with no Location: the
    device Id says where the port sits, and the chassis's PCIeDevices member of that Id what
    it is. The VIC's NetworkAdapter lists its FCoE vHBAs (``fc0``) beside its vNICs."""

    vendor: ClassVar[str] = "cisco"

    def annotate_ports(self, ports: list[NicPort]) -> list[NicPort]:
        named = [p for p in ports if p.location is None and _PORT_ID.match(p.id)]
        if not named:
            return ports
        devices = self._pcie_devices_by_id()
        out = []
        for port in ports:
            found = _PORT_ID.match(port.id) if port in named else None
            if found is None:
                out.append(port)
                continue
            device_id = found.group("device")
            location, label = _where(device_id)
            device = devices.get(device_id.upper())
            if device is not None:
                said = (f"port Id {port.id!r}: CIMC PCIe device {device.get('@odata.id')} "
                        f"{rp.text(device.get('Name')) or ''}".rstrip())
                vendor = port.vendor or " ".join(
                    t for t in (rp.text(device.get("Manufacturer")),
                                rp.text(device.get("Name"))) if t) or None
            else:
                said, vendor = f"port Id {port.id!r} (CIMC PCIe device {device_id})", port.vendor
            out.append(replace(port, location=location, location_from=said,
                               onboard=location != LOCATION_SLOT,
                               pcie_slot=port.pcie_slot or label, vendor=vendor))
        return out

    def _pcie_devices_by_id(self) -> dict[str, dict[str, Any]]:
        """The host chassis's PCIeDevices members by upper-case Id (a missing one warns)."""
        out: dict[str, dict[str, Any]] = {}
        for _path, chassis in self.host_chassis():
            link = rp.odata_id(chassis.get("PCIeDevices"))
            if not link:
                continue
            for device in self._each_member(link, "PCIeDevice"):
                ident = rp.text(device.get("Id"))
                if ident:
                    out.setdefault(ident.upper(), device)
        return out
