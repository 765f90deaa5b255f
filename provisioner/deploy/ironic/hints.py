"""The host's root-disk hint as Ironic ``properties/root_device`` hints, and the same match
over an inspection inventory's disks (so a hint that picks no disk, or two, fails early)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from provisioner.inventory.spec import RootDiskHint

GIB = 1024**3


def root_device(hint: RootDiskHint | None) -> dict[str, Any]:
    """Ironic root device hints (ironic.common.utils.VALID_ROOT_DEVICE_HINTS syntax).

    Our sizes are decimal GB (as disk vendors count), Ironic's ``size`` hint whole GiB: the
    range is widened to whole GiB, never narrowed. ``model`` is a substring, as in our other
    backends (``<in>``); serial, WWN and by-path are exact.
    """
    if hint is None:
        return {}
    out: dict[str, Any] = {}
    if hint.serial is not None:
        out["serial"] = f"s== {hint.serial}"
    if hint.wwn is not None:
        out["wwn"] = f"s== {_wwn(hint.wwn)}"
    if hint.by_path is not None:
        out["by_path"] = f"s== {hint.by_path}"
    if hint.model is not None:
        out["model"] = f"<in> {hint.model}"
    lo = math.floor(hint.size_gb_min * 1e9 / GIB) if hint.size_gb_min is not None else None
    hi = math.ceil(hint.size_gb_max * 1e9 / GIB) if hint.size_gb_max is not None else None
    if lo is not None and hi is not None:
        out["size"] = f"<range-in> [ {max(lo, 1)} {hi} ]"
    elif lo is not None:
        out["size"] = f">= {max(lo, 1)}"
    elif hi is not None:
        out["size"] = f"<= {hi}"
    return out


def _wwn(value: str) -> str:
    v = value.strip().lower()
    for prefix in ("wwn-", "naa."):
        if v.startswith(prefix):
            v = v[len(prefix):]
    return v if v.startswith("0x") else f"0x{v}"


def matching_disks(disks: Sequence[Mapping[str, Any]], hint: RootDiskHint) -> list[str]:
    """Names of the inventory disks (IPA/Redfish inventory format) every hint field matches."""
    found = []
    for d in disks:
        size_gb = float(d.get("size") or 0) / 1e9
        if hint.serial is not None and str(d.get("serial") or "") != hint.serial:
            continue
        if hint.wwn is not None and _wwn(str(d.get("wwn") or "")) != _wwn(hint.wwn):
            continue
        if hint.by_path is not None and d.get("by_path") != hint.by_path:
            continue
        if hint.model is not None and hint.model.lower() not in str(d.get("model") or "").lower():
            continue
        if hint.size_gb_min is not None and size_gb < hint.size_gb_min:
            continue
        if hint.size_gb_max is not None and size_gb > hint.size_gb_max:
            continue
        found.append(str(d.get("name") or d.get("serial") or "?"))
    return found
