"""Parse the firmware reports of NVIDIA's MFT tools (``mlxfwmanager --query``, ``flint query``)."""

from __future__ import annotations

import re
from typing import Any

_KEY_VALUE = re.compile(r"^\s*([A-Za-z][A-Za-z ./()-]*?):\s+(.*?)\s*$")
_VERSION_ROW = re.compile(r"^\s+([A-Z][A-Za-z0-9_-]*)\s+(\S+)\s+(\S+)\s*$")


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def mlxfwmanager_devices(output: str) -> list[dict[str, Any]]:
    """One dict per ``Device #N:`` block: device_type, psid, pci_device_name, versions, status."""
    devices: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    in_versions = False
    for line in output.splitlines():
        if re.match(r"^Device #\d+:", line):
            current = {"versions": {}}
            devices.append(current)
            in_versions = False
            continue
        if current is None or not line.strip() or set(line.strip()) == {"-"}:
            continue
        if in_versions:
            row = _VERSION_ROW.match(line)
            if row and ":" not in line:
                current["versions"][row[1]] = {
                    "current": row[2],
                    "available": None if row[3] == "N/A" else row[3],
                }
                continue
            in_versions = False
        kv = _KEY_VALUE.match(line)
        if kv:
            key = _key(kv[1])
            if key == "versions":
                in_versions = True
            else:
                current[key] = kv[2]
    for device in devices:
        device["fw_version"] = device["versions"].get("FW", {}).get("current")
    return devices


def flint_query(output: str) -> dict[str, str]:
    """The ``Key: value`` lines of ``flint ... query`` (fw_version, psid, image_type...)."""
    fields: dict[str, str] = {}
    for line in output.splitlines():
        kv = _KEY_VALUE.match(line)
        if kv and not line.startswith((" ", "\t")):
            fields[_key(kv[1])] = kv[2]
    return fields


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {"mlxfwmanager_devices": mlxfwmanager_devices, "flint_query": flint_query}
