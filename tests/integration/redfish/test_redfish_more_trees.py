"""The provisioning NIC and warnings on the recordings added after the first vendor set.

Blade controllers serving several nodes (HPE Cray EX), a stock OpenBMC that names nothing, and
an Apollo 6500 with partitioned (NPAR) ports; served by sushy-static as in
``test_redfish_vendor_trees.py`` (whose ``TREES``/``IDENTITY`` hold their identity and MACs).
``project-two-node-blade`` is written by the project (see its PROVENANCE.md).
"""

from __future__ import annotations

from tests.integration.redfish.test_redfish_vendor_trees import (
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
