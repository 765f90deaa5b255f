"""Discovery and the provisioning-NIC choice on every vendor's recorded Redfish tree.

Each tree is served over HTTP by sushy-static, exactly as recorded (or as a copy in which only
the link state of the port an engineer would cable is set up, named so in the test). The trees
written by the project (``project-*``) vary what the recordings do not: a port with no link
state, adapters on a second chassis, MACs only in BootOptions, links that answer 404.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from provisioner.bmc.vendors.nvidia import NvidiaBMC
from provisioner.testing.redfish_peers import fault_proxy, make_tls, sushy_static
from tests.support.redfish_trees import (
    FIRST_UP,
    IDENTITY,
    discover,
    explained,
    tree,
    with_link_up,
)

# -- identity and MACs on every recording ----------------------------------------------------


@pytest.mark.parametrize("key", sorted(IDENTITY))
def test_identity_and_macs(key: str, tmp_path: Path):
    cls, manufacturer, model, serial, macs = IDENTITY[key]
    bmc, facts = discover(tree(key), tmp_path)
    assert isinstance(bmc, cls)
    assert (facts.manufacturer, facts.model, facts.serial) == (manufacturer, model, serial)
    assert {n.mac for n in facts.nics} == macs
    assert len({n.id for n in facts.nics}) == len(facts.nics), "port Ids must be unique"
    # Whatever the rule decided, --explain has a verdict for every port.
    assert {p["mac"] for p in facts.extra["nic_explain"]["ports"]} == macs


# -- the provisioning NIC as recorded ---------------------------------------------------------


def test_dgx_h100_onboard_rule_takes_the_cabled_in_band_connectx(tmp_path):
    _bmc, facts = discover(tree("dgx-h100"), tmp_path)
    # The in-band ConnectX-7 of the motherboard tray, the only port up; the firmware's
    # BootOrder starts with its PXE entry too.
    assert facts.provisioning_mac == "a0:88:c2:82:6e:52"
    ports = explained(facts)
    chosen = ports["a0:88:c2:82:6e:52"]
    assert chosen["chosen"] and chosen["location"] == "embedded"
    assert "in no PCIeSlots entry" in chosen["location_from"]
    assert chosen["boot_options"][0].startswith("Boot0026 UEFI: PXE IPv4")
    assert ports["5c:ff:35:fe:04:b1"]["why_not"] == ["link down"]  # the X550 LOM
    assert ports["6c:fe:54:41:15:78"]["location"] == "slot"  # E810 in "PCIe Slot 2"
    assert ports["6c:fe:54:41:15:78"]["pcie_slot"] == "PCIe Slot 2"
    assert ports["6c:fe:54:41:15:78"]["why_not"][0].startswith("not onboard (slot")


def test_dgx_h100_first_up_takes_the_cabled_connectx(tmp_path):
    _bmc, facts = discover(tree("dgx-h100"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "a0:88:c2:82:6e:52"
    assert explained(facts)["a0:88:c2:82:6e:52"]["chosen"] is True


def test_dgx_h100_copy_with_the_lom_cabled_picks_the_lom(tmp_path):
    root = with_link_up("dgx-h100", "5c:ff:35:fe:04:b1", tmp_path)
    _bmc, facts = discover(root, tmp_path)
    assert facts.provisioning_mac == "5c:ff:35:fe:04:b1"
    lom = explained(facts)["5c:ff:35:fe:04:b1"]
    assert lom["location"] == "embedded" and "no Location or SlotType" in lom["location_from"]


def test_dgx_h100_log_service_listed_among_systems_is_not_taken_for_the_host(tmp_path):
    # Written here, after a quirk NVIDIA's nv-redfish records for this BMC (its test
    # viking_with_garbage_in_computer_systems): Systems also lists
    # HGX_Baseboard_0/LogServices/FDR. Listed first, it used to become the "host".
    root = tmp_path / "tree"
    shutil.copytree(tree("dgx-h100"), root)
    fdr = "/redfish/v1/Systems/HGX_Baseboard_0/LogServices/FDR"
    listing = json.loads((root / "Systems" / "index.json").read_text())
    listing["Members"].insert(0, {"@odata.id": fdr})
    listing["Members@odata.count"] = 3
    (root / "Systems" / "index.json").write_text(json.dumps(listing))
    (root / fdr.removeprefix("/redfish/v1/")).mkdir(parents=True)
    (root / fdr.removeprefix("/redfish/v1/") / "index.json").write_text(json.dumps({
        "@odata.id": fdr, "@odata.type": "#LogService.v1_1_3.LogService", "Id": "FDR",
        "Name": "FDR LogService", "Entries": {"@odata.id": fdr + "/Entries"}}))
    bmc, facts = discover(root, tmp_path)
    assert isinstance(bmc, NvidiaBMC) and bmc.system_path() == "/redfish/v1/Systems/DGX"
    assert facts.serial == "1662923610124" and facts.provisioning_mac == "a0:88:c2:82:6e:52"
    assert not any("host Systems" in w for w in bmc.warnings)


def test_dgx_h100_stray_entry_among_managers_is_not_read_as_the_bmc(tmp_path):
    # Written here, after nv-redfish's filter of this BMC's Managers collection: a System
    # without ManagedBy, and a log service listed first among the Managers.
    _bmc, want = discover(tree("dgx-h100"), tmp_path)
    root = tmp_path / "tree"
    shutil.copytree(tree("dgx-h100"), root)
    system = json.loads((root / "Systems" / "DGX" / "index.json").read_text())
    del system["Links"]["ManagedBy"]
    (root / "Systems" / "DGX" / "index.json").write_text(json.dumps(system))
    stray = "/redfish/v1/Managers/BMC/LogServices/SEL"
    listing = json.loads((root / "Managers" / "index.json").read_text())
    listing["Members"].insert(0, {"@odata.id": stray})
    (root / "Managers" / "index.json").write_text(json.dumps(listing))
    (root / stray.removeprefix("/redfish/v1/")).mkdir(parents=True, exist_ok=True)
    (root / stray.removeprefix("/redfish/v1/") / "index.json").write_text(json.dumps({
        "@odata.id": stray, "@odata.type": "#LogService.v1_1_3.LogService", "Id": "SEL",
        "Name": "SEL", "DateTime": "2001-01-01T00:00:00+00:00"}))
    _bmc, got = discover(root, tmp_path)
    assert want.bmc_firmware and got.bmc_firmware == want.bmc_firmware


def test_dgx_h100_root_without_its_links_still_gives_every_fact(tmp_path, caplog):
    # Written here, after nv-redfish's note that this BMC at times drops every link of its
    # service root until it is reset: the standard URIs (DSP0266) are read instead.
    _bmc, want = discover(tree("dgx-h100"), tmp_path)
    root = tmp_path / "tree"
    shutil.copytree(tree("dgx-h100"), root)
    doc = json.loads((root / "index.json").read_text())
    for key in ("Systems", "Chassis", "Managers", "UpdateService", "Registries"):
        doc.pop(key, None)
    (root / "index.json").write_text(json.dumps(doc))
    _bmc, got = discover(root, tmp_path)
    assert got.serial == want.serial and got.provisioning_mac == want.provisioning_mac
    assert got.firmware == want.firmware and len(got.firmware) >= 60
    assert got.bmc_firmware == want.bmc_firmware and got.nics == want.nics
    assert "the service root links no Systems, but /redfish/v1/Systems answers" in caplog.text


def test_lenovo_ocp_ports_are_onboard_and_their_link_is_read(tmp_path):
    _bmc, facts = discover(tree("lenovo"), tmp_path)
    ports = explained(facts)
    nic1 = ports["00:62:0b:4c:28:4e"]
    # The OCP adapter in "PCIe 27": onboard; link LinkDown read through NetworkPorts/Ports.
    assert nic1["location"] == "ocp" and nic1["link"] == "down"
    assert "OCP Ethernet Adapter" in nic1["location_from"]
    assert facts.provisioning_mac is None
    assert "no candidate port reports link up" in facts.extra["provisioning_nic_hint"]


def test_lenovo_copy_with_nic1_cabled_picks_nic1(tmp_path):
    root = with_link_up("lenovo", "00:62:0b:4c:28:4e", tmp_path)
    _bmc, facts = discover(root, tmp_path)
    assert facts.provisioning_mac == "00:62:0b:4c:28:4e"


def test_lenovo_copy_with_only_the_adapter_port_saying_up_picks_nic1(tmp_path):
    # One view edited (Ports/1); EthernetInterfaces/NIC1 and NetworkPorts/1 still say down.
    copy = tmp_path / "tree"
    shutil.copytree(tree("lenovo"), copy)
    port = copy / "Chassis" / "1" / "NetworkAdapters" / "slot-27" / "Ports" / "1" / "index.json"
    body = json.loads(port.read_text())
    body["LinkStatus"] = "LinkUp"
    port.write_text(json.dumps(body))
    _bmc, facts = discover(copy, tmp_path)
    assert facts.provisioning_mac == "00:62:0b:4c:28:4e"


def test_bluefield_ports_are_on_the_card_and_p0_is_chosen(tmp_path):
    _bmc, facts = discover(tree("bluefield"), tmp_path)
    assert facts.provisioning_mac == "5c:25:73:08:f3:62"
    p0 = explained(facts)["5c:25:73:08:f3:62"]
    assert p0["location"] == "embedded" and "ChassisType Card" in p0["location_from"]
    assert p0["boot_options"][0] == "Boot0000 NET-NIC_P0-IPV4"


def test_gb200_pxe_macs_come_from_boot_options_and_usb_ones_are_excluded(tmp_path):
    _bmc, facts = discover(tree("gb200"), tmp_path)
    ports = explained(facts)
    # USB(0x4,0x0)/USB(0x0,0x0)/MAC(EEA3AB6B5303,...): a locally administered MAC over USB
    # is the BMC's host interface, not a host port; the USB NIC with a vendor MAC stays,
    # never a candidate.
    assert "ee:a3:ab:6b:53:03" not in ports
    assert ports["f4:4d:ad:02:27:62"]["excluded"].startswith("a USB network device")
    assert ports["d0:f4:05:43:95:04"]["boot_options"]
    assert facts.provisioning_mac is None
    assert "onboard unknown" in " ".join(ports["d0:f4:05:43:95:04"]["why_not"])
    assert "{port_id: D0F405439504}" in facts.extra["provisioning_nic_hint"]
    assert facts.extra["identity_from"]["serial"] == "/redfish/v1/Chassis/Chassis_0"


def test_gb200_first_up_accepts_unknown_link_with_a_warning(tmp_path):
    _bmc, facts = discover(tree("gb200"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "d0:f4:05:43:95:04"
    assert any("reports no link state" in w for w in facts.extra["warnings"])
    assert facts.extra["nic_explain"]["warnings"]


def test_dell_two_dpus_copy_with_the_lom_cabled_picks_it(tmp_path):
    _bmc, facts = discover(tree("dell-2dpu"), tmp_path)
    assert facts.provisioning_mac is None  # as recorded, both LOM ports are down
    root = with_link_up("dell-2dpu", "c8:4b:d6:7b:ab:92", tmp_path)
    _bmc, facts = discover(root, tmp_path)
    assert facts.provisioning_mac == "c8:4b:d6:7b:ab:92"
    assert explained(facts)["a0:88:c2:08:54:5c"]["location"] == "slot"  # a DPU


def test_hpe_ocp_port_from_base_network_adapters_with_unknown_link(tmp_path):
    _bmc, facts = discover(tree("hpe"), tmp_path)
    assert facts.provisioning_mac == "50:7c:6f:11:f2:a6"
    ports = explained(facts)
    assert ports["50:7c:6f:11:f2:a6"]["location"] == "ocp"
    assert "OCP.Slot.10.1" in ports["50:7c:6f:11:f2:a6"]["location_from"]
    assert ports["50:7c:6f:11:f2:a6"]["link"] == "unknown"
    assert ports["88:e9:a4:87:42:c8"]["excluded"] == "an InfiniBand function of a VPI adapter"
    assert any("no link state" in w for w in facts.extra["warnings"])


def test_hpe_dl325_ocp_port_with_link_up(tmp_path):
    _bmc, facts = discover(tree("dl325"), tmp_path)
    assert facts.provisioning_mac == "14:02:ec:d9:3a:a0"  # OCP slot 10 port 1, up
    ports = explained(facts)
    assert ports["94:40:c9:5c:86:bc"]["why_not"][0].startswith("not onboard (slot")
    assert ports["14:02:ec:d9:3a:a1"]["why_not"] == ["link down"]


def test_hpe_xl675d_has_only_add_in_nics_so_the_rule_refuses_and_first_up_works(tmp_path):
    _bmc, facts = discover(tree("xl675d"), tmp_path)
    assert facts.provisioning_mac is None
    assert "{rule: first-up}" in facts.extra["provisioning_nic_hint"]
    _bmc, facts = discover(tree("xl675d"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "98:03:9b:7f:c3:38"


def test_gigabyte_ports_without_location_or_link_are_named_in_the_refusal(tmp_path):
    _bmc, facts = discover(tree("gigabyte"), tmp_path)
    assert facts.provisioning_mac is None
    assert "{port_id: 1}" in facts.extra["provisioning_nic_hint"]  # Lan1, PXE entry exists
    _bmc, facts = discover(tree("gigabyte"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "b4:2e:99:ba:de:15"
    assert any("reports no link state" in w for w in facts.extra["warnings"])


# -- the project's own layouts ------------------------------------------------------------


def test_split_chassis_reads_the_riser_skips_the_other_system_and_warns_on_404s(tmp_path):
    _bmc, facts = discover(tree("split"), tmp_path)
    assert "02:00:5e:99:00:01" not in {n.mac for n in facts.nics}
    ports = explained(facts)
    lom = ports["02:00:5e:10:00:01"]
    assert lom["chosen"] and lom["link"] == "unknown" and lom["location"] == "embedded"
    assert ports["02:00:5e:20:00:01"]["id"] == "slot3/1"
    assert "not onboard (slot" in ports["02:00:5e:20:00:01"]["why_not"][0]
    warnings = facts.extra["warnings"]
    assert any("/redfish/v1/Chassis/riser/NetworkAdapters/gone" in w for w in warnings)
    assert any("/redfish/v1/Systems/host/Storage/nvme/Drives/1" in w for w in warnings)
    assert [d.serial for d in facts.drives] == ["PRJDISK0"]  # the other drive is kept


def test_split_chassis_first_up_takes_the_add_in_port_with_link(tmp_path):
    _bmc, facts = discover(tree("split"), tmp_path, FIRST_UP)
    assert facts.provisioning_mac == "02:00:5e:20:00:01"
    assert explained(facts)["02:00:5e:10:00:02"]["why_not"] == ["link down"]


def test_bootoptions_only_tree(tmp_path):
    _bmc, facts = discover(tree("bootonly"), tmp_path, FIRST_UP)
    assert facts.extra["identity_from"]["model"] == "/redfish/v1/Chassis/Tray_0"
    # Natural order of the port Ids (the MACs): ...01 before ...02; the USB one never.
    assert facts.provisioning_mac == "02:00:5e:30:00:01"
    ports = explained(facts)
    assert ports["02:00:5e:30:00:01"]["boot_options"] == [
        "Boot0001 UEFI PXEv4 (MAC:02005E300001)", "Boot0002 UEFI HTTPv4 (MAC:02005E300001)"]
    # Its USB entry (02:00:5e:30:00:ff, locally administered) is the BMC's host interface.
    assert "02:00:5e:30:00:ff" not in ports and len(ports) == 2


SITE = """site: explain
settings:
  redfish: {{verify_tls: false, timeout_s: 5, retries: 0}}
networks:
  provisioning: {{cidr: 198.18.0.0/24, reserved: ["198.18.0.1-198.18.0.99"]}}
credentials:
  bmc: {{username: root, password: {{env: EXPLAIN_BMC_PASSWORD}}}}
profiles:
  gpu:
    gpus: 0
    ib_hcas: 0
    units: 1
    provisioning_nic: {{rule: {rule}}}
racks:
  - name: r1
    index: 1
    units: 42
    host_name_template: "r1-u{{u:02d}}"
    defaults: {{profile: gpu, bmc: {{vendor: generic, credentials: bmc}}}}
    hosts:
      - {{u: 1, bmc: {{address: 127.0.0.1, port: {port}}}}}
"""


def _explain_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, rule: str,
                 *extra: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from provisioner.cli.main import app

    monkeypatch.setenv("EXPLAIN_BMC_PASSWORD", "calvin")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "80")
    # The inventory speaks HTTPS to BMCs: a TLS proxy (bmcproxy.py) fronts sushy-static.
    with sushy_static(tree(key), tmp_path) as plain, \
            fault_proxy(plain, tmp_path, tls=make_tls(tmp_path / "tls")) as (url,):
        site = tmp_path / "site.yml"
        site.write_text(SITE.format(rule=rule, port=url.rsplit(":", 1)[1]))
        result = CliRunner().invoke(app, ["discover", "--site", str(site), "--explain",
                                          "r1-u01", *extra])
    return result.exit_code, result.stdout, result.stderr


def test_cli_explain_shows_each_nic_and_the_verdict(tmp_path, monkeypatch):
    code, out, err = _explain_cli(tmp_path, monkeypatch, "split", "first-onboard-up")
    assert code == 0, err
    assert "provisioning NIC by rule=first-onboard-up" in out
    assert "chosen" in out and "slot3/1" in out and "not onboard" in out
    assert "location from /redfish/v1/Chassis/riser/NetworkAdapters/lom" in out
    assert "reports no link state" in err
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_cli_explain_screen_at_80_columns_on_a_terminal(tmp_path):
    # what a person sees (tmux, tests/support/terminal.py): the table's rows stay rows, the
    # verdict whole (#36 harness; item 7 cut reasons at their first colon)
    import os
    import sys

    from tests.support.terminal import Screen

    with sushy_static(tree("split"), tmp_path) as plain, \
            fault_proxy(plain, tmp_path, tls=make_tls(tmp_path / "tls")) as (url,):
        site = tmp_path / "site.yml"
        site.write_text(SITE.format(rule="first-onboard-up", port=url.rsplit(":", 1)[1]))
        keep = ("PATH", "HOME", "LANG", "LC_ALL")
        env = {**{k: os.environ[k] for k in keep if k in os.environ},
               "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
               "PROVISIONER_STATE_DIR": str(tmp_path / "state"),
               "EXPLAIN_BMC_PASSWORD": "calvin", "TERM": "xterm-256color"}
        argv = [str(Path(sys.executable).parent / "provision"), "discover", "--site", str(site),
                "--explain", "r1-u01"]
        with Screen(argv, env, tmp_path, rows=60) as screen:
            screen.wait_for("provisioning NIC by rule=first-onboard-up")
            code = screen.exit_code()
            rows = screen.lines()
    assert code == 0, rows
    text = "\n".join(rows)
    assert "chosen" in text and "slot3/1" in text and "not onboard" in text, text
    table = [r for r in rows if r[:1] in "┏┃┡│└"]
    assert table and table[-1].startswith("└"), text
    assert all(len(r) <= 80 for r in rows), text


def test_cli_explain_json_refusal_names_the_rule_to_write(tmp_path, monkeypatch):
    code, out, _err = _explain_cli(tmp_path, monkeypatch, "xl675d", "first-onboard-up",
                                  "--json")
    assert code != 0
    data = json.loads(out)
    assert data["host"] == "r1-u01" and data["chosen"] is None
    assert "{rule: first-up}" in data["hint"] and "{port_id: 1}" in data["hint"]
    by_mac = {p["mac"]: p for p in data["ports"]}
    assert by_mac["98:03:9b:7f:c3:38"]["location"] == "slot"
    assert by_mac["98:03:9b:7f:c3:38"]["link"] == "up"
    assert by_mac["98:03:9b:7f:c3:38"]["why_not"][0].startswith("not onboard (slot")
