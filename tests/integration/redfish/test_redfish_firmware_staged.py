"""A staged Dell update seen through `firmware check`'s reading: the running image (Current-...)
and the staged one (Installed-...) differ, and the running one is what the host runs.

Peer: sushy-static serving the real iDRAC9 R750 recording (dell-idrac9-r750-two-dpu-libredfish),
in a copy where the Installed- member of the embedded NIC is the staged 22.10.0 image (its Id,
link and Version say so, as iDRAC names them); the Current- member still runs 22.00.6.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from provisioner.bmc.factory import open_redfish
from provisioner.bmc.firmware_inventory import FirmwareComponent
from provisioner.inventory.spec import FirmwareRequirement
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import sushy_static
from provisioner.workflow.baseline import Status, firmware_items
from tests.support.redfish_trees import OPTS, tree

OLD, NEW = "22.00.6", "22.10.0"
MEMBER = "108255-{v}__NIC.Embedded.1-1-1"
NIC = FirmwareRequirement(component="*NIC.Embedded.1-1-1", version=NEW)


def staged_tree(tmp: Path) -> Path:
    copy = tmp / "tree"
    shutil.copytree(tree("dell-2dpu"), copy)
    inventory = copy / "UpdateService" / "FirmwareInventory"
    old, new = f"Installed-{MEMBER.format(v=OLD)}", f"Installed-{MEMBER.format(v=NEW)}"
    (inventory / old).rename(inventory / new)
    doc = inventory / new / "index.json"
    doc.write_text(doc.read_text().replace(OLD, NEW))
    listing = inventory / "index.json"
    assert old in listing.read_text()
    listing.write_text(listing.read_text().replace(old, new))
    return copy


def test_the_running_image_of_a_staged_update_is_drift(tmp_path: Path) -> None:
    with sushy_static(staged_tree(tmp_path), tmp_path) as url:
        bmc = open_redfish(url, "root", Secret("calvin"), OPTS)
        try:
            components = bmc.firmware.firmware_components()
        finally:
            bmc.close()
    nic = sorted((c.id.split("__")[0], c.version) for c in components
                 if c.id.endswith("NIC.Embedded.1-1-1"))
    assert nic == [(f"Current-108255-{OLD}", OLD), (f"Installed-108255-{NEW}", NEW)]
    items = firmware_items([NIC], components)
    assert sorted((i.have, i.status) for i in items) == [(OLD, Status.DRIFT), (NEW, Status.OK)]
    assert not all(i.compliant for i in items)


def test_a_running_and_an_installed_copy_of_one_image_are_judged_once() -> None:
    both = [FirmwareComponent(f"{kind}-{MEMBER.format(v=NEW)}", "Broadcom BCM5720", NEW)
            for kind in ("Current", "Installed")]
    (item,) = firmware_items([NIC], both)
    assert (item.have, item.status) == (NEW, Status.OK)


def test_a_staged_update_whose_copies_differ_keeps_both() -> None:
    have = [FirmwareComponent(f"Current-{MEMBER.format(v='21.80')}", "Broadcom BCM5720", "21.80"),
            FirmwareComponent(f"Installed-{MEMBER.format(v='22.10')}", "Broadcom BCM5720",
                              "22.10")]
    items = firmware_items([FirmwareRequirement(component="*NIC.Embedded.1-1-1", version="22.10")],
                           have)
    assert sorted((i.have, i.status) for i in items) == [("21.80", Status.DRIFT),
                                                         ("22.10", Status.OK)]
