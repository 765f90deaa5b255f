"""The project's Redfish stand-ins checked against the standard, not against fixtures written
here: DMTF's Redfish Service Validator reads every resource each one serves (from the service
root down) and checks it against the DMTF schema bundle (tests/fixtures/redfish-csdl).

One instance each: the UpdateService peer (provisioner/testing/update_peer.py) offering every
update way with a task in flight, the BIOS peer (provisioner/testing/bios_peer.py) with a
registry and staged values, and the fault proxy (provisioner/testing/bmcproxy.py) serving its
own sessions in front of sushy-static with DMTF's public tower mockup (that recording has gaps
of its own: the proxy must add no failure to what the validator finds served directly).
"""

from __future__ import annotations

from pathlib import Path

from provisioner.testing.bios_peer import bios_peer
from provisioner.testing.redfish_peers import fault_proxy, sushy_static
from provisioner.testing.update_peer import Task, update_peer
from tests.support.redfish_trees import tree
from tests.support.validators import passed, service_validator

USER, PASSWORD = "admin", "Valid8-Pa55"


def _clean(verdict, least_passes: int) -> None:
    assert verdict.failures == [], "\n".join(verdict.failures[:40])
    passes, fails = passed(verdict)
    assert verdict.rc == 0 and fails == 0, verdict.output[-3000:]
    assert passes >= least_passes, verdict.output[-3000:]  # it really read the resources


def test_update_peer_passes_the_service_validator(tmp_path: Path) -> None:
    inventory = {"BMC": {"Name": "BMC", "Version": "1.0"},
                 "BIOS": {"Name": "BIOS", "Version": "1.0"}}
    with update_peer(USER, PASSWORD, inventory, methods=frozenset({"simple", "multipart", "push"}),
                     push_targets=[], simple_apply_times=("Immediate", "OnReset")) as peer:
        peer.tasks[1] = Task(id=1, target="BMC", version="2.0", error=None, on_reset=True)
        verdict = service_validator(peer.url, USER, PASSWORD, tmp_path)
    _clean(verdict, 80)
    assert any("/TaskService/Tasks/1" in p for _m, p, _h, _b in peer.seen)


REGISTRY = {
    "@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry", "Id": "BiosAttributeRegistry",
    "Name": "BIOS Attribute Registry", "Language": "en", "OwningEntity": "Contoso",
    "RegistryVersion": "1.0.0",
    "RegistryEntries": {"Attributes": [
        {"AttributeName": "SriovGlobalEnable", "Type": "Enumeration", "ReadOnly": False,
         "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]},
        {"AttributeName": "AcPwrRcvryUserDelay", "Type": "Integer", "LowerBound": 120,
         "UpperBound": 600, "ReadOnly": False}]}}


def test_bios_peer_passes_the_service_validator(tmp_path: Path) -> None:
    with bios_peer(USER, PASSWORD, {"SriovGlobalEnable": "Disabled", "AcPwrRcvryUserDelay": 120},
                   REGISTRY, pending={"SriovGlobalEnable": "Enabled"}) as peer:
        verdict = service_validator(peer.url, USER, PASSWORD, tmp_path)
    _clean(verdict, 40)


def test_fault_proxy_adds_no_failure_to_the_tree_it_serves(tmp_path: Path) -> None:
    """The recording has its own gaps (links to resources it did not capture, the mockup
    copyright): the proxy, logging the validator in through its own sessions, adds none."""
    with sushy_static(tree("dmtf-tower"), tmp_path) as upstream, \
            fault_proxy(upstream, tmp_path, args=["--sessions", "4"]) as (proxy,):
        direct = service_validator(upstream, "root", "calvin", _dir(tmp_path, "direct"))
        proxied = service_validator(proxy, "root", "calvin", _dir(tmp_path, "proxied"),
                                    authtype="Session")
    assert sorted(proxied.failures) == sorted(direct.failures)
    assert passed(proxied) == passed(direct) and passed(direct)[0] >= 200


def _dir(base: Path, name: str) -> Path:
    (base / name).mkdir()
    return base / name
