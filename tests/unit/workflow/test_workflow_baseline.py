"""Baseline verdicts on BIOS and firmware data shaped like real BMCs' (pure logic)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from provisioner.bmc.bios_registry import AttributeDef, parse_registry
from provisioner.bmc.bios_state import BiosState
from provisioner.bmc.firmware_inventory import FirmwareComponent, parse_component
from provisioner.bmc.firmware_kinds import Kind
from provisioner.inventory.model import BiosSetting
from provisioner.inventory.spec import FirmwareRequirement, merge_firmware
from provisioner.workflow.baseline import Status, firmware_items
from provisioner.workflow.bios_baseline import bios_items


def _state(**kw) -> BiosState:
    base = {"path": "/redfish/v1/Systems/1/Bios",
            "attributes": {"SriovGlobalEnable": "Disabled", "NumLock": True, "Delay": 120}}
    return BiosState(**{**base, **kw})


def _by_name(items):
    return {i.name: i for i in items}


def _registry(entries):
    registry = parse_registry({"RegistryEntries": {"Attributes": entries}})
    assert registry is not None
    return registry


def _want(**values):
    """A BIOS baseline as the site file gives it (a tuple value: YAML's value, as written)."""
    return {k: BiosSetting(*v) if isinstance(v, tuple) else BiosSetting(v)
            for k, v in values.items()}


def test_pending_value_is_reported_as_pending_not_drift():
    state = _state(pending={"SriovGlobalEnable": "Enabled"})
    got = _by_name(bios_items(_want(SriovGlobalEnable="Enabled"), state))
    assert got["SriovGlobalEnable"].status is Status.PENDING
    got = _by_name(bios_items(_want(SriovGlobalEnable="Enabled"), _state()))
    assert got["SriovGlobalEnable"].status is Status.DRIFT


def test_booleans_and_integers_compare_by_value():
    got = _by_name(bios_items(_want(NumLock=True, Delay=120), _state()))
    assert all(i.status is Status.OK for i in got.values())
    got = _by_name(bios_items(_want(NumLock=False, Delay=60),
                              _state(attributes={"NumLock": "True", "Delay": "120"})))
    assert got["NumLock"].status is Status.DRIFT and got["Delay"].status is Status.DRIFT


def test_without_a_registry_names_come_from_the_current_values():
    got = _by_name(bios_items(_want(SriovGlobalEnabel="Enabled"), _state()))
    item = got["SriovGlobalEnabel"]
    assert item.status is Status.UNKNOWN and "'SriovGlobalEnable'" in item.hint


def test_registry_values_and_read_only_are_enforced():
    reg = _registry([
        {"AttributeName": "SriovGlobalEnable", "Type": "Enumeration",
         "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]},
        {"AttributeName": "Delay", "Type": "Integer", "ReadOnly": True},
        {"AttributeName": "HiddenKnob", "Type": "String"},
        "garbage", {"Type": "Integer"},
    ])
    assert set(reg.attributes) == {"SriovGlobalEnable", "Delay", "HiddenKnob"}
    assert reg.get("SriovGlobalEnable") == AttributeDef(
        "SriovGlobalEnable", "Enumeration", values=("Enabled", "Disabled"))
    got = _by_name(bios_items(_want(SriovGlobalEnable="On", Delay=5, HiddenKnob="x"),
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
                                  "/redfish/v1/UpdateService/FirmwareInventory/BMC",
                                  Kind.BMC, "its name 'BMC'")


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


def test_a_yaml_boolean_is_the_enumeration_word_it_was_written_as():
    # Finding 3: `NumLock: On` reads as True in YAML 1.1; iDRAC's NumLock is an enumeration
    # of On/Off. It is judged (and would be sent) as "On", not refused as "want true".
    reg = _registry([{"AttributeName": "NumLock", "Type": "Enumeration",
                           "Value": [{"ValueName": "On"}, {"ValueName": "Off"}]}])
    on = _state(attributes={"NumLock": "On"}, registry=reg)
    item = bios_items(_want(NumLock=(True, "On")), on)[0]
    assert (item.status, item.want, item.value) == (Status.OK, "On", "On")
    item = bios_items(_want(NumLock=(False, "Off")), on)[0]
    assert (item.status, item.value) == (Status.DRIFT, "Off")
    # Without a registry the BIOS's current value (a string) decides: no false drift.
    bare = _state(attributes={"NumLock": "On"})
    assert bios_items(_want(NumLock=(True, "On")), bare)[0].status is Status.OK
    assert bios_items(_want(NumLock=(True, "yes")), bare)[0].value == "yes"
    # A BIOS that reports a JSON boolean still gets one.
    flag = _state(attributes={"NumLock": False})
    assert bios_items(_want(NumLock=(True, "On")), flag)[0].value is True
    # Where it was written is in the refusal.
    bad = bios_items({"NumLock": BiosSetting(True, "Yes", "site.yml", 12)}, on)[0]
    assert bad.status is Status.INVALID and bad.hint.startswith("site.yml:12: 'Yes'")
    assert "allowed: On, Off" in bad.hint
