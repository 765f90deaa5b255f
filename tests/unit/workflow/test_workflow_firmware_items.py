"""What the firmware baseline says about each component: the name it shows (the Id alone when
the BMC's Name is the Id, else "Name [Id]"), and the fix its hint gives for drift (the update
to the first allowed version when the baseline has an image, else how to add one)."""

from __future__ import annotations

import json

import pytest

from provisioner.bmc.firmware_inventory import FirmwareComponent
from provisioner.inventory.spec import FirmwareRequirement
from provisioner.workflow.baseline import Status, firmware_items

SHA = "a" * 64


def _component(doc: str) -> FirmwareComponent:
    """A component from BMC JSON: its strings are new objects, as from a real answer."""
    m = json.loads(doc)
    return FirmwareComponent(m["Id"], m["Name"], m["Version"])


def test_a_component_named_by_its_id_shows_the_id_alone() -> None:
    have = [_component('{"Id": "BMC", "Name": "BMC", "Version": "1.0"}')]
    (item,) = firmware_items([FirmwareRequirement(component="BMC", version="1.0")], have)
    assert (item.name, item.status) == ("BMC", Status.OK)


@pytest.mark.parametrize(("ident", "name"), [
    ("NIC.Slot.5-1", "Mellanox ConnectX-7"),  # the Name sorts before the Id
    ("159__iDRAC.Embedded.1-1", "Integrated Dell Remote Access Controller"),  # and after it
])
def test_a_component_with_its_own_name_shows_name_and_id(ident: str, name: str) -> None:
    have = [_component(json.dumps({"Id": ident, "Name": name, "Version": "7.10"}))]
    (item,) = firmware_items([FirmwareRequirement(component=ident, version="7.10")], have)
    assert item.name == f"{name} [{ident}]"


def test_a_required_component_the_bmc_does_not_list_says_so() -> None:
    want = [FirmwareRequirement(component="CPLD*", version="1"),
            FirmwareRequirement(component="PSU*", version="1", required=False)]
    missing, optional = firmware_items(want, [])
    assert (missing.status, missing.hint) == (
        Status.MISSING, "no FirmwareInventory member matches this component (Id or Name glob)")
    assert (optional.status, optional.hint) == (Status.OK, "")


def test_drift_with_an_image_names_the_update_to_the_first_allowed_version() -> None:
    have = [_component('{"Id": "BMC", "Name": "BMC", "Version": "1.0"}')]
    want = FirmwareRequirement(component="BMC", versions=["2.0", "1.9"],
                               image={"url": "http://repo/bmc-2.0.bin", "sha256": SHA})
    (item,) = firmware_items([want], have)
    assert item.status is Status.DRIFT
    assert item.hint == "provision firmware update brings it to 2.0"


def test_drift_without_an_image_says_how_to_add_one() -> None:
    have = [_component('{"Id": "BMC", "Name": "BMC", "Version": "1.0"}')]
    (item,) = firmware_items([FirmwareRequirement(component="BMC", version="2.0")], have)
    assert item.status is Status.DRIFT
    assert item.hint == "add `image: {url, sha256}` to the baseline to update it"


def test_a_compliant_component_has_no_hint_even_with_an_image() -> None:
    have = [_component('{"Id": "BMC", "Name": "BMC", "Version": "2.0"}')]
    want = FirmwareRequirement(component="BMC", version="2.0",
                               image={"url": "http://repo/bmc-2.0.bin", "sha256": SHA})
    (item,) = firmware_items([want], have)
    assert (item.status, item.hint) == (Status.OK, "")
