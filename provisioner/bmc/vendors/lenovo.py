"""Lenovo XClarity Controller (XCC)."""

from __future__ import annotations

from typing import ClassVar

from provisioner.bmc.firmware_methods import FirmwareQuirks
from provisioner.bmc.redfish_bmc import RedfishBMC


class LenovoBMC(RedfishBMC):
    """XCC follows the DMTF schema for what we use; its virtual media lives under the Manager
    (``Managers/1/VirtualMedia/EXT1``) and older firmware lacks the InsertMedia action, both
    of which the generic code handles (manager media, PATCH fallback). Kept as its own class
    so the vendor shows in facts and quirks have one place to go."""

    vendor: ClassVar[str] = "lenovo"
    # XCC's SimpleUpdate lists only the backup XCC bank as a Target; every other package
    # (UXSP) names its component, so Targets are sent only for that listed one.
    # Its multipart push (/mfwupdate) takes Immediate without listing it.
    firmware_quirks: ClassVar[FirmwareQuirks] = FirmwareQuirks(
        targets_in_image=True, multipart_apply_times=("Immediate",))
