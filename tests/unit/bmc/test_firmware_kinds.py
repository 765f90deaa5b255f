"""Component kinds, update order, `Updateable: false` and a blade's shared components, from
the FirmwareInventory members recorded on real BMCs (pure logic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.bmc.firmware_inventory import FirmwareComponent, parse_component
from provisioner.bmc.firmware_kinds import Kind, classify, owner
from provisioner.inventory.model import BMCRef, Host
from provisioner.inventory.spec import FirmwareRequirement
from provisioner.workflow.firmware_plan import plan_host, scoped

CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus" / "redfish"
INVENTORIES = {
    "dgx": ("nvidia-dgx-h100-libredfish", "nvidia"),
    "smc": ("supermicro-sys-821ge-tnhr-hgx-h100-libredfish", "supermicro"),
    "xcc": ("lenovo-xcc-sr670v2-libredfish", "lenovo"),
    "hpe": ("hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish", "hpe"),
    "gb200": ("nvidia-gb200-nvl-tray-libredfish", "nvidia"),
    "bf3": ("nvidia-bluefield3-dpu-bmc-libredfish", "nvidia"),
    "dell": ("dell-idrac9-poweredge-r750-ib-libredfish", "dell"),
    "cray": ("hpe-cray-ex235n-a100-csm", "hpe"),
    "dmtf": ("dmtf-public-rackmount1", "generic"),
}


def _members(which: str) -> list[dict]:
    folder, _vendor = INVENTORIES[which]
    root = next(p for p in (CORPUS / folder).rglob("*") if p.is_dir()
                and p.name.lower() == "firmwareinventory")
    return [json.loads(f.read_text()) for f in sorted(root.glob("*/index.json"))]


def _components(which: str) -> dict[str, FirmwareComponent]:
    vendor = INVENTORIES[which][1]
    parsed = (parse_component(m, vendor) for m in _members(which))
    return {c.id: c for c in parsed if c is not None}


@pytest.mark.parametrize(("which", "ident", "kind"), [
    # Finding 1: DGX H100's host BMC and BIOS are named HostBMC_0/HostBIOS_0 (AMI's DeviceClass
    # says so); its ERoTs and the HGX baseboard's own BMC are devices.
    ("dgx", "HostBMC_0", Kind.BMC), ("dgx", "HostBIOS_0", Kind.BIOS),
    ("dgx", "EROT_BMC_0", Kind.DEVICE), ("dgx", "HGX_FW_BMC_0", Kind.DEVICE),
    ("dgx", "HGX_FW_GPU_SXM_1", Kind.DEVICE),
    # Supermicro NIC1..NIC10 link only a PCIeDevice; Lenovo's adapter links NetworkAdapters.
    ("smc", "NIC1", Kind.NIC), ("smc", "NIC10", Kind.NIC), ("smc", "BMC", Kind.BMC),
    ("smc", "BIOS", Kind.BIOS), ("smc", "GPU1", Kind.DEVICE),
    ("xcc", "Slot_15.Bundle", Kind.NIC), ("xcc", "BMC-Primary", Kind.BMC),
    ("xcc", "LXPM", Kind.DEVICE), ("xcc", "GPU1", Kind.DEVICE),
    # HPE lists no RelatedItem: iLO's DeviceClass, and its abbreviation "Eth Adptr".
    ("hpe", "1", Kind.BMC), ("hpe", "2", Kind.BIOS), ("hpe", "15", Kind.NIC),
    ("hpe", "19", Kind.NIC), ("hpe", "17", Kind.DEVICE),
    ("gb200", "FW_BMC_0", Kind.BMC), ("gb200", "CX7_0", Kind.NIC), ("gb200", "UEFI", Kind.BIOS),
    ("gb200", "HGX_FW_BMC_0", Kind.DEVICE),
    ("dell", "Installed-0-20.31.10.14__InfiniBand.Slot.7-1", Kind.NIC),
    ("dmtf", "BMC", Kind.BMC), ("dmtf", "BIOS", Kind.BIOS),
])
def test_component_kinds_from_redfish_first(which, ident, kind) -> None:
    component = _components(which)[ident]
    assert component.kind is kind, component.kind_from


def test_the_standard_decides_before_a_name() -> None:
    member = {"Id": "NIC_firmware_for_bmc", "Name": "BMC NIC", "Version": "1",
              "RelatedItem": [{"@odata.id": "/redfish/v1/Chassis/1/NetworkAdapters/0"}]}
    assert classify(member).kind is Kind.NIC
    assert classify(member).why == "RelatedItem /redfish/v1/Chassis/1/NetworkAdapters/0"


def _host(*reqs: FirmwareRequirement) -> Host:
    from provisioner.inventory.model import HostProfile
    from provisioner.inventory.spec import NicRule
    profile = HostProfile("p", 0, None, False, 0, None, 1, NicRule(rule="first-up"), None, None)
    return Host("h", "r1", 1, profile, BMCRef("127.0.0.1", None, "generic", "bmc", True, None),
                None, None, {}, firmware=reqs)


IMAGE = {"url": "http://x/fw.bin", "sha256": "ab" * 32}


def test_dgx_updates_its_bmc_first_then_its_bios() -> None:
    have = list(_components("dgx").values())
    plan = plan_host(_host(
        FirmwareRequirement(component="HostBIOS_0", version="9.9", image=IMAGE),
        FirmwareRequirement(component="HostBMC_0", version="9.9", image=IMAGE),
        FirmwareRequirement(component="PCIeSwitch_0", version="9.9", image=IMAGE)), have)
    assert [(s.component.id, s.order) for s in plan.steps] == [
        ("HostBMC_0", Kind.BMC), ("HostBIOS_0", Kind.BIOS), ("PCIeSwitch_0", Kind.DEVICE)]


@pytest.mark.parametrize(("which", "glob"), [
    ("gb200", "HGX_FW_GPU_1"), ("smc", "NIC[1-8]"), ("bf3", "DPU_NIC")])
def test_a_member_the_bmc_cannot_update_is_never_a_target(which, glob) -> None:
    # Finding 2: the plan pushed to members whose BMC says Updateable: false.
    have = list(_components(which).values())
    plan = plan_host(_host(FirmwareRequirement(component=glob, version="0.0", image=IMAGE)),
                     have)
    assert plan.steps == []
    assert plan.blocked and all("Updateable false" in b for b in plan.blocked)


def test_a_blade_bmc_keeps_each_nodes_components_to_it() -> None:
    # #32 item 2: on the HPE Cray EX235n BMC (Node0/Node1) node0's plan never names Node1's
    # BIOS, and what no node owns (the BMC, FPGAs) is shared.
    have = list(_components("cray").values())
    systems = ["Node0", "Node1"]
    assert owner("Node1.BIOS", "Node1.BIOS", (), systems) == "Node1"
    own, shared = scoped(have, "Node0", systems)
    assert {c.id for c in own} >= {"Node0.BIOS", "Node0.ManagementEthernet"}
    assert not any(c.id.startswith("Node1") for c in own + shared)
    assert {c.id for c in shared} >= {"BMC", "Recovery"}
    plan = plan_host(_host(FirmwareRequirement(component="*BIOS", version="0.0", image=IMAGE),
                           FirmwareRequirement(component="BMC", version="0.0", image=IMAGE)),
                     have, system="Node0", systems=systems)
    assert [s.component.id for s in plan.steps] == ["Node0.BIOS"]
    assert [s.component.id for s in plan.shared] == ["BMC"]
    assert plan.peers == ("Node1",)
