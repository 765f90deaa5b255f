"""HPE iLO 5/6."""

from __future__ import annotations

from typing import ClassVar

from provisioner.bmc.base import BootTarget
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.errors import BMCUnsupported


class HpeBMC(RedfishBMC):
    """iLO takes the boot mode from the BIOS BootMode attribute, not from the override.

    Sending BootSourceOverrideMode is refused there, so it is never sent; UEFI HTTP boot on a
    Legacy-mode host fails early with a clear message instead. PATCHes carry the ETag (If-Match)
    iLO hands out, which the generic code already does.
    """

    vendor: ClassVar[str] = "hpe"

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        if target == BootTarget.HTTP and current not in (None, "UEFI"):
            raise BMCUnsupported(
                f"UEFI HTTP boot needs UEFI mode but the host is in {current} mode",
                bmc=self.name,
                path=self.system_path(),
                hint="set the BIOS BootMode to Uefi (iLO: System Configuration > Boot Options)",
            )
        return None
