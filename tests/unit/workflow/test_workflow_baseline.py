"""Baseline verdicts on BIOS and firmware data shaped like real BMCs' (pure logic)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from provisioner.bmc.bios import AttributeInfo, BiosState, parse_registry
from provisioner.bmc.firmware_inventory import FirmwareComponent, parse_component
from provisioner.inventory.spec import FirmwareRequirement, merge_firmware
from provisioner.workflow.baseline import Status, bios_items, firmware_items


def _state(**kw) -> BiosState:
    base = {"path": "/redfish/v1/Systems/1/Bios",
            "attributes": {"SriovGlobalEnable": "Disabled", "NumLock": True, "Delay": 120}}
    return BiosState(**{**base, **kw})


def _by_name(items):
    return {i.name: i for i in items}


def test_pending_value_is_reported_as_pending_not_drift():
    state = _state(pending={"SriovGlobalEnable": "Enabled"})
    got = _by_name(bios_items({"SriovGlobalEnable": "Enabled"}, state))
    assert got["SriovGlobalEnable"].status is Status.PENDING
    got = _by_name(bios_items({"SriovGlobalEnable": "Enabled"}, _state()))
    assert got["SriovGlobalEnable"].status is Status.DRIFT


def test_booleans_and_integers_compare_by_value():
    got = _by_name(bios_items({"NumLock": True, "Delay": 120}, _state()))
    assert all(i.status is Status.OK for i in got.values())
    got = _by_name(bios_items({"NumLock": False, "Delay": 60},
                              _state(attributes={"NumLock": "True", "Delay": "120"})))
    assert got["NumLock"].status is Status.DRIFT and got["Delay"].status is Status.DRIFT


def test_without_a_registry_names_come_from_the_current_values():
    got = _by_name(bios_items({"SriovGlobalEnabel": "Enabled"}, _state()))
    item = got["SriovGlobalEnabel"]
    assert item.status is Status.UNKNOWN and "'SriovGlobalEnable'" in item.hint


def test_registry_values_and_read_only_are_enforced():
    reg = parse_registry([
        {"AttributeName": "SriovGlobalEnable", "Type": "Enumeration",
         "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]},
        {"AttributeName": "Delay", "Type": "Integer", "ReadOnly": True},
        {"AttributeName": "HiddenKnob", "Type": "String"},
        "garbage", {"Type": "Integer"},
    ])
    assert set(reg) == {"SriovGlobalEnable", "Delay", "HiddenKnob"}
    assert reg["SriovGlobalEnable"] == AttributeInfo("SriovGlobalEnable", "Enumeration", False,
                                                     ("Enabled", "Disabled"))
    got = _by_name(bios_items({"SriovGlobalEnable": "On", "Delay": 5, "HiddenKnob": "x"},
                              _state(registry=reg)))
    assert got["SriovGlobalEnable"].status is Status.INVALID
    assert got["Delay"].status is Status.READ_ONLY
    # In the registry but not among current values: known, and drift.
    assert got["HiddenKnob"].status is Status.DRIFT


def _fw(ident, name, version):
    return FirmwareComponent(ident, name, version)


def test_firmware_globs_allowed_versions_and_required():
    have = [_fw("Installed-1__NIC.Slot.5-1", "Mellanox", "24.40.10.00"),
            _fw("Current-1__NIC.Slot.5-1", "Mellanox", "24.40.10.00"),
            _fw("BMC", "BMC", "11.01.01")]
    want = [FirmwareRequirement(component="*nic.slot.5-1", versions=["24.39.*", "24.40.*"]),
            FirmwareRequirement(component="BMC", version="11.02.00"),
            FirmwareRequirement(component="CPLD*", version="1", required=False),
            FirmwareRequirement(component="GPU*", version="1")]
    items = firmware_items(want, have)
    assert [(i.status, i.have) for i in items] == [
        (Status.OK, "24.40.10.00"),  # Current-/Installed- copies judged once
        (Status.DRIFT, "11.01.01"),
        (Status.OK, "-"),
        (Status.MISSING, "-")]


def test_components_not_installed_are_ignored():
    assert parse_component({"Id": "Backup_BIOS", "Version": "Not Present"}) is None
    assert parse_component({"Id": "BMC-Primary-Pending", "Version": "-*"}) is None  # XCC
    assert parse_component({"Id": "Previous-159-1.2.4__BIOS.Setup.1-1", "Version": "1.2.4"}) is None
    assert parse_component({"Id": "X", "Version": 7}) is None
    c = parse_component({"Id": "BMC", "Version": " 1.0 ", "Updateable": True,
                         "@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/BMC"})
    assert c == FirmwareComponent("BMC", "BMC", "1.0", True,
                                  "/redfish/v1/UpdateService/FirmwareInventory/BMC")


def test_requirement_needs_exactly_one_version_key_and_a_real_checksum():
    with pytest.raises(ValidationError, match="exactly one of version or versions"):
        FirmwareRequirement(component="BMC", version="1", versions=["1"])
    with pytest.raises(ValidationError, match="exactly one of version or versions"):
        FirmwareRequirement(component="BMC")
    with pytest.raises(ValidationError, match="64 hexadecimal"):
        FirmwareRequirement(component="BMC", version="1",
                            image={"url": "http://x/fw.bin", "sha256": "abc"})


def test_host_entries_replace_the_profile_entry_of_the_same_component():
    profile = (FirmwareRequirement(component="BMC", version="1"),
               FirmwareRequirement(component="BIOS", version="2"))
    host = [FirmwareRequirement(component="bmc", version="3")]
    merged = merge_firmware(profile, host)
    assert [(r.component, r.version) for r in merged] == [("BIOS", "2"), ("bmc", "3")]
