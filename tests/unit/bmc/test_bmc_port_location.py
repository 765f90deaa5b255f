"""Where a port sits and which MACs the firmware network-boots, from Redfish semantics."""

from __future__ import annotations

import json

import pytest

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import NicPort
from tests.conftest import corpus_path

LENOVO = ("redfish", "lenovo-xcc-sr670v2-libredfish", "mockup", "redfish", "v1")
DGX = ("redfish", "nvidia-dgx-h100-libredfish", "mockup", "redfish", "v1")


def load(*path: str) -> dict:
    return json.loads(corpus_path(*path, "index.json").read_text())


def test_part_location_types():
    embedded = {"Location": {"PartLocation": {"LocationType": "Embedded"}}}
    assert rp.part_location(embedded, "a")[0] == "embedded"
    slot = {"Location": {"PartLocation": {"LocationType": "Slot", "ServiceLabel": "PCIe 4"}}}
    assert rp.part_location(slot, "a") == ("slot", "a Location Slot 'PCIe 4'", "PCIe 4")
    # Lenovo labels motherboard devices as an "OnBoard" slot.
    onboard = {"Location": {"Info": "OnBoard", "PartLocation": {
        "LocationType": "Slot", "ServiceLabel": "OnBoard"}}}
    assert rp.part_location(onboard, "a")[0] == "embedded"
    assert rp.part_location({}, "a") is None


def test_ocp_slot_type_and_names():
    assert rp.slot_location({"SlotType": "OCP3Small"}, "s")[0] == "ocp"
    assert rp.location_from_name("Broadcom 5719 1GbE RJ45 4-port OCP Ethernet Adapter") == "ocp"
    # A DPU's product name lists features, not where it sits.
    assert rp.location_from_name(
        "BlueField-2 DPU 100GbE Dual-Port QSFP56, integrated BMC, 32GB on-board DDR") is None
    assert rp.location_from_text("NIC.LOM.1.1") == "embedded"
    assert rp.location_from_text("OCP.Slot.10.1", "OCP 3.0 Slot 10") == "ocp"
    assert rp.location_from_text("PCI-E Slot 1") == "slot"
    assert rp.location_from_text("NIC.FlexLOM.1.1", "FlexibleLOM 1") == "ocp"  # HPE FLR
    blade = rp.location_from_id(NicPort("NIC.Mezzanine.1A-1-1", "02:00:5e:00:00:0a"))
    assert (blade.location, blade.onboard) == ("ocp", True)


def test_lenovo_ocp_adapter_device_is_onboard():
    device = load(*LENOVO, "Chassis", "1", "PCIeDevices", "slot_27")
    location, said, label = rp.device_location(device)
    assert (location, label) == ("ocp", "PCIe 27")
    assert "OCP Ethernet Adapter" in said
    assert rp.device_location(load(*LENOVO, "Chassis", "1", "PCIeDevices", "slot_15"))[0] == \
        "slot"


def test_boot_option_entries_name_macs_and_usb_paths():
    pxe = load(*DGX, "Systems", "DGX", "BootOptions", "0026")
    assert rp.boot_option_entry(pxe) == (
        "a0:88:c2:82:6e:52", "Boot0026 UEFI: PXE IPv4 Nvidia Network Adapter - A0:88:C2:82:6E:52",
        False)
    usb = load(*DGX, "Systems", "DGX", "BootOptions", "002C")
    assert usb is not None and rp.boot_option_entry(usb)[2] is True
    disk = load(*DGX, "Systems", "DGX", "BootOptions", "0000")
    assert rp.boot_option_entry(disk) is None


def test_port_links_are_tried_in_both_collections():
    function = load(*LENOVO, "Chassis", "1", "NetworkAdapters", "slot-27",
                    "NetworkDeviceFunctions", "1.1")
    links = rp.function_port_links(function)
    assert "/redfish/v1/Chassis/1/NetworkAdapters/slot-27/Ports/1" in links
    assert "/redfish/v1/Chassis/1/NetworkAdapters/slot-27/NetworkPorts/1" in links


def test_bare_hex_macs_are_macs():
    assert rp.norm_mac("00620B4C284E") == "00:62:0b:4c:28:4e"


def test_location_facts_merge_and_ids_stay_unique():
    primary = NicPort("1", "02:00:5e:00:00:01", link_up=None, source="/Systems/1/Eth/1")
    adapter = NicPort("1", "02:00:5e:00:00:01", link_up=True, location="ocp", onboard=True,
                      source="/Chassis/1/NetworkAdapters/a/NetworkDeviceFunctions/1")
    other = NicPort("1", "02:00:5e:00:00:02", location="slot", onboard=False,
                    source="/Chassis/1/NetworkAdapters/b/NetworkDeviceFunctions/1")
    merged = rp.unique_ids(rp.merge_nics([primary], [adapter, other]))
    assert [(p.id, p.link_up, p.location, p.onboard) for p in merged] == [
        ("1", True, "ocp", True), ("b/1", None, "slot", False)]


def test_adapters_of_two_chassis_with_the_same_id_get_the_chassis_in_front():
    ports = [NicPort("1", "02:00:5e:00:00:01", source="/Systems/1/EthernetInterfaces/1"),
             NicPort("1", "02:00:5e:00:00:02",
                     source="/Chassis/a/NetworkAdapters/lom/NetworkDeviceFunctions/1"),
             NicPort("1", "02:00:5e:00:00:03",
                     source="/Chassis/b/NetworkAdapters/lom/NetworkDeviceFunctions/1")]
    assert [p.id for p in rp.unique_ids(ports)] == ["1", "a/lom/1", "b/lom/1"]


def test_cisco_cimc_style_ports_mlom_is_onboard_and_link_unknown():
    # Written by the project after the layout CIMC (C225 M6) uses: EthernetInterfaces "1.0"
    # (a VIC in PCIe slot 1) and "MLOM.0" (the VIC in the modular-LOM slot, an OCP-like
    # position), no LinkStatus at all.
    from provisioner.inventory import NicRule
    from provisioner.workflow.nic_choice import explain_selection

    raw = [{"Id": "1.0", "MACAddress": "02:00:5e:40:00:10"},
           {"Id": "MLOM.0", "MACAddress": "02:00:5e:40:00:20"},
           {"Id": "MLOM.1", "MACAddress": "02:00:5e:40:00:21"}]
    ports = [rp.location_from_id(p) for p in
             (rp.parse_ethernet_interface(r) for r in raw) if p]
    by_id = {p.id: p for p in ports}
    assert by_id["MLOM.0"].onboard is True and by_id["MLOM.0"].location == "ocp"
    assert by_id["MLOM.0"].link == "unknown" and by_id["1.0"].onboard is None
    choice = explain_selection(ports, NicRule(rule="first-onboard-up"))
    assert choice.port is not None and choice.port.id == "MLOM.0"
    assert choice.warnings and "no link state" in choice.warnings[0]


@pytest.mark.parametrize("junk", [None, 3, "x", [], [1, 2], {"PartLocation": [1]},
                                  {"PartLocation": {"LocationType": 7, "ServiceLabel": []}}])
def test_hostile_shapes_give_no_fact_and_no_crash(junk):
    assert rp.part_location({"Location": junk}, "a") in (None, ("slot", "a Location 7", None))
    rp.slot_location({"SlotType": junk, "Location": junk}, "s")
    rp.device_location({"Slot": junk, "Name": junk, "Model": junk})
    assert rp.boot_option_entry({"UefiDevicePath": junk}) is None
    rp.function_port_links({"Links": junk, "AssignablePhysicalPorts": junk})
    assert rp.obj(junk) == (junk if isinstance(junk, dict) else {})


def test_vendor_port_naming_that_says_onboard_survives_a_slot_location():
    mlom = rp.parse_ethernet_interface({"Id": "MLOM.0", "MACAddress": "02:00:5e:40:00:20"})
    assert mlom is not None and mlom.onboard is True
    card = NicPort("eth0", mlom.mac, location="slot", onboard=False,
                   location_from="adapter Location Slot 'MLOM'")
    (merged,) = rp.merge_nics([mlom], [card])
    assert merged.onboard is True and merged.location == "slot"


def test_supermicro_aiom_is_ocp_and_function_boot_mode_is_a_pxe_fact():
    assert rp.location_from_text("AIOM slot 1") == "ocp"
    nic = rp.parse_device_function(
        {"Id": "1", "BootMode": "PXE", "Ethernet": {"MACAddress": "02:00:5e:00:00:07"}},
        None, "1")
    assert nic is not None and nic.boot_options == ("NetworkDeviceFunction BootMode PXE",)


def test_pcie_device_from_a_function_link():
    function = load(*DGX, "Chassis", "DGX", "NetworkAdapters", "DevType7_NIC0",
                    "NetworkDeviceFunctions", "NetworkDeviceFunction0")
    assert rp.pcie_device_of(function) == "/redfish/v1/Chassis/DGX/PCIeDevices/00_0B_00"
    assert rp.pcie_device_of({"Links": {"PCIeFunction": {"@odata.id": "/x/y"}}}) is None


def test_a_view_saying_link_up_wins_over_a_stale_one():
    down = {"@odata.id": "/a/NetworkPorts/1", "LinkStatus": "Down"}
    up = {"@odata.id": "/a/Ports/1", "LinkStatus": "LinkUp"}
    assert rp.best_port([down, up]) is up
    assert rp.best_port([{"@odata.id": "/x"}, down]) is down
    assert rp.best_port([]) is None
    eth = NicPort("NIC1", "02:00:5e:00:00:01", link_up=False)
    port = NicPort("1.1", "02:00:5e:00:00:01", link_up=True)
    assert rp.merge_nics([eth], [port])[0].link_up is True


def test_ilo_boot_entry_names_give_the_port_position():
    # Written by the project after the names iLO 5/6/7 give UEFI network boot entries.
    from provisioner.bmc.vendors.hpe_adapters import boot_entry_locations

    def option(n: int, name: str, mac: str) -> dict:
        return {"@odata.id": f"/redfish/v1/Systems/1/BootOptions/{n}", "DisplayName": name,
                "BootOptionReference": f"Boot000{n}",
                "UefiDevicePath": f"PciRoot(0x0)/Pci(0x1,0x0)/MAC({mac},0x1)/IPv4(0.0.0.0)"}

    found = boot_entry_locations([
        option(1, "OCP Slot 10 Port 1 : Intel I350-T4 for OCP NIC 3.0 (PXE IPv4)", "02005E000001"),
        option(2, "Embedded LOM 1 Port 1 : HPE Ethernet 1Gb 4-port 369i (PXE IPv4)",
               "02005E000002"),
        option(3, "Slot 2 Port 1 : Nvidia Network Adapter - 02:00:5E:00:00:03 (PXE IPv4)",
               "02005E000003"),
        option(4, "Embedded FlexibleLOM 1 Port 1 : HPE 10/25Gb 640FLR (PXE IPv4)",
               "02005E000004"),
        option(5, "UEFI PXE IPv4 (MAC:02005E000005)", "02005E000005"),  # no position named
    ])
    assert {mac: where[0] for mac, where in found.items()} == {
        "02:00:5e:00:00:01": "ocp", "02:00:5e:00:00:02": "embedded",
        "02:00:5e:00:00:03": "slot", "02:00:5e:00:00:04": "ocp"}
    assert found["02:00:5e:00:00:03"][2] == "Slot 2"


def test_port_position_from_the_name_when_neither_id_nor_resources_say():
    # Written by the project: the Id wins over the name; the name only fills a gap.
    named = rp.location_from_id(NicPort("1", "02:00:5e:00:00:01", name="OnBoard LAN 1"))
    assert (named.location, named.location_from, named.onboard) == (
        "embedded", "port name 'OnBoard LAN 1'", True)
    by_id = rp.location_from_id(NicPort("NIC.Slot.3-1-1", "02:00:5e:00:00:02",
                                        name="OnBoard LAN 2"))
    assert (by_id.location, by_id.onboard) == ("slot", False)
    plain = rp.location_from_id(NicPort("2", "02:00:5e:00:00:03", name="eth1"))
    assert plain.location is None and plain.onboard is None


def test_network_daughter_cards_are_the_onboard_slot():
    # Written by the project: Dell's rNDC/bNDC and "daughter card" labels are the LOM position.
    assert rp.location_from_text("NIC Daughter Card") == "ocp"
    assert rp.location_from_name("Broadcom 57416 2 Port 10Gb Base-T + 5720, rNDC") == "ocp"
    assert rp.location_from_text("PCIe Slot 4") == "slot"
    assert rp.location_from_name("ConnectX-7 Adapter Card") is None


def test_fcoe_functions_are_excluded_but_never_take_an_ethernet_view_of_their_mac_with_them():
    fcoe = rp.parse_device_function(
        {"Id": "fc0", "NetDevFuncType": "FibreChannelOverEthernet",
         "Ethernet": {"MACAddress": "02:00:5e:50:00:18"}}, None, "VIC")
    assert fcoe is not None and fcoe.excluded and "Fibre Channel over Ethernet" in fcoe.excluded
    assert rp.storage_function({"NetDevFuncType": "FibreChannel"})
    assert rp.storage_function({"NetDevFuncType": "Ethernet"}) is None
    assert rp.storage_function({"NetDevFuncType": ["junk"]}) is None
    eth = rp.parse_device_function(
        {"Id": "eth0", "NetDevFuncType": "Ethernet",
         "Ethernet": {"MACAddress": "02:00:5e:50:00:18"}}, None, "VIC")
    assert eth is not None
    # Whichever view comes first, a MAC that is an Ethernet function stays a candidate.
    for views in ([fcoe], [eth]), ([eth], [fcoe]), ([], [fcoe, eth]), ([], [eth, fcoe]):
        (merged,) = rp.merge_nics(*views)
        assert merged.excluded is None
    (alone,) = rp.merge_nics([], [fcoe])
    assert alone.excluded == fcoe.excluded


def test_locally_administered_macs():
    assert rp.locally_administered("ee:a3:ab:6b:53:03")  # a GB200 BMC's USB host interface
    assert rp.locally_administered("02:00:5e:30:00:ff")
    assert not rp.locally_administered("f4:4d:ad:02:27:62")
    assert not rp.locally_administered("d0:f4:05:43:95:04")
