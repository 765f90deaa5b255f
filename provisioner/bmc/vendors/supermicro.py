"""Supermicro BMCs (X12/X13, HGX H100 systems)."""

from __future__ import annotations

from typing import ClassVar

from provisioner.bmc.base import BootTarget
from provisioner.bmc.redfish_bmc import RedfishBMC


class SupermicroBMC(RedfishBMC):
    """Supermicro needs UEFI mode sent explicitly and ignores one-time overrides.

    A one-time override is therefore set as Continuous: the deploy workflow sets the disk
    persistently after the install (``set_boot(DISK, persistent=True)``), which undoes it.
    """

    vendor: ClassVar[str] = "supermicro"

    def override_enabled(self, persistent: bool) -> str:
        if not persistent:
            self.warnings.append(
                "Supermicro ignores one-time boot overrides: set Continuous; set the disk "
                "persistently after the install"
            )
        return "Continuous"

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        return "UEFI"
