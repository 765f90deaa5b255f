"""Parse ``lspci -D -nn -vvv`` into the ACS state of each PCI function."""

from __future__ import annotations

import re
from typing import Any

# "0000:17:01.0 PCI bridge [0604]: Broadcom ..." (-D -nn) or "17:01.0 PCI bridge: ..." (plain).
_HEADER = re.compile(
    r"^(?P<address>(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s+"
    r"(?P<class_name>[^:\[]+?)(?:\s+\[(?P<class_id>[0-9a-f]{4})\])?:\s+(?P<description>.*)$"
)
_FLAG = re.compile(r"(\w+)([+-])")


def _flags(text: str) -> dict[str, bool]:
    return {name: sign == "+" for name, sign in _FLAG.findall(text)}


def acs_devices(lspci_output: str, exclude: list[str] | None = None) -> list[dict[str, Any]]:
    """One dict per function that has an ACS capability: its ACSCtl flags, bridge, excluded."""
    excluded = {address.lower() for address in exclude or []}
    devices: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in lspci_output.splitlines():
        header = _HEADER.match(line)
        if header:
            address = header["address"]
            if len(address) == 7:  # lspci without -D omits domain 0000
                address = f"0000:{address}"
            class_id = header["class_id"]
            is_bridge = class_id == "0604" if class_id else header["class_name"] == "PCI bridge"
            current = {
                "address": address,
                "description": header["description"].strip(),
                "bridge": is_bridge,
                "excluded": address in excluded,
            }
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("ACSCap:"):
            current["acs_cap"] = _flags(stripped[len("ACSCap:") :])
        elif stripped.startswith("ACSCtl:"):
            ctl = _flags(stripped[len("ACSCtl:") :])
            current["acs_ctl"] = ctl
            current["acs_enabled"] = sorted(name for name, on in ctl.items() if on)
            devices.append(current)
    return devices


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {"acs_devices": acs_devices}
