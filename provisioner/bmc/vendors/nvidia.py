"""NVIDIA DGX/HGX BMCs (OpenBMC/AMI based), which list the GPU baseboard as a second System."""

from __future__ import annotations

from typing import ClassVar

from provisioner.bmc.base import BootTarget
from provisioner.bmc.redfish_bmc import RedfishBMC


class NvidiaBMC(RedfishBMC):
    """The host is the System that is not an ``HGX_*`` baseboard; its ConnectX ports live
    under Chassis NetworkAdapters, and the override must name UEFI mode."""

    vendor: ClassVar[str] = "nvidia"
    always_read_network_adapters: ClassVar[bool] = True

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        return "UEFI"
