"""Supermicro BMCs (X12/X13, HGX H100 systems)."""

from __future__ import annotations

from typing import ClassVar

from provisioner.bmc.base import BootTarget
from provisioner.bmc.firmware_methods import FirmwareQuirks
from provisioner.bmc.redfish_bmc import RedfishBMC


class SupermicroBMC(RedfishBMC):
    """Supermicro needs UEFI mode sent explicitly and ignores one-time overrides.

    A one-time override is therefore set as Continuous: the deploy workflow sets the disk
    persistently after the install (``set_boot(DISK, persistent=True)``), which undoes it.
    """

    vendor: ClassVar[str] = "supermicro"
    # Firmware is pushed (multipart) rather than fetched: only the push carries the options
    # that keep the BMC's configuration (network, users, SDR, TLS certificate) and the BIOS's
    # NVRAM/ME/SMBIOS across the flash. The BMC and BIOS are named by their Manager and
    # Bios resources there, other components by their FirmwareInventory member; Immediate is
    # taken without being listed.
    firmware_quirks: ClassVar[FirmwareQuirks] = FirmwareQuirks(
        prefer_push=True, multipart_apply_times=("Immediate",),
        multipart_targets={"bmc": "/redfish/v1/Managers/1", "bios": "/redfish/v1/Systems/1/Bios"},
        multipart_params={
            "bmc": {"Oem": {"Supermicro": {"BMC": {
                "PreserveCfg": True, "PreserveSdr": True, "PreserveSsl": True,
                "BackupBMC": True}}}},
            "bios": {"Oem": {"Supermicro": {"BIOS": {
                "PreserveME": True, "PreserveNVRAM": True, "PreserveSMBIOS": True,
                "BackupBIOS": False}}}}})

    def override_enabled(self, persistent: bool) -> str:
        if not persistent:
            self.warnings.append(
                "Supermicro ignores one-time boot overrides: set Continuous; set the disk "
                "persistently after the install"
            )
        return "Continuous"

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        return "UEFI"
