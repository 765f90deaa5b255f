"""Vendor differences in one place: each vendor's class, chosen from what the BMC says it is."""

from __future__ import annotations

from typing import Any

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.bmc.vendors.cisco import CiscoBMC
from provisioner.bmc.vendors.dell import DellBMC
from provisioner.bmc.vendors.hpe import HpeBMC
from provisioner.bmc.vendors.lenovo import LenovoBMC
from provisioner.bmc.vendors.nvidia import NvidiaBMC
from provisioner.bmc.vendors.supermicro import SupermicroBMC

VENDOR_CLASSES: dict[str, type[RedfishBMC]] = {
    "dell": DellBMC,
    "hpe": HpeBMC,
    "supermicro": SupermicroBMC,
    "lenovo": LenovoBMC,
    "nvidia": NvidiaBMC,
    "cisco": CiscoBMC,
    "generic": RedfishBMC,
}

# Substrings of Manufacturer / service root Vendor / Oem keys, lower-case.
_MARKERS: tuple[tuple[str, str], ...] = (
    ("dell", "dell"),
    ("hpe", "hpe"),
    ("hewlett", "hpe"),
    ("supermicro", "supermicro"),
    ("supmicro", "supermicro"),  # Supermicro's own Oem key is spelled "Supermicro"/"SMC"
    ("lenovo", "lenovo"),
    ("nvidia", "nvidia"),
    ("mellanox", "nvidia"),  # BlueField DPU BMCs say "https://www.mellanox.com"
    ("cisco", "cisco"),  # CIMC: "Cisco Systems Inc"
)


def detect_vendor(root: dict[str, Any], system: dict[str, Any]) -> str | None:
    """The vendor key for a BMC from the System's Manufacturer, then the service root."""
    texts = [
        rp.text(system.get("Manufacturer")) or "",
        rp.text(root.get("Vendor")) or "",
        " ".join(_keys(root.get("Oem"))),
        " ".join(_keys(system.get("Oem"))),
    ]
    for text in texts:
        low = text.lower()
        if not low:
            continue
        for marker, vendor in _MARKERS:
            if marker in low:
                return vendor
        if low.startswith("hp"):
            return "hpe"
    return None


def _keys(oem: Any) -> list[str]:
    """The keys of an ``Oem`` object (a BMC may send a list or string there)."""
    return [str(key) for key in oem] if isinstance(oem, dict) else []


def vendor_class(vendor: str | None) -> type[RedfishBMC]:
    """The implementation for a vendor key; the generic one for unknown or missing keys."""
    return VENDOR_CLASSES.get((vendor or "generic").lower(), RedfishBMC)
