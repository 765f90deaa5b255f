"""BIOS and firmware baselines in the site file: merged per host, errors located."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.exceptions import InventoryError
from provisioner.inventory import load_site
from tests.unit.inventory.test_inventory_loader import broken_copy, line_of


def test_profile_baseline_reaches_every_host_and_a_host_overrides_it(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      - u: 5\n",
                       "      - u: 5\n        bios: {SysProfile: Custom}\n"
                       "        firmware: [{component: \"*BIOS.Setup.1-1\", version: \"2.3.1\"}]\n")
    site = load_site(path)
    plain, special = site.host("gpu-r01-u03"), site.host("gpu-r01-u05")
    assert plain.bios["SysProfile"] == "PerfOptimized"
    assert special.bios["SysProfile"] == "Custom"
    assert special.bios["MmioAbove4Gb"] == "Enabled"  # the rest of the profile stays
    versions = {r.component: r.allowed for r in special.firmware}
    assert versions["*BIOS.Setup.1-1"] == ["2.3.1"]
    assert versions["*iDRAC.Embedded.1-1"] == ["7.00.00.173"]
    assert len(special.firmware) == len(plain.firmware)


def test_a_firmware_entry_without_a_version_names_its_line(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, '{component: "*BIOS.Setup.1-1", version: "2.2.*"}',
                       '{component: "*BIOS.Setup.1-1"}')
    with pytest.raises(InventoryError, match="exactly one of version or versions") as info:
        load_site(path)
    assert f"site.yml:{line_of(path, 'BIOS.Setup.1-1')}" in str(info.value)


def test_a_bios_value_must_be_a_scalar(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      BootMode: Uefi\n", "      BootMode: [Uefi]\n")
    with pytest.raises(InventoryError, match="BootMode"):
        load_site(path)
