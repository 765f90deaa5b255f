"""Discovery and control against recorded real BMCs served over HTTP by sushy-static.

sushy-static answers every GET from the recording and accepts (204) every PATCH/POST without
changing anything: exactly a BMC that says yes and does nothing, which read-back must catch.
"""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.bmc.base import BootTarget, PowerAction
from provisioner.bmc.factory import open_redfish
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.bmc.vendors.dell import DellBMC
from provisioner.bmc.vendors.hpe import HpeBMC
from provisioner.bmc.vendors.nvidia import NvidiaBMC
from provisioner.bmc.vendors.supermicro import SupermicroBMC
from provisioner.inventory import NicRule
from provisioner.redfish.client import ClientOptions
from provisioner.redfish.errors import BMCUnsupported, BMCVerifyFailed
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import sushy_static
from provisioner.workflow.nic_choice import NicPolicy, apply_nic_policy
from tests.conftest import corpus_path

OPTS = ClientOptions(verify_tls=False, timeout_s=5, retries=0)

MOCKUPS = {
    "dell": ("dell-idrac9-poweredge-r750-ib-libredfish", "mockup/redfish/v1"),
    "supermicro": ("supermicro-sys-821ge-tnhr-hgx-h100-libredfish", "mockup/redfish/v1"),
    "hpe": ("hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish", "mockup/redfish/v1"),
    "dmtf": ("dmtf-public-rackmount1", "mockup"),
}


def _serve(name: str, tmp: Path) -> Iterator[str]:
    folder, sub = MOCKUPS[name]
    mockup = corpus_path("redfish", folder, *sub.split("/"))
    with sushy_static(mockup, tmp) as url:
        yield url


@pytest.fixture(scope="module", params=sorted(MOCKUPS))
def mockup(request, tmp_path_factory) -> Iterator[tuple[str, str]]:
    yield from ((request.param, url)
                for url in _serve(request.param, tmp_path_factory.mktemp(request.param)))


def open_mockup(url: str, nic_rule: NicRule | None = None, **kw) -> RedfishBMC:
    """The mockup's BMC; a network boot is aimed at the port ``nic_rule`` chooses."""
    chooser = NicPolicy(rule=nic_rule).choose if nic_rule else None
    return open_redfish(url, "root", Secret("calvin"), OPTS, boot_port=chooser, **kw)


EXPECTED = {
    "dell": (DellBMC, "CNIVC0014M0388", 5, 3, "6.00.30.00"),
    "supermicro": (SupermicroBMC, "S889914X3710910", 11, 8, "11.01.01"),
    "hpe": (HpeBMC, "MXQ302099S", 7, None, "iLO 5 v2.72"),
    "dmtf": (RedfishBMC, "437XR1138R2", 2, 2, "1.45.455b66-rev4"),  # bay 3 is Absent
}


def test_discovery_reads_every_mockup(mockup):
    name, url = mockup
    cls, serial, n_nics, n_drives, bmc_fw = EXPECTED[name]
    bmc = open_mockup(url)
    try:
        facts = bmc.discover()
    finally:
        bmc.close()
    assert type(bmc) is cls
    assert facts.serial == serial
    assert facts.manufacturer and facts.model and facts.uuid and facts.power_state == "On"
    assert facts.bios_version
    assert len(facts.nics) == n_nics
    assert all(n.mac == n.mac.lower() and len(n.mac) == 17 for n in facts.nics)
    if n_drives is not None:
        assert len(facts.drives) == n_drives
    else:
        assert facts.drives and all(d.serial for d in facts.drives)
    assert facts.bmc_firmware == bmc_fw
    assert facts.bmc_datetime is not None and facts.clock_skew_s is not None
    assert facts.clock_skew_s < -3600  # recorded long ago: a skew the rack must report
    assert facts.firmware
    assert facts.extra["allowed_boot_targets"]
    assert "ForceRestart" in facts.extra["reset_types"]


@pytest.fixture(scope="module")
def dell_url(tmp_path_factory) -> Iterator[str]:
    yield from _serve("dell", tmp_path_factory.mktemp("dell-only"))


def test_dell_keeps_infiniband_out_of_pxe_candidates(dell_url):
    url = dell_url
    bmc = open_mockup(url)
    facts = bmc.discover()
    bmc.close()
    apply_nic_policy(facts, NicPolicy(rule=NicRule(mac_prefix="b8:3f:d2")))
    assert [p["id"] for p in facts.extra["infiniband_ports"]] == [
        "InfiniBand.Slot.7-1", "InfiniBand.Slot.7-2"]
    # The ConnectX in slot 5 is the only Ethernet port with the Mellanox prefix.
    assert facts.provisioning_mac == "b8:3f:d2:90:97:c4"


def test_nic_rule_failure_is_reported_in_facts(mockup):
    _name, url = mockup
    bmc = open_mockup(url)
    facts = bmc.discover()
    bmc.close()
    apply_nic_policy(facts, NicPolicy(rule=NicRule(mac_prefix="52:54:00")))
    assert facts.provisioning_mac is None
    assert "no port matches" in facts.extra["provisioning_nic_error"]


def test_boot_override_accepted_but_not_applied_is_caught(mockup):
    _name, url = mockup
    bmc = open_mockup(url)
    try:
        with pytest.raises(BMCVerifyFailed, match="did not take effect"):
            bmc.set_boot(BootTarget.DISK)
    finally:
        bmc.close()


def test_boot_target_not_offered_is_refused(tmp_path):
    # The DMTF server offers UefiTarget but not UefiHttp.
    for url in _serve("dmtf", tmp_path):
        bmc = open_mockup(url)
        try:
            with pytest.raises(BMCUnsupported, match="UefiHttp is not offered"):
                bmc.set_boot(BootTarget.HTTP)
        finally:
            bmc.close()


def test_dell_network_boot_sets_bios_port_and_verifies(dell_url):
    url = dell_url
    # PxeDev1EnDis is Disabled in the recording: the PATCH is accepted, the job queue holds
    # only a completed job, the reboot is accepted, and reading back shows nothing changed.
    bmc = open_mockup(url, nic_rule=NicRule(port_id="NIC.Embedded.1-1-1"))
    assert isinstance(bmc, DellBMC)
    bmc.poll_interval_s = 0
    try:
        with pytest.raises(BMCVerifyFailed, match="PxeDev1EnDis") as info:
            bmc.set_boot(BootTarget.PXE)
    finally:
        bmc.close()
    assert "job queue" in str(info.value)


@pytest.mark.parametrize("name", sorted(MOCKUPS))
def test_power_actions_choose_allowed_reset_types(name, tmp_path):
    # sushy-static accepts any ResetType, so the request log is what shows the client's choice.
    for url in _serve(name, tmp_path):
        bmc = open_mockup(url)
        try:
            bmc.power(PowerAction.ON)  # already on: nothing sent
            bmc.power(PowerAction.OFF)
            bmc.power(PowerAction.RESTART)
        finally:
            bmc.close()
    posts = _reset_posts(next(tmp_path.glob("static-*.log")).read_text())
    assert [reset for _path, reset in posts] == ["ForceOff", "ForceRestart"]
    folder, sub = MOCKUPS[name]
    root = corpus_path("redfish", folder, *sub.split("/"))
    for path, reset in posts:
        assert reset in _allowed_reset_types(root, path), (path, reset)


def _reset_posts(log: str) -> list[tuple[str, str]]:
    """(action path, ResetType) of every Reset POST in a sushy-static log (body logged first)."""
    posts, body = [], None
    for line in log.splitlines():
        if line.startswith("Data: "):
            body = json.loads(ast.literal_eval(line[len("Data: "):]))
        elif '"POST ' in line and "Actions/ComputerSystem.Reset" in line:
            assert body is not None, line
            posts.append((line.split('"POST ', 1)[1].split(" ", 1)[0], body["ResetType"]))
            body = None
    return posts


def _allowed_reset_types(root: Path, action_path: str) -> set[str]:
    """The ResetType values the recording itself allows for that action."""
    def read(path: str) -> dict:
        rel = path.split("/redfish/v1", 1)[1].strip("/")
        return json.loads((root / rel / "index.json").read_text())

    system = read(action_path.split("/Actions/", 1)[0])
    action = system["Actions"]["#ComputerSystem.Reset"]
    if "ResetType@Redfish.AllowableValues" in action:
        return set(action["ResetType@Redfish.AllowableValues"])
    info = read(action["@Redfish.ActionInfo"])
    return {v for p in info["Parameters"] if p["Name"] == "ResetType"
            for v in p["AllowableValues"]}


def test_virtual_media_insert_is_verified(mockup):
    _name, url = mockup
    # iLO keeps its media under the Manager (no InsertMedia action there: PATCH is used).
    bmc = open_mockup(url)
    try:
        with pytest.raises(BMCVerifyFailed, match="after inserting"):
            bmc.insert_media("http://198.18.254.1:8080/boot.iso")
    finally:
        bmc.close()


def test_clock_set_but_not_applied_is_caught(mockup):
    _name, url = mockup
    bmc = open_mockup(url)
    try:
        with pytest.raises(BMCVerifyFailed, match="BMC clock reads"):
            bmc.set_clock()
    finally:
        bmc.close()


@pytest.fixture(scope="module")
def hpe(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The iLO 5 mockup and sushy-static's log of what it was sent."""
    log_dir = tmp_path_factory.mktemp("hpe-only")
    for url in _serve("hpe", log_dir):
        yield url, log_dir / f"static-{url.rsplit(':', 1)[1]}.log"


def test_hpe_network_boot_is_aimed_at_the_provisioning_port(hpe):
    url, log = hpe
    bmc = open_mockup(url, nic_rule=NicRule(mac_prefix="b8:3f:d2"))
    try:
        with pytest.raises(BMCVerifyFailed, match="not 'UefiTarget'"):
            bmc.set_boot(BootTarget.PXE)
    finally:
        bmc.close()
    sent = log.read_text()
    assert ('"UefiTargetBootSourceOverride": "PciRoot(0x7)/Pci(0x1,0x1)/Pci(0x0,0x0)/'
            'MAC(B83FD2D7F74A,0x1)/IPv4(0.0.0.0)"') in sent
    assert "BootSourceOverrideMode" not in sent  # iLO takes the mode from the BIOS


def test_hpe_without_a_nic_rule_falls_back_to_plain_pxe(hpe):
    url, log = hpe
    before = len(log.read_text())
    bmc = open_mockup(url)
    try:
        with pytest.raises(BMCVerifyFailed, match="not 'Pxe'"):
            bmc.set_boot(BootTarget.PXE)
        assert "network boot not aimed at a port" in bmc.warnings[0]
    finally:
        bmc.close()
    assert '"BootSourceOverrideTarget": "Pxe"' in log.read_text()[before:]


def test_hpe_port_without_uefi_boot_entries_is_left_to_the_boot_order(hpe):
    url, _log = hpe
    bmc = open_mockup(url, nic_rule=NicRule(port_id="3"))  # 50:7c:6f:11:f2:a8: no entries
    try:
        with pytest.raises(BMCVerifyFailed, match="not 'UefiHttp'"):
            bmc.set_boot(BootTarget.HTTP)
        assert bmc.warnings == [
            "0 UEFI boot entries for UefiHttp on the provisioning port: left to the boot order"]
    finally:
        bmc.close()


DGX = ("nvidia-dgx-h100-libredfish", "mockup", "redfish", "v1")


def _dgx_set_pxe(mockup: Path, log_dir: Path) -> tuple[NvidiaBMC, BMCVerifyFailed, str]:
    """Set a PXE override on a served DGX H100 tree; what the BMC class did and was sent."""
    with sushy_static(mockup, log_dir) as url:
        bmc = open_mockup(url)
        assert isinstance(bmc, NvidiaBMC)
        try:
            with pytest.raises(BMCVerifyFailed, match="not 'Pxe'") as info:
                bmc.set_boot(BootTarget.PXE)  # sushy-static takes the PATCH, changes nothing
        finally:
            bmc.close()
    return bmc, info.value, (log_dir / f"static-{url.rsplit(':', 1)[1]}.log").read_text()


def test_dgx_boot_override_goes_to_the_systems_settings_object(tmp_path):
    # The DGX H100 BMC (AMI) applies the override from Systems/DGX/SD, with that object's ETag.
    _bmc, error, sent = _dgx_set_pxe(corpus_path("redfish", *DGX), tmp_path)
    assert error.path == "/redfish/v1/Systems/DGX/SD"
    assert "PATCH /redfish/v1/Systems/DGX/SD " in sent
    assert "PATCH /redfish/v1/Systems/DGX " not in sent
    assert 'If-Match: "1720574208"' in sent  # SD's @odata.etag, not the System's
    assert '"BootSourceOverrideMode": "UEFI"' in sent


def test_dgx_without_its_settings_object_is_written_directly(tmp_path):
    # Written here: the same tree with Systems/DGX/SD missing (a 404 where the link points).
    tree = tmp_path / "tree"
    shutil.copytree(corpus_path("redfish", *DGX), tree)
    shutil.rmtree(tree / "Systems" / "DGX" / "SD")
    bmc, error, sent = _dgx_set_pxe(tree, tmp_path)
    assert error.path == "/redfish/v1/Systems/DGX"
    assert "PATCH /redfish/v1/Systems/DGX " in sent and 'If-Match: "1720039110"' in sent
    assert bmc.warnings == ["settings object /redfish/v1/Systems/DGX/SD not found: boot "
                            "override written to the System itself"]
