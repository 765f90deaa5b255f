"""A host's installed firmware components as its BMC lists them (a FirmwareInventory member,
parsed). Reading them is the firmware-update capability's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.firmware_kinds import Kind, classify, owner, related

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
    kind: Kind = Kind.DEVICE  # its place in the update order
    kind_from: str = ""  # what said so (RelatedItem, a vendor's marker, its name)
    related: tuple[str, ...] = ()  # RelatedItem links


def parse_component(item: dict[str, Any], vendor: str = "generic") -> FirmwareComponent | None:
    """A FirmwareInventory member; None for one without a version, or one that is not what
    runs (Dell lists the image it would roll back to as ``Previous-...``). ``vendor`` (the
    BMC's) decides the markers read where Redfish says nothing of the kind."""
    version = item.get("Version")
    ident = str(item.get("Id") or "")
    if not isinstance(version, str) or _absent(version) or ident.startswith("Previous"):
        return None
    updateable = item.get("Updateable")
    kind = classify(item, vendor)
    return FirmwareComponent(
        id=ident,
        name=str(item.get("Name") or ident),
        version=version.strip(),
        updateable=updateable if isinstance(updateable, bool) else None,
        path=rp.odata_id(item) or "",
        kind=kind.kind,
        kind_from=kind.why,
        related=related(item),
    )


def scoped(have: Sequence[FirmwareComponent], system: str, systems: Sequence[str]
           ) -> tuple[list[FirmwareComponent], list[FirmwareComponent]]:
    """The components of this host's system, and those every node on its BMC shares; the
    other nodes' components are neither (a BMC serving one host shares nothing)."""
    if len(systems) < 2:
        return list(have), []
    own, shared = [], []
    for c in have:
        belongs = owner(c.id, c.name, c.related, systems)
        if belongs == system:
            own.append(c)
        elif belongs is None:
            shared.append(c)
    return own, shared
