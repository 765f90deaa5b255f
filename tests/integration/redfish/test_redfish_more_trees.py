"""The provisioning NIC and warnings on the recordings added after the first vendor set.

Blade controllers serving several nodes (HPE Cray EX), a stock OpenBMC that names nothing, an
Apollo 6500 with partitioned (NPAR) ports, a GB200 NVLink switch tray, iLO 6/7 GPU servers, Supermicro GB300 NVL and X10; served by sushy-static as in
``test_redfish_vendor_trees.py`` (whose ``TREES``/``IDENTITY`` hold their identity and MACs).
``project-two-node-blade`` is written by the project (see its PROVENANCE.md).
"""

from __future__ import annotations

import json
import shutil

import pytest

from provisioner.workflow.nic_choice import NicPolicy, apply_nic_policy
from tests.conftest import corpus_path
from tests.support.redfish_trees import (
    FIRST_UP,
    discover,
    explained,
    tree,
)


def test_ex235n_blade_reads_node0_says_so_and_takes_the_management_port(tmp_path):
    _bmc, facts = discover(tree("ex235n"), tmp_path)
    warnings = facts.extra["warnings"]
    assert any("2 host Systems (Node0, Node1)" in w for w in warnings)
    # Node1's chassis names no System: its adapters are not read for Node0.
    assert not any("/Chassis/Node1/" in w for w in warnings)
    # The recorded 404s of the Slingshot adapters are warnings naming each path.
    assert any("/redfish/v1/Chassis/Node0/NetworkAdapters/HPCNet0/NetworkDeviceFunctions" in w
               for w in warnings)
    # The clock comes from the node BMC, not the mezzanine microcontroller listed first.
    assert facts.bmc_datetime is not None and facts.bmc_datetime.year == 2022
    # The only port with a MAC gives no link state nor position: refused with the rule to write.
    assert facts.provisioning_mac is None
    assert "{port_id: ManagementEthernet}" in facts.extra["provisioning_nic_hint"]
    port = explained(facts)["00:40:a6:84:d5:ea"]
    assert port["boot_options"][0].startswith("ME0-PXE-IP4")
    _bmc, facts = discover(tree("ex235n"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "00:40:a6:84:d5:ea"
    assert any("reports no link state" in w for w in facts.extra["warnings"])


def test_openbmc_stock_warns_that_it_names_no_identity_and_refuses_the_nic(tmp_path):
    _bmc, facts = discover(tree("openbmc"), tmp_path)
    assert facts.bmc_firmware == "2.15.0-dev-686-g100c36de90"
    assert facts.provisioning_mac is None
    assert "no Ethernet port" in facts.extra["provisioning_nic_hint"]
    identity = [w for w in facts.extra["warnings"] if w.startswith("identity:")]
    assert identity and "Manufacturer/Model/SerialNumber" in identity[0]
    assert "/redfish/v1/Chassis/chassis" in identity[0]  # the enclosure was asked too


def test_xl675d_a40_npar_ports_are_add_in_so_first_up_picks_the_first_up(tmp_path):
    _bmc, facts = discover(tree("xl675d-a40"), tmp_path)
    assert facts.provisioning_mac is None
    assert "{rule: first-up}" in facts.extra["provisioning_nic_hint"]
    ports = explained(facts)
    assert ports["94:40:c9:6a:42:db"]["location"] == "slot"
    assert ports["b4:7a:f1:12:fb:70"]["location"] == "slot"  # NIC.Slot.20.1
    _bmc, facts = discover(tree("xl675d-a40"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "94:40:c9:6a:42:db"


def test_two_node_blade_keeps_each_node_apart(tmp_path):
    _bmc, facts = discover(tree("twonode"), tmp_path)
    assert facts.serial is None and "serial" not in facts.extra["identity_from"]
    warnings = facts.extra["warnings"]
    assert any(w.startswith("identity: no SerialNumber in /redfish/v1/Systems/Node0")
               for w in warnings)
    assert any("2 host Systems (Node0, Node1)" in w for w in warnings)
    assert facts.provisioning_mac == "02:00:5e:40:00:02"  # Node0's LOM, not Node1's
    assert facts.bmc_firmware == "blade-1.2.3"  # the blade BMC, not the MCU listed first


def test_gb200_nvlink_switch_tray_gives_identity_and_firmware_and_refuses_the_nic(tmp_path):
    _bmc, facts = discover(tree("gbswitch"), tmp_path, FIRST_UP)
    assert facts.bmc_firmware == "88.0002.1950" and facts.bmc_datetime is not None
    assert any("MGX_FW_NVSwitch_0" in name for name in facts.firmware)
    assert facts.provisioning_mac is None
    assert "no Ethernet port" in facts.extra["provisioning_nic_hint"]
    assert not [w for w in facts.extra["warnings"] if w.startswith("identity:")]


def test_ilo6_dl380a_port_position_comes_from_the_boot_entry_name(tmp_path):
    # iLO 6 has no BaseNetworkAdapters and no adapter Location: "Slot 2 Port 1 : ..." says it.
    _bmc, facts = discover(tree("dl380a-g11"), tmp_path)
    ports = explained(facts)
    slot2 = ports["58:a2:e1:03:96:f2"]
    assert slot2["location"] == "slot" and slot2["pcie_slot"] == "Slot 2"
    assert "iLO boot entry" in slot2["location_from"]
    assert ports["58:a2:e1:03:96:f3"]["location"] is None  # no boot entry names it
    assert facts.provisioning_mac is None
    assert "{rule: first-up}" in facts.extra["provisioning_nic_hint"]
    assert facts.bmc_firmware == "iLO 6 v1.66" and len(facts.drives) == 8
    _bmc, facts = discover(tree("dl380a-g11"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "58:a2:e1:03:96:f2"


def test_ilo6_copy_whose_boot_entry_names_an_ocp_slot_is_onboard(tmp_path):
    # A copy made by the test: the ConnectX's boot entries renamed as iLO names an OCP card's.
    copy = tmp_path / "tree"
    shutil.copytree(tree("dl380a-g11"), copy)
    for path in (copy / "Systems" / "1" / "BootOptions").rglob("index.json"):
        body = json.loads(path.read_text())
        name = str(body.get("DisplayName") or "")
        if name.startswith("Slot 2 Port 1 :"):
            body["DisplayName"] = "OCP Slot 17" + name[len("Slot 2"):]
            path.write_text(json.dumps(body))
    _bmc, facts = discover(copy, tmp_path)
    assert facts.provisioning_mac == "58:a2:e1:03:96:f2"
    assert explained(facts)["58:a2:e1:03:96:f2"]["location"] == "ocp"


def test_ilo7_dl380a_gen12_every_nic_is_in_a_slot(tmp_path):
    _bmc, facts = discover(tree("dl380a-g12"), tmp_path)
    ports = explained(facts)
    # The EthernetInterfaces' UefiDevicePath disagree with the boot entries on this iLO; the
    # boot entries' names (Slot 3/7/8/25/26) are what is used.
    assert {ports[m]["pcie_slot"] for m in ("58:a2:e1:03:a8:e2", "88:e9:a4:45:45:f2",
                                            "88:e9:a4:4c:4e:f8", "88:e9:a4:45:35:de",
                                            "88:e9:a4:4c:5e:08")} == {
        "Slot 3", "Slot 7", "Slot 8", "Slot 25", "Slot 26"}
    assert facts.provisioning_mac is None
    _bmc, facts = discover(tree("dl380a-g12"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "58:a2:e1:03:a8:e2"


def test_supermicro_gb300_tray_ports_from_boot_options_refused_with_the_rule_to_write(tmp_path):
    _bmc, facts = discover(tree("smc-gb300"), tmp_path)
    ports = explained(facts)
    # The BMC's USB host interface (locally administered e2:1b:99:...) is not a host port.
    assert "e2:1b:99:34:1f:c4" not in ports
    assert ports["7c:c2:55:91:1a:b2"]["boot_options"][0].startswith("Boot0002")
    assert facts.provisioning_mac is None
    assert "{port_id: 7CC255911AB2}" in facts.extra["provisioning_nic_hint"]
    assert facts.bmc_firmware == "70.01.00.09" and facts.drives
    _bmc, facts = discover(tree("smc-gb300"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "7c:c2:55:91:1a:b2"  # the I210, first in port order
    assert any("reports no link state" in w for w in facts.extra["warnings"])


def test_supermicro_x10_onboard_by_port_name_and_missing_services_are_warnings(tmp_path):
    _bmc, facts = discover(tree("smc-x10"), tmp_path)
    lan1 = explained(facts)["ac:1f:6b:18:a4:5a"]
    assert lan1["location"] == "embedded" and lan1["location_from"] == "port name 'OnBoard LAN 1'"
    assert facts.provisioning_mac == "ac:1f:6b:18:a4:5a"  # chosen with a no-link-state warning
    warnings = facts.extra["warnings"]
    assert any("reports no link state" in w for w in warnings)
    assert any("/redfish/v1/UpdateService" in w for w in warnings)
    assert any(w.startswith("identity: no SerialNumber") for w in warnings)
    assert facts.firmware == {} and facts.bmc_firmware == "4.0"


def test_dmtf_smartnic_the_dpu_system_is_not_a_second_host(tmp_path):
    _bmc, facts = discover(tree("dmtf-smartnic"), tmp_path)
    assert facts.extra["system_path"] == "/redfish/v1/Systems/437XR1138R2"
    assert (facts.manufacturer, facts.serial) == ("Contoso", "437XR1138R2")
    assert not any("host Systems" in w for w in facts.extra["warnings"])


def test_dmtf_bladed_names_every_blade_the_bmc_serves(tmp_path):
    _bmc, facts = discover(tree("dmtf-bladed"), tmp_path)
    assert facts.serial == "529QB9450R6"
    assert any("4 host Systems (529QB9450R6, 529QB9451R6, 529QB9452R6, 529QB9453R6)" in w
               for w in facts.extra["warnings"])


def test_dmtf_tower_network_daughter_card_is_onboard(tmp_path):
    _bmc, facts = discover(tree("dmtf-tower"), tmp_path)
    port = explained(facts)["00:0c:29:9a:98:ed"]
    assert port["location"] == "ocp" and "NIC Daughter Card" in port["location_from"]
    assert facts.provisioning_mac == "00:0c:29:9a:98:ed"  # link unknown: with a warning
    assert any("reports no link state" in w for w in facts.extra["warnings"])


def test_ilo7_ocp_port_named_by_its_boot_entry_is_chosen_and_the_bad_clock_shows(tmp_path):
    _bmc, facts = discover(tree("alletra"), tmp_path)
    port = explained(facts)["8c:84:74:ec:42:7c"]
    assert port["location"] == "ocp" and port["pcie_slot"] == "OCP Slot A"
    assert facts.provisioning_mac == "8c:84:74:ec:42:7c"  # link unknown: with a warning
    assert any("reports no link state" in w for w in facts.extra["warnings"])
    assert facts.clock_skew_s is not None and abs(facts.clock_skew_s) > 365 * 86400  # 2001


def test_ex235n_served_with_its_recorded_error_answers_warns_naming_each_path(tmp_path):
    # The capture as recorded: the failed reads' error answers sit at the resources' paths and
    # sushy-static serves them with 200. They are failed reads, named, not empty collections.
    copy = tmp_path / "tree"
    shutil.copytree(tree("ex235n"), copy)
    errors = tree("ex235n").parent / "recorded-errors"
    shutil.copytree(errors, copy, dirs_exist_ok=True)
    _bmc, facts = discover(copy, tmp_path)
    warnings = facts.extra["warnings"]
    path = "/redfish/v1/Chassis/Node0/NetworkAdapters/HPCNet0/NetworkDeviceFunctions"
    assert any(path in w and "Redfish error instead of the resource" in w
               and "ResourceMissingAtURI" in w for w in warnings)
    assert facts.serial == "DP20300012" and facts.extra["nic_explain"]["ports"]


def test_a_chassis_controller_is_refused_as_no_host_bmc(tmp_path):
    # HPE Cray EX CMM: its service root has no Systems (a chassis, not a host).
    from provisioner.bmc.factory import open_redfish
    from provisioner.redfish.errors import BMCNotFound
    from provisioner.secrets import Secret
    from provisioner.testing.redfish_peers import sushy_static
    from tests.support.redfish_trees import OPTS

    root = corpus_path("redfish", "hpe-cray-ex-chassis-cmm-csm", "mockup")
    with sushy_static(root, tmp_path) as url, pytest.raises(BMCNotFound) as caught:
        open_redfish(url, "root", Secret("calvin"), OPTS)
    assert "no Systems in its service root" in str(caught.value)
    assert "host's own BMC" in (caught.value.hint or "")


def _discover_node(key: str, tmp_path, system_id: str):
    from provisioner.bmc.factory import open_redfish
    from provisioner.secrets import Secret
    from provisioner.testing.redfish_peers import sushy_static
    from tests.support.redfish_trees import ONBOARD, OPTS

    with sushy_static(tree(key), tmp_path) as url:
        policy = NicPolicy(rule=ONBOARD)
        bmc = open_redfish(url, "root", Secret("calvin"), OPTS, boot_port=policy.choose,
                           system_id=system_id)
        try:
            facts = bmc.discover()
            apply_nic_policy(facts, policy)
            return bmc, facts
        finally:
            bmc.close()


def test_bmc_system_picks_the_node_of_a_shared_bmc(tmp_path):
    """`bmc.system` in the site file: the second node of a two-node blade is read as itself."""
    bmc, facts = _discover_node("twonode", tmp_path, "Node1")
    assert bmc.system_path().endswith("/Systems/Node1")
    assert facts.serial == "PRJNODE1"
    assert facts.provisioning_mac == "02:00:5e:41:00:02"  # Node1's LOM that has link
    assert not any("host Systems" in w for w in facts.extra["warnings"])
    # The real EX235n recording: its two nodes carry one blade serial but are told apart.
    bmc, _facts = _discover_node("ex235n", tmp_path, "node1")  # Ids compare without case
    assert bmc.system_path().endswith("/Systems/Node1")


def test_bmc_system_that_the_bmc_does_not_list_is_refused_with_the_ids(tmp_path):
    from provisioner.redfish.errors import BMCNotFound

    with pytest.raises(BMCNotFound) as e:
        _discover_node("twonode", tmp_path, "Node2")
    assert "Node0, Node1" in str(e.value) and "bmc.system" in str(e.value)
