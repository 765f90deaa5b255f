"""Parsing real BMC payloads recorded from Dell, HPE and Supermicro BMCs, DMTF and sushy."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import Drive, NicPort
from provisioner.bmc.vendors import detect_vendor, vendor_class
from provisioner.bmc.vendors.dell import DellBMC
from provisioner.bmc.vendors.hpe import HpeBMC
from provisioner.bmc.vendors.supermicro import SupermicroBMC
from provisioner.redfish.errors import parse_extended_info
from tests.conftest import corpus_path

DELL = ("redfish", "dell-idrac9-poweredge-r750-ib-libredfish", "mockup", "redfish", "v1")
SMC = ("redfish", "supermicro-sys-821ge-tnhr-hgx-h100-libredfish", "mockup", "redfish", "v1")
HPE = ("redfish", "hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish", "mockup", "redfish", "v1")
DMTF = ("redfish", "dmtf-public-rackmount1", "mockup")
SAMPLES = ("redfish", "sushy-unit-test-json-samples", "json_samples")


def load(base: tuple[str, ...], *path: str) -> dict:
    return json.loads(corpus_path(*base, *path, "index.json").read_text())


def members(base: tuple[str, ...], *path: str) -> list[dict]:
    folder = corpus_path(*base, *path)
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*/index.json"))]


def nics(base: tuple[str, ...], system: str) -> list[NicPort]:
    ports = [rp.parse_ethernet_interface(m)
             for m in members(base, "Systems", system, "EthernetInterfaces")]
    return rp.merge_nics([p for p in ports if p], [])


def test_dell_ethernet_interfaces():
    ports = {p.id: p for p in nics(DELL, "System.Embedded.1")}
    assert set(ports) == {"NIC.Embedded.1-1-1", "NIC.Embedded.2-1-1", "NIC.Integrated.1-1-1",
                          "NIC.Integrated.1-2-1", "NIC.Slot.5-1"}
    emb = ports["NIC.Embedded.1-1-1"]
    assert emb.mac == "70:b5:e8:f0:52:dc"
    assert emb.onboard is True and emb.link_up is False
    assert ports["NIC.Slot.5-1"].onboard is False


def test_dell_network_adapters_separate_infiniband_from_ethernet():
    adapters = corpus_path(*DELL, "Chassis", "System.Embedded.1", "NetworkAdapters")
    eth, ib = [], []
    for adapter_dir in sorted(p for p in adapters.iterdir() if p.is_dir()):
        ports = {p.get("@odata.id"): p for p in members(DELL, "Chassis", "System.Embedded.1",
                                                     "NetworkAdapters", adapter_dir.name,
                                                     "NetworkPorts")}
        for fn in members(DELL, "Chassis", "System.Embedded.1", "NetworkAdapters",
                          adapter_dir.name, "NetworkDeviceFunctions"):
            port = ports.get(rp.function_port_link(fn) or "")
            if rp.is_infiniband(fn, port, adapter_dir.name):
                ib.append(fn["Id"])
            else:
                nic = rp.parse_device_function(fn, port, adapter_dir.name)
                assert nic is not None
                eth.append(nic)
    assert sorted(ib) == ["InfiniBand.Slot.7-1", "InfiniBand.Slot.7-2"]
    by_id = {n.id: n for n in eth}
    assert by_id["NIC.Embedded.1-1-1"].link_up is False  # NetworkPort LinkStatus "Down"
    assert by_id["NIC.Embedded.1-1-1"].onboard is True
    # Completing EthernetInterfaces with adapter data keeps one port per MAC.
    merged = rp.merge_nics(nics(DELL, "System.Embedded.1"), eth)
    assert len(merged) == len({p.mac for p in merged}) == 5


def test_supermicro_interfaces_skip_the_host_interface():
    ports = nics(SMC, "1")
    assert len(ports) == 11
    assert all(p.mac == p.mac.lower() for p in ports)
    assert "be:3a:f2:b6:05:9f" not in {p.mac for p in ports}  # ToManager
    assert any(p.mac.startswith("94:6d:ae") for p in ports)  # ConnectX


def test_hpe_interfaces_without_link_state():
    ports = nics(HPE, "1")
    assert len(ports) == 7
    assert all(p.link_up is None for p in ports)
    assert "b8:3f:d2:d7:f7:4a" in {p.mac for p in ports}


def test_dmtf_vlan_and_manager_interfaces_collapse():
    ports = nics(DMTF, "437XR1138R2")
    # The burned-in (permanent) MAC is the one the firmware PXE-boots with.
    assert {p.mac for p in ports} == {"12:44:6a:3b:04:11", "12:44:6a:3b:88:90"}
    assert all(p.link_up and p.speed_mbps == 1000 for p in ports)


def test_drives_from_storage():
    dell = [rp.parse_drive(d) for d in members(DELL, "Systems", "System.Embedded.1", "Storage",
                                               "CPU.1", "Drives")]
    assert {d.serial for d in dell} == {"61M0A08ZTCD8", "61P0A06CTCD8", "61X0A002TCD8"}
    assert all(d.size_bytes == 1920383410176 and d.media == "SSD" for d in dell)
    hpe = rp.parse_drive(load(HPE, "Systems", "1", "Storage", "DA00001D", "Drives", "DA00001D"))
    assert hpe == Drive(id="DA00001D", serial="S6C1NA0TA04222", model="MZXLR6T4HALA-000H3",
                        size_bytes=6401252745216, media="SSD", protocol="NVMe",
                        wwn="0025389A2101336D")


def test_simple_storage_dmtf():
    drives = rp.parse_simple_storage(load(DMTF, "Systems", "437XR1138R2", "SimpleStorage", "1"))
    assert [d.model for d in drives[:2]] == ["3000GT8", "3000GT7"]
    assert drives[0].size_bytes == 8000000000000


@pytest.mark.parametrize(
    ("base", "manager", "expected"),
    [
        (DELL, "iDRAC.Embedded.1", datetime(2024, 8, 8, 23, 48, 10, tzinfo=UTC)),
        (HPE, "1", datetime(2024, 8, 15, 21, 43, 28, tzinfo=UTC)),
        (SMC, "1", datetime(2023, 11, 30, 21, 1, 15, tzinfo=UTC)),
        (DMTF, "BMC", datetime(2015, 3, 12, 22, 14, 33, tzinfo=UTC)),
    ],
)
def test_manager_datetime_with_offsets(base, manager, expected):
    mgr = load(base, "Managers", manager)
    parsed = rp.parse_datetime(mgr["DateTime"])
    assert parsed == expected
    assert mgr.get("FirmwareVersion")


def test_clock_skew_against_request_midpoint():
    before = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    after = before + timedelta(seconds=2)
    bmc = datetime(2026, 1, 1, 12, 5, 1, tzinfo=UTC)
    assert rp.clock_skew_s(bmc, before, after) == 300.0
    assert rp.clock_skew_s(None, before, after) is None
    assert rp.parse_datetime("not a date") is None
    assert rp.parse_datetime("2026-01-01T00:00:00") == datetime(2026, 1, 1, tzinfo=UTC)


def test_firmware_inventory_skips_rollback_images():
    items = members(DELL, "UpdateService", "FirmwareInventory")
    parsed = dict(p for p in (rp.parse_firmware(i) for i in items) if p)
    assert parsed
    assert not any("Previous" in k for k in parsed)
    assert any(v == "6.00.30.00" for v in parsed.values())  # the running iDRAC


def test_reset_types_from_supermicro_action_info():
    system = load(SMC, "Systems", "1")
    action = system["Actions"]["#ComputerSystem.Reset"]
    assert rp.allowable_values(action, "ResetType") is None
    types = rp.reset_types_from_action_info(load(SMC, "Systems", "1", "ResetActionInfo"))
    assert types and "ForceRestart" in types


@pytest.mark.parametrize(
    ("base", "system", "vendor", "cls"),
    [
        (DELL, "System.Embedded.1", "dell", DellBMC),
        (SMC, "1", "supermicro", SupermicroBMC),
        (HPE, "1", "hpe", HpeBMC),
        (DMTF, "437XR1138R2", None, None),
    ],
)
def test_vendor_detection(base, system, vendor, cls):
    found = detect_vendor(load(base), load(base, "Systems", system))
    assert found == vendor
    if cls:
        assert vendor_class(found) is cls
    assert vendor_class(None).vendor == "generic"


def test_boot_allowable_values():
    boot = load(DELL, "Systems", "System.Embedded.1")["Boot"]
    allowed = rp.allowable_values(boot, "BootSourceOverrideTarget")
    assert allowed and {"Pxe", "UefiHttp", "Hdd", "Cd"} <= set(allowed)


def _samples() -> list[Path]:
    folder = corpus_path(*SAMPLES)
    return sorted(folder.glob("*.json"))


def test_every_sushy_sample_parses():
    # Each payload is routed to the parser for its resource type; none may raise.
    seen: dict[str, int] = {}
    for path in _samples():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue  # a few samples are deliberately malformed
        if not isinstance(data, dict):
            continue
        kind = str(data.get("@odata.type") or "").lstrip("#").split(".")[0]
        if kind == "EthernetInterface":
            port = rp.parse_ethernet_interface(data)
            assert port is None or rp.norm_mac(port.mac) == port.mac
        elif kind == "Drive":
            assert isinstance(rp.parse_drive(data), Drive)
        elif kind == "SimpleStorage":
            rp.parse_simple_storage(data)
        elif kind == "NetworkDeviceFunction":
            rp.parse_device_function(data, None, str(data.get("Id")))
        elif kind == "Manager":
            rp.parse_datetime(data.get("DateTime"))
        elif kind == "ComputerSystem":
            detect_vendor({}, data)
            rp.allowable_values(data.get("Boot") or {}, "BootSourceOverrideTarget")
        elif kind in ("SoftwareInventory",):
            rp.parse_firmware(data)
        elif "error" in data:
            assert parse_extended_info(data)
        else:
            continue
        seen[kind] = seen.get(kind, 0) + 1
    assert {"EthernetInterface", "Drive", "Manager", "ComputerSystem"} <= set(seen)


def test_sushy_error_samples_carry_extended_messages():
    data = json.loads(corpus_path(*SAMPLES, "error.json").read_text())
    messages = parse_extended_info(data)
    assert [m.message_id for m in messages] == [
        "Base.1.0.PropertyValueNotInList", "Base.1.0.PropertyNotWriteable",
        "Base.1.0.MalformedJSON"]
    assert "resolution" in str(messages[0])
    single = json.loads(corpus_path(*SAMPLES, "error_single_ext_info.json").read_text())
    assert len(parse_extended_info(single)) == 1
