"""Choosing the MAAS boot disk from the host's root-disk hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.deploy.maas.disks import RootDiskNotFound, choose_root_disk
from provisioner.deploy.maas.models import BlockDevice
from provisioner.inventory.spec import RootDiskHint

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "maas"
DEVS = [BlockDevice.model_validate(d) for d in json.loads((FIX / "blockdevices.json").read_text())]


def pick(**hint) -> BlockDevice:
    return choose_root_disk(DEVS, RootDiskHint(**hint), system_id="x7kq3m", host="h")


@pytest.mark.parametrize(
    ("hint", "name"),
    [
        ({"serial": "s6ckna0t200124"}, "nvme1n1"),
        ({"wwn": "0x5002538E30A1B2C3"}, "nvme1n1"),
        ({"wwn": "naa.5002538e30a1b2c3"}, "nvme1n1"),
        ({"by_path": "/dev/disk/by-id/nvme-eui.36344730526001230025384500000001"}, "nvme0n1"),
        ({"model": "DELLBOSS", "size_gb_min": 400, "size_gb_max": 1000}, "sda"),
        ({"size_gb_max": 1000}, "sda"),
    ],
)
def test_hint_selects_one_device(hint, name):
    assert pick(**hint).name == name


def test_no_match_lists_what_maas_sees():
    with pytest.raises(RootDiskNotFound) as exc:
        pick(serial="NOPE")
    msg = str(exc.value)
    assert "no disk of MAAS machine x7kq3m matches root_disk [serial=NOPE]" in msg
    assert "nvme1n1 (id 33" in msg and "serial S6CKNA0T200124" in msg
    assert exc.value.system_id == "x7kq3m"


def test_ambiguous_hint_is_refused():
    with pytest.raises(RootDiskNotFound, match="2 disks of MAAS machine x7kq3m match"):
        pick(model="Dell Ent NVMe")


def test_virtual_devices_are_never_chosen():
    raid = DEVS[0].model_copy(update={"type": "virtual", "name": "md0", "id": 90})
    with pytest.raises(RootDiskNotFound):
        choose_root_disk([raid], RootDiskHint(model="DELLBOSS"), system_id="s", host="h")
