"""The findings of issue #28 on servers this repository has no recording of, each on a tree
written in that server's layout (tests/fixtures/corpus/redfish/project-cisco-cimc, see its
PROVENANCE.md) or on the recording that shows it (the GB200 tray's USB host interface),
served by sushy-static."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.redfish_trees import FIRST_UP, ONBOARD, discover, explained, tree

LOM1, LOM2 = "02:00:5e:50:00:01", "02:00:5e:50:00:02"
VIC0, SLOT1 = "02:00:5e:50:00:10", "02:00:5e:50:00:20"
FC0, FC1 = "02:00:5e:50:00:18", "02:00:5e:50:00:19"


def test_cisco_lom_ports_are_onboard_and_the_cabled_one_beats_the_vic(tmp_path):
    _bmc, facts = discover(tree("cisco"), tmp_path)
    ports = explained(facts)
    # L.* sit on PCIeDevices/L, the onboard I350: embedded, no longer "onboard unknown".
    assert (ports[LOM1]["location"], ports[LOM1]["onboard"]) == ("embedded", True)
    assert "PCIeDevices/L" in ports[LOM1]["location_from"]
    assert "I350" in ports[LOM1]["location_from"]
    # The VIC in the modular-LOM slot is onboard too (an OCP-like slot), its link unknown.
    assert (ports[VIC0]["location"], ports[VIC0]["onboard"]) == ("ocp", True)
    assert ports[VIC0]["link"] == "unknown"
    assert (ports[SLOT1]["location"], ports[SLOT1]["onboard"]) == ("slot", False)
    # The site is cabled on the LOM: its MAC gets the DHCP reservation, not the VIC's.
    assert facts.provisioning_mac == LOM1
    assert ports[LOM2]["why_not"] == ["link down"]
    assert ports[VIC0]["why_not"] == ["L.1 comes first (link unknown)"]


def test_cisco_first_up_link_up_beats_an_earlier_port_whose_link_is_unknown(tmp_path):
    _bmc, facts = discover(tree("cisco"), tmp_path, FIRST_UP)
    ports = explained(facts)
    # "1.0" sorts before "L.1" and reports no link: the port saying link up still wins.
    ordered = [p["id"] for p in facts.extra["nic_explain"]["ports"]]
    assert ordered.index("1.0") < ordered.index("L.1")
    assert facts.provisioning_mac == LOM1
    assert ports[SLOT1]["why_not"] == ["L.1 comes first (link unknown)"]
    assert not facts.extra["nic_explain"]["warnings"]


def test_cisco_fcoe_functions_are_listed_but_never_candidates(tmp_path):
    _bmc, facts = discover(tree("cisco"), tmp_path, FIRST_UP)
    ports = explained(facts)
    for mac in (FC0, FC1):
        assert ports[mac]["excluded"].startswith("a Fibre Channel over Ethernet function")
        assert ports[mac]["why_not"][0].startswith("never a PXE port")


def _without_ethernet_vnics(tmp: Path) -> Path:
    """A copy of the Cisco tree left with only the VIC's FCoE functions as ports."""
    copy = tmp / "tree"
    shutil.copytree(tree("cisco"), copy)
    shutil.rmtree(copy / "Systems" / "WZPPRJ0001" / "EthernetInterfaces")
    system = copy / "Systems" / "WZPPRJ0001" / "index.json"
    body = json.loads(system.read_text())
    del body["EthernetInterfaces"]
    system.write_text(json.dumps(body))
    functions = copy / "Chassis" / "1" / "NetworkAdapters" / "UCSC-MLOM-C25Q-04" / \
        "NetworkDeviceFunctions"
    for name in ("eth0", "eth1"):
        shutil.rmtree(functions / name)
    listing = json.loads((functions / "index.json").read_text())
    listing["Members"] = [m for m in listing["Members"]
                          if m["@odata.id"].rsplit("/", 1)[1].startswith("fc")]
    listing["Members@odata.count"] = len(listing["Members"])
    (functions / "index.json").write_text(json.dumps(listing))
    return copy


def test_cisco_with_only_fcoe_functions_neither_rule_chooses_fc0(tmp_path):
    root = _without_ethernet_vnics(tmp_path)
    for rule in (ONBOARD, FIRST_UP):
        logs = tmp_path / str(rule.rule)
        logs.mkdir()
        _bmc, facts = discover(root, logs, rule)
        assert {n.mac for n in facts.nics} == {FC0, FC1}
        assert facts.provisioning_mac is None
        assert "no port matches" in facts.extra["provisioning_nic_error"]
        assert "no Ethernet port that can network-boot" in facts.extra["provisioning_nic_hint"]


def test_gb200_usb_host_interface_is_not_a_host_nic(tmp_path):
    _bmc, facts = discover(tree("gb200"), tmp_path, FIRST_UP)
    macs = {n.mac for n in facts.nics}
    # .../USB(0x4,0x0)/USB(0x0,0x0)/MAC(EEA3AB6B5303,0x1): locally administered, over USB.
    assert "ee:a3:ab:6b:53:03" not in macs
    assert "f4:4d:ad:02:27:62" in macs  # a USB NIC with a vendor MAC: listed, excluded
    assert facts.provisioning_mac == "d0:f4:05:43:95:04"
