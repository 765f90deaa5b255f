"""Discovery and control on a DGX H100 tree where one property has the wrong JSON type.

Each tree is the recorded DGX H100 (``nvidia-dgx-h100-libredfish``) with one edit written here
(an object where a string belongs, a string where an object does, ...), served by sushy-static.
A BMC may send anything: the answer is facts without the broken value, or a typed error,
never a Python exception.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provisioner.bmc.base import BootTarget
from provisioner.bmc.factory import open_redfish
from provisioner.bmc.vendors.nvidia import NvidiaBMC
from provisioner.inventory import NicRule
from provisioner.redfish.client import ClientOptions
from provisioner.redfish.errors import RedfishError
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import sushy_static
from provisioner.workflow.nic_choice import NicPolicy, apply_nic_policy
from tests.conftest import corpus_path

OPTS = ClientOptions(verify_tls=False, timeout_s=5, retries=0)
SYSTEM = "Systems/DGX"

Edit = Callable[[dict[str, Any]], None]


def _set(key: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        doc[key] = value
    return edit


def _reset_action(value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        doc["Actions"]["#ComputerSystem.Reset"] = value
    return edit


# (name, resource under redfish/v1, edit)
EDITS: list[tuple[str, str, Edit]] = [
    ("root-oem-list", "", _set("Oem", ["Ami"])),
    ("root-oem-string", "", _set("Oem", "Ami")),
    ("root-vendor-object", "", _set("Vendor", {"Name": "AMI"})),
    ("system-oem-string", SYSTEM, _set("Oem", "x")),
    ("system-boot-string", SYSTEM, _set("Boot", "Pxe")),
    ("system-boot-list", SYSTEM, _set("Boot", ["Pxe"])),
    ("system-actions-string", SYSTEM, _set("Actions", "x")),
    ("system-actions-list", SYSTEM, _set("Actions", [{"target": "/x"}])),
    ("system-reset-string", SYSTEM, _reset_action("x")),
    ("system-reset-target-object", SYSTEM, _reset_action({"target": {"a": 1}})),
    ("system-links-string", SYSTEM, _set("Links", "x")),
    ("system-settings-string", SYSTEM, _set("@Redfish.Settings", "x")),
    ("system-manufacturer-list", SYSTEM, _set("Manufacturer", ["NVIDIA"])),
]


def _tree(tmp: Path, resource: str, edit: Edit) -> Path:
    root = tmp / "tree"
    shutil.copytree(corpus_path("redfish", "nvidia-dgx-h100-libredfish", "mockup", "redfish",
                                "v1"), root)
    path = root / resource / "index.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return root


@pytest.mark.parametrize(("resource", "edit"), [(r, e) for _n, r, e in EDITS],
                         ids=[n for n, _r, _e in EDITS])
def test_a_property_of_the_wrong_type_is_never_an_exception(resource, edit, tmp_path):
    with sushy_static(_tree(tmp_path, resource, edit), tmp_path) as url:
        try:
            bmc = open_redfish(url, "root", Secret("calvin"), OPTS,
                               boot_port=NicPolicy(rule=NicRule(rule="first-onboard-up")).choose)
        except RedfishError:
            return  # a typed refusal is an answer
        try:
            facts = bmc.discover()
            assert facts.uuid and facts.serial == "1662923610124"
            bmc.allowed_boot_targets()
            try:
                bmc.reset_types()
                bmc.set_boot(BootTarget.PXE)  # sushy-static takes it and changes nothing
            except RedfishError:
                pass  # typed: the override is not read back, or there is no reset action
        finally:
            bmc.close()


def test_values_of_the_wrong_type_are_absent_not_their_repr(tmp_path):
    def edit(doc: dict[str, Any]) -> None:
        doc["SerialNumber"] = ["1662923610124"]
        doc["BiosVersion"] = {"Version": "1.0"}
        doc["Model"] = True
        doc["PowerState"] = "On\x00"

    with sushy_static(_tree(tmp_path, SYSTEM, edit), tmp_path) as url:
        bmc = open_redfish(url, "root", Secret("calvin"), OPTS)
        try:
            facts = bmc.discover()
        finally:
            bmc.close()
    assert isinstance(bmc, NvidiaBMC)
    assert facts.bios_version is None and facts.power_state == "On"
    # the System's own are unusable: the enclosure chassis's are taken, never
    # "['1662923610124']" or "True"
    assert (facts.serial, facts.model) == ("1663123000052", "DGXH100")
    assert facts.extra["identity_from"]["serial"] == "/redfish/v1/Chassis/DGX"


def test_absolute_links_to_the_bmc_itself_are_followed(tmp_path):
    # Written here: Systems lists its members as absolute URLs of the BMC (sushy-static reads
    # the files as asked, so the tree is edited once its address is known).
    root = _tree(tmp_path, "", lambda doc: None)
    with sushy_static(root, tmp_path) as url:
        listing = root / "Systems" / "index.json"
        doc = json.loads(listing.read_text())
        doc["Members"] = [{"@odata.id": f"{url}{m['@odata.id']}"} for m in doc["Members"]]
        listing.write_text(json.dumps(doc))
        bmc = open_redfish(url, "root", Secret("calvin"), OPTS)
        try:
            facts = bmc.discover()
            apply_nic_policy(facts, NicPolicy(rule=NicRule(rule="first-onboard-up")))
        finally:
            bmc.close()
    assert bmc.system_path() == "/redfish/v1/Systems/DGX"
    assert facts.serial == "1662923610124" and facts.provisioning_mac
