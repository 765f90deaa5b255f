"""Pick the MAAS block device that receives the OS from the host's root-disk hint."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from provisioner.deploy.maas.errors import MAASError
from provisioner.deploy.maas.models import BlockDevice

if TYPE_CHECKING:
    from provisioner.inventory.model import RootDiskHint


class RootDiskNotFound(MAASError):
    """No block device, or more than one, matches the root-disk hint."""


_WWN_PREFIXES = ("0x", "naa.", "eui.", "wwn-0x", "wwn-")


def _norm_wwn(value: str) -> str:
    v = value.strip().lower()
    for prefix in _WWN_PREFIXES:
        if v.startswith(prefix):
            v = v[len(prefix):]
    return v


def _device_wwn(dev: BlockDevice) -> str | None:
    # MAAS has no WWN field; its stable id_path is /dev/disk/by-id/wwn-0x... when the disk has one.
    if dev.id_path:
        m = re.search(r"wwn-(?:0x)?([0-9a-fA-F]+)", dev.id_path)
        if m:
            return m.group(1).lower()
    return None


def _matches(dev: BlockDevice, hint: RootDiskHint) -> bool:
    if hint.serial is not None and (dev.serial or "").strip().lower() != hint.serial.lower():
        return False
    if hint.wwn is not None and _device_wwn(dev) != _norm_wwn(hint.wwn):
        return False
    if hint.by_path is not None and hint.by_path not in {dev.id_path, dev.path}:
        return False
    if hint.model is not None and hint.model.lower() not in (dev.model or "").lower():
        return False
    if hint.size_gb_min is not None and dev.size_gb < hint.size_gb_min:
        return False
    return not (hint.size_gb_max is not None and dev.size_gb > hint.size_gb_max)


def describe_hint(hint: RootDiskHint) -> str:
    """``serial=S6XX model=BOSS`` for messages."""
    return " ".join(f"{k}={v}" for k, v in hint.model_dump().items() if v is not None)


def choose_root_disk(
    devices: Sequence[BlockDevice], hint: RootDiskHint, *, system_id: str, host: str
) -> BlockDevice:
    """The one physical device matching every field of ``hint``; RootDiskNotFound otherwise."""
    physical = [d for d in devices if d.type == "physical"]
    found = [d for d in physical if _matches(d, hint)]
    if len(found) == 1:
        return found[0]
    listing = "; ".join(d.describe() for d in physical) or "none"
    if not found:
        raise RootDiskNotFound(
            f"{host}: no disk of MAAS machine {system_id} matches root_disk "
            f"[{describe_hint(hint)}]; MAAS sees: {listing}",
            system_id=system_id,
            hint="fix root_disk for this host (or its profile) in the site file; "
            "serial or wwn pin one disk exactly",
        )
    raise RootDiskNotFound(
        f"{host}: {len(found)} disks of MAAS machine {system_id} match root_disk "
        f"[{describe_hint(hint)}]: {'; '.join(d.describe() for d in found)}",
        system_id=system_id,
        hint="narrow root_disk for this host with its serial or wwn",
    )
