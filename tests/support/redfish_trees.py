"""The recorded vendor Redfish trees the Redfish tests read (tests/fixtures/corpus/redfish), the
identity each one holds, and discovery of one tree through sushy-static."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from provisioner.bmc.base import HostFacts
from provisioner.bmc.factory import open_redfish
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.bmc.vendors.cisco import CiscoBMC
from provisioner.bmc.vendors.dell import DellBMC
from provisioner.bmc.vendors.hpe import HpeBMC
from provisioner.bmc.vendors.lenovo import LenovoBMC
from provisioner.bmc.vendors.nvidia import NvidiaBMC
from provisioner.bmc.vendors.supermicro import SupermicroBMC
from provisioner.inventory import NicRule
from provisioner.redfish.client import ClientOptions
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import sushy_static
from provisioner.workflow.nic_choice import NicPolicy, apply_nic_policy
from tests.conftest import corpus_path

OPTS = ClientOptions(verify_tls=False, timeout_s=5, retries=0)
ONBOARD = NicRule(rule="first-onboard-up")
FIRST_UP = NicRule(rule="first-up")

TREES = {
    "dgx-h100": "nvidia-dgx-h100-libredfish",
    "lenovo": "lenovo-xcc-sr670v2-libredfish",
    "bluefield": "nvidia-bluefield3-dpu-bmc-libredfish",
    "gb200": "nvidia-gb200-nvl-tray-libredfish",
    "dell-2dpu": "dell-idrac9-r750-two-dpu-libredfish",
    "hpe": "hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish",
    "gh200": "nvidia-gh200-libredfish",
    "dl325": "hpe-ilo5-proliant-dl325-gen10plus-csm",
    "xl675d": "hpe-ilo5-proliant-xl675d-gen10plus-a100-csm",
    "gigabyte": "gigabyte-h262-z63-ami-csm",
    "intel": "intel-s2600bpb-csm",
    "split": "project-split-chassis",
    "bootonly": "project-bootoptions-only",
    "ex235n": "hpe-cray-ex235n-a100-csm",
    "xl675d-a40": "hpe-ilo5-proliant-xl675d-gen10plus-a40-csm",
    "openbmc": "openbmc-stock-csm",
    "twonode": "project-two-node-blade",
    "gbswitch": "nvidia-gb200-nvlink-switch-tray-libredfish",
    "dl380a-g11": "hpe-ilo6-proliant-dl380a-gen11-h100nvl-ilo-emulator",
    "dl380a-g12": "hpe-ilo7-proliant-dl380a-gen12-h200nvl-ilo-emulator",
    "smc-gb300": "supermicro-gb300-nvl-redfish-ctl",
    "smc-x10": "supermicro-x10sdv-redfish-ctl",
    "dmtf-smartnic": "dmtf-public-smartnic",
    "dmtf-bladed": "dmtf-public-bladed",
    "dmtf-tower": "dmtf-public-tower",
    "alletra": "hpe-ilo7-alletra-4220-gen12-ocp-ilo-emulator",
    "cisco": "project-cisco-cimc",
}


def tree(key: str) -> Path:
    base = corpus_path("redfish", TREES[key], "mockup")
    return base / "redfish" / "v1" if (base / "redfish" / "v1").is_dir() else base


def discover(root: Path, tmp: Path, rule: NicRule | None = ONBOARD
             ) -> tuple[RedfishBMC, HostFacts]:
    with sushy_static(root, tmp) as url:
        # The NIC choice is the workflow's, over the ports the BMC reports (as discovery does).
        policy = NicPolicy(rule=rule)
        bmc = open_redfish(url, "root", Secret("calvin"), OPTS, boot_port=policy.choose)
        try:
            facts = bmc.discover()
            apply_nic_policy(facts, policy)
            return bmc, facts
        finally:
            bmc.close()


def with_link_up(key: str, mac: str, tmp: Path) -> Path:
    """A copy of a tree in which the port with ``mac`` (every view of it) reports link up."""
    copy = tmp / "tree"
    shutil.copytree(tree(key), copy)
    bare = mac.replace(":", "").lower()
    port_links: set[str] = set()
    files = list(copy.rglob("index.json"))
    for path in files:
        text = path.read_text()
        if bare not in text.lower().replace(":", ""):
            continue
        body = json.loads(text)
        if "LinkStatus" in body:
            body["LinkStatus"] = "Up" if body["LinkStatus"] in ("Up", "Down") else "LinkUp"
            path.write_text(json.dumps(body))
        links = body.get("Links") or {}
        for key_ in ("PhysicalPortAssignment", "PhysicalNetworkPortAssignment"):
            if isinstance(links.get(key_), dict):
                port_links.add(links[key_]["@odata.id"].rstrip("/"))
    for path in files:
        body = json.loads(path.read_text())
        if str(body.get("@odata.id", "")).rstrip("/") in port_links and "LinkStatus" in body:
            body["LinkStatus"] = "Up" if body["LinkStatus"] in ("Up", "Down") else "LinkUp"
            path.write_text(json.dumps(body))
    return copy


def explained(facts: HostFacts) -> dict[str, dict]:
    return {p["mac"]: p for p in facts.extra["nic_explain"]["ports"]}


# Identity and MACs of every recording: (class, manufacturer, model, serial, host MACs).

IDENTITY = {
    "dgx-h100": (NvidiaBMC, "NVIDIA", "DGXH100", "1662923610124",
                 {"5c:ff:35:fe:04:b1", "6c:fe:54:41:15:78", "6c:fe:54:41:15:79",
                  "94:6d:ae:aa:2a:19", "a0:88:c2:82:6e:52"}),
    "lenovo": (LenovoBMC, "Lenovo", "ThinkSystem SR670 V2", "J105958B",
               {"00:62:0b:4c:28:4e", "00:62:0b:4c:28:4f", "00:62:0b:4c:28:50",
                "00:62:0b:4c:28:51"}),
    "bluefield": (NvidiaBMC, "https://www.mellanox.com", "BlueField-3 SmartNIC Main Card",
                  "MT2423600ANG", {"5c:25:73:08:f3:62", "5c:25:73:08:f3:63",
                                   "5c:25:73:08:f3:76"}),
    # The System has no identity: the tray chassis (Chassis_0, a Shelf) gives it.
    "gb200": (NvidiaBMC, "NVIDIA", "GB200 NVL", "1333024020524",
              {"d0:f4:05:43:95:04", "f4:4d:ad:02:27:62"}),
    "dell-2dpu": (DellBMC, "Dell Inc.", "PowerEdge R750", "MXFC40025U031S",
                  {"c8:4b:d6:7b:ab:92", "c8:4b:d6:7b:ab:93", "a0:88:c2:08:54:5c",
                   "a0:88:c2:0c:b8:04"}),
    "hpe": (HpeBMC, "HPE", "ProLiant DL385 Gen10 Plus v2", "MXQ302099S",
            {"50:7c:6f:11:f2:a6", "50:7c:6f:11:f2:a7", "50:7c:6f:11:f2:a8",
             "50:7c:6f:11:f2:a9", "88:e9:a4:87:42:c8", "88:e9:a4:80:9d:a2",
             "b8:3f:d2:d7:f7:4a"}),
    # No enclosure chassis and no model anywhere: what the baseboard System says.
    "gh200": (NvidiaBMC, "NVIDIA", None, "1580924760074",
              {"f0:b2:b9:0b:fc:9e", "f0:b2:b9:0b:fc:9f", "a0:88:c2:c7:a3:ce",
               "a0:88:c2:c7:b3:7e", "58:a2:e1:bb:b1:0e", "58:a2:e1:bb:b1:0f"}),
    "dl325": (HpeBMC, "HPE", "ProLiant DL325 Gen10 Plus", "MXQ019020B",
              {"94:40:c9:5c:86:bc", "94:40:c9:5c:86:bd", "14:02:ec:d9:3a:a0",
               "14:02:ec:d9:3a:a1"}),
    "xl675d": (HpeBMC, "HPE", "ProLiant XL675d Gen10 Plus", "JS05NP0896",
               {"98:03:9b:7f:c3:38", "98:03:9b:1e:de:fc", "b4:96:91:67:d8:e8",
                "b4:96:91:67:d8:e9", "b4:96:91:67:d8:ea", "b4:96:91:67:d8:eb"}),
    "gigabyte": (RedfishBMC, "GIGABYTE", "H262-Z63-00", "GJG9NF512A000302",
                 {"b4:2e:99:ba:de:15", "b4:2e:99:ba:de:16"}),
    "intel": (RedfishBMC, "Intel Corporation", "S2600BPB", "QSBP74100021", set()),
    "split": (RedfishBMC, "Example Systems", "EX-8GPU", "PRJ0001A",
              {"02:00:5e:10:00:01", "02:00:5e:10:00:02", "02:00:5e:20:00:01"}),
    "bootonly": (RedfishBMC, "Example Systems", "EX-TRAY", "PRJTRAY0",
                 {"02:00:5e:30:00:01", "02:00:5e:30:00:02"}),
    # Written after CIMC's layout: LOM L.*, VIC MLOM.* (+ its FCoE vHBAs fc0/fc1), slot 1.
    "cisco": (CiscoBMC, "Cisco Systems Inc", "UCSC-C240-M5SX", "WZPPRJ0001",
              {"02:00:5e:50:00:01", "02:00:5e:50:00:02", "02:00:5e:50:00:10",
               "02:00:5e:50:00:11", "02:00:5e:50:00:20", "02:00:5e:50:00:18",
               "02:00:5e:50:00:19"}),
    # One blade BMC, two nodes: Node0 is read; its Slingshot ports have no MAC.
    "ex235n": (HpeBMC, "HPE", "HPE Cray EX235n", "DP20300012", {"00:40:a6:84:d5:ea"}),
    "xl675d-a40": (HpeBMC, "HPE", "ProLiant XL675d Gen10 Plus", "JS05NP1072",
                   {f"94:40:c9:6a:42:{n:02x}" for n in range(0xda, 0xea)}
                   | {"b4:7a:f1:12:fb:70", "b4:7a:f1:12:fb:71"}),
    # Stock OpenBMC: no identity anywhere, no host port listed.
    "openbmc": (RedfishBMC, None, None, None, set()),
    # Node0 has no serial and must not take Node1's; Node1's ports are not Node0's.
    "twonode": (RedfishBMC, "Example Systems", "EX-2N", None,
                {"02:00:5e:40:00:01", "02:00:5e:40:00:02"}),
    # An NVLink switch tray of a GB200 NVL72 rack: identity, no host port over Redfish.
    "gbswitch": (NvidiaBMC, "NVIDIA", "N5110_LD", "MT2519600UDR", set()),
    # HPE marked these captures "SIMULATED" in the Model; the rest is as the iLO answered.
    "dl380a-g11": (HpeBMC, "HPE", "ProLiant DL380a Gen11 -- SIMULATED", "2M2D2J00L4",
                   {"58:a2:e1:03:96:f2", "58:a2:e1:03:96:f3"}),
    "dl380a-g12": (HpeBMC, "HPE", "HPE ProLiant Compute DL380a Gen12 -- SIMULATED",
                   "2M2D2Q02TH", {"58:a2:e1:03:a8:e2", "58:a2:e1:03:a8:e3", "88:e9:a4:45:45:f2",
                                  "88:e9:a4:4c:4e:f8", "88:e9:a4:45:35:de", "88:e9:a4:4c:5e:08"}),
    # Host MACs only in BootOptions (like the GB200 tray), the USB host interface among them.
    "smc-gb300": (SupermicroBMC, "Supermicro", "GB NVL", "S964512X5913271",
                  {"7c:c2:55:91:1a:b2", "e0:9d:73:ad:2d:42", "e0:9d:73:ad:2d:43"}),
    # Redfish 1.0.1: no SerialNumber, no UpdateService, no Storage.
    "smc-x10": (SupermicroBMC, "Supermicro", "Super Server", None,
                {"ac:1f:6b:18:a4:5a", "ac:1f:6b:18:a4:5b", "ac:1f:6b:18:a6:b2",
                 "ac:1f:6b:18:a6:b3"}),
    "alletra": (HpeBMC, "HPE", "HPE Alletra Storage Server 4220 Gen12 - SIMULATED", "SANJACSCM",
                {"8c:84:74:ec:42:7c", "8c:84:74:ec:42:7d", "8c:84:74:ec:42:7e",
                 "8c:84:74:ec:42:7f"}),
}
