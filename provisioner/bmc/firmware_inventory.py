"""Reading a host's firmware components over Redfish (UpdateService.FirmwareInventory)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.errors import BMCUnsupported

# What BMCs print as the version of a component that is not installed: Supermicro's backup
# images ("Not Present"), XCC's empty pending slot ("-*"), empty slots.
ABSENT = {"not present", "n/a", "na", "none", "unknown"}


def _absent(version: str) -> bool:
    text = version.strip().lower()
    return text in ABSENT or not any(ch.isalnum() for ch in text)


@dataclass(frozen=True)
class FirmwareComponent:
    """One installed firmware component."""

    id: str
    name: str
    version: str
    updateable: bool | None = None
    path: str = ""


def read_components(bmc: RedfishBMC) -> list[FirmwareComponent]:
    """Every installed component the BMC lists; raises when it publishes no inventory."""
    update = bmc.client.service("UpdateService")
    inventory = rp.odata_id(bmc.client.get(update).get("FirmwareInventory")) if update else None
    if not inventory:
        raise BMCUnsupported("the BMC publishes no UpdateService.FirmwareInventory: firmware "
                             "versions cannot be read over Redfish", bmc=bmc.name, path="/redfish/v1")
    out = []
    for item in bmc.client.members(inventory):
        component = parse_component(item)
        if component is not None:
            out.append(component)
    return out


def parse_component(item: dict[str, Any]) -> FirmwareComponent | None:
    """A FirmwareInventory member; None for one without a version, or one that is not what
    runs (Dell lists the image it would roll back to as ``Previous-...``)."""
    version = item.get("Version")
    ident = str(item.get("Id") or "")
    if not isinstance(version, str) or _absent(version) or ident.startswith("Previous"):
        return None
    updateable = item.get("Updateable")
    return FirmwareComponent(
        id=ident,
        name=str(item.get("Name") or ident),
        version=version.strip(),
        updateable=updateable if isinstance(updateable, bool) else None,
        path=rp.odata_id(item) or "",
    )
