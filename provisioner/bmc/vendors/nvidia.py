"""NVIDIA DGX/HGX/GB200 and BlueField BMCs (OpenBMC/AMI based)."""

from __future__ import annotations

from typing import Any, ClassVar

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import LOCATION_EMBEDDED, BootTarget
from provisioner.bmc.redfish_bmc import RedfishBMC


class NvidiaBMC(RedfishBMC):
    """The host is the System that is not an ``HGX_*`` baseboard; its ConnectX ports live
    under Chassis NetworkAdapters, and the override must name UEFI mode.

    The host firmware of these BMCs (DGX H100's AMI ``Systems/DGX/SD``; GH200, GB200 and
    BlueField's ``Systems/System_0/Settings``) takes the boot override from the System's
    settings object (``@Redfish.Settings``), as NVIDIA's own client writes it: it is PATCHed
    and read back there, with the ETag the AMI BMC demands.

    The DGX BMC lists the add-in positions in ``PCIeSlots`` with a ``Slot`` location and a
    service label ("PCIe Slot 2", "NIC 1, Slot 1" for the cluster ConnectX modules). The
    devices built into the motherboard tray (the X550 10GbE, the two in-band/storage
    ConnectX-7) are in an entry with neither location nor slot type, or in none: those are
    taken as onboard; the generic code leaves them unknown.
    """

    vendor: ClassVar[str] = "nvidia"

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        return "UEFI"

    def boot_settings_path(self, system: dict[str, Any]) -> str | None:
        return rp.odata_id(rp.obj(system.get("@Redfish.Settings")).get("SettingsObject"))

    def unlabelled_slot_location(self, slot: dict[str, Any] | None, device: str
                                 ) -> tuple[str, str, str | None] | None:
        if slot is not None and (slot.get("Location") or slot.get("SlotType")):
            return None
        why = ("in a PCIeSlots entry with no Location or SlotType" if slot is not None
               else "in no PCIeSlots entry")
        return LOCATION_EMBEDDED, f"{device} {why} (DGX motherboard tray)", None
