"""BIOS and firmware baselines in the site file: merged per host, errors located."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.exceptions import InventoryError
from provisioner.inventory import load_site
from tests.support.site_files import broken_copy, line_of


def test_profile_baseline_reaches_every_host_and_a_host_overrides_it(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      - u: 5\n",
                       "      - u: 5\n        bios: {SysProfile: Custom}\n"
                       "        firmware: [{component: \"*BIOS.Setup.1-1\", version: \"2.3.1\"}]\n")
    site = load_site(path)
    plain, special = site.host("gpu-r01-u03"), site.host("gpu-r01-u05")
    assert plain.bios["SysProfile"].value == "PerfOptimized"
    assert special.bios["SysProfile"].value == "Custom"
    assert special.bios["MmioAbove4Gb"].value == "Enabled"  # the rest of the profile stays
    assert special.bios["SysProfile"].where == f"{path}:{line_of(path, 'SysProfile: Custom')}"
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


def test_a_bios_value_must_be_a_scalar_and_says_so_once(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      BootMode: Uefi\n", "      BootMode: [Uefi]\n")
    with pytest.raises(InventoryError, match="BootMode") as info:
        load_site(path)
    text = str(info.value)
    # One problem, in words: not "BootMode.bool: Input should be a valid boolean (and 12
    # more problems)" from each member of the value's union type.
    assert "not a list" in text and ".bool" not in text and "more problem" not in text
    assert f"site.yml:{line_of(path, 'BootMode: [Uefi]')}" in text


@pytest.mark.parametrize("written", ["On", "Off", "yes", "no", "ON", "0x10"])
def test_a_yaml_boolean_keeps_the_word_it_was_written_as(tmp_path: Path,
                                                          written: str) -> None:
    path = broken_copy(tmp_path, "      BootMode: Uefi\n",
                       f"      BootMode: Uefi\n      NumLock: {written}\n"
                       "      Quoted: \"On\"\n      Word: Enabled\n")
    bios = load_site(path).host("gpu-r01-u03").bios
    assert bios["NumLock"].written == written  # YAML 1.1 read it as a boolean or number
    assert bios["Quoted"].value == "On" and bios["Quoted"].written is None
    assert bios["Word"].written is None


def test_an_intent_beside_raw_names_is_checked_where_it_is_written(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      BootMode: Uefi\n",
                       "      BootMode: Uefi\n      sr-iov: on\n      c-states: disabled\n")
    bios = load_site(path).host("gpu-r01-u03").bios
    assert bios["sr-iov"].value is True and bios["c-states"].value == "disabled"
    (tmp_path / "b").mkdir()
    bad = broken_copy(tmp_path / "b", "      BootMode: Uefi\n",
                      "      BootMode: Uefi\n      sriov-x: enabled\n")
    with pytest.raises(InventoryError, match="unknown BIOS intent 'sriov-x'") as info:
        load_site(bad)
    assert f"site.yml:{line_of(bad, 'sriov-x')}" in str(info.value)
    assert "sr-iov" in (info.value.hint or "")
    (tmp_path / "c").mkdir()
    wrong = broken_copy(tmp_path / "c", "      BootMode: Uefi\n",
                        "      BootMode: Uefi\n      numa-per-socket: 3\n")
    with pytest.raises(InventoryError, match="numa-per-socket takes 1, 2, 4, not '3'"):
        load_site(wrong)
