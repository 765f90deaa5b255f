"""NVIDIA DGX/HGX/GB200 and BlueField BMCs (OpenBMC/AMI based)."""

from __future__ import annotations

from typing import Any, ClassVar

from provisioner.bmc.base import LOCATION_EMBEDDED, BootTarget
from provisioner.bmc.redfish_bmc import RedfishBMC


class NvidiaBMC(RedfishBMC):
    """The host is the System that is not an ``HGX_*`` baseboard; its ConnectX ports live
    under Chassis NetworkAdapters, and the override must name UEFI mode.

    The DGX BMC lists every PCIe device in ``PCIeSlots``: add-in cards with a ``Slot``
    location and a service label ("PCIe Slot 2"), devices soldered to the motherboard (the
    X550 10GbE LOM) in an entry with neither location nor slot type. That second kind is
    taken as embedded; the generic code leaves it unknown.
    """

    vendor: ClassVar[str] = "nvidia"

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        return "UEFI"

    def unlabelled_slot_location(self, slot: dict[str, Any], device: str
                                 ) -> tuple[str, str, str | None] | None:
        if slot.get("Location") or slot.get("SlotType"):
            return None
        return (LOCATION_EMBEDDED,
                f"PCIeSlots entry for {device} with no Location or SlotType (DGX motherboard)",
                None)
