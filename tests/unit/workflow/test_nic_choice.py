"""Choosing the provisioning NIC: one match or a loud, per-host failure."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from provisioner.bmc.base import NicPort
from provisioner.exceptions import InputError
from provisioner.inventory import NicRule
from provisioner.workflow.nic_choice import (
    AmbiguousProvisioningNic,
    ProvisioningNicError,
    choice_to_dict,
    explain_selection,
    pinned_port,
    select_provisioning_nic,
)

PORTS = [
    NicPort("NIC.Slot.5-1", "b8:3f:d2:90:97:c4", link_up=True, onboard=False),
    NicPort("NIC.Embedded.2-1-1", "70:b5:e8:f0:52:dd", link_up=True, onboard=True),
    NicPort("NIC.Embedded.1-1-1", "70:b5:e8:f0:52:dc", link_up=False, onboard=True),
    NicPort("NIC.Integrated.1-10-1", "e4:3d:1a:13:27:f2", link_up=True, onboard=True),
    NicPort("NIC.Integrated.1-2-1", "e4:3d:1a:13:27:f1", name="eno2", link_up=True,
            onboard=True),
]


def test_port_id():
    assert select_provisioning_nic(PORTS, NicRule(port_id="NIC.Embedded.1-1-1")).mac == \
        "70:b5:e8:f0:52:dc"


def test_port_id_prefix_matches_partitions():
    assert select_provisioning_nic(PORTS, NicRule(port_id="NIC.Slot.5")).id == "NIC.Slot.5-1"


def test_name():
    assert select_provisioning_nic(PORTS, NicRule(name="eno2")).id == "NIC.Integrated.1-2-1"


def test_mac_prefix_unique_and_ambiguous():
    assert select_provisioning_nic(PORTS, NicRule(mac_prefix="b8:3f:d2")).id == "NIC.Slot.5-1"
    with pytest.raises(AmbiguousProvisioningNic) as info:
        select_provisioning_nic(PORTS, NicRule(mac_prefix="70:b5:e8"))
    assert info.value.reason == "several PXE NICs matched"
    assert "70:b5:e8:f0:52:dc" in str(info.value) and "70:b5:e8:f0:52:dd" in str(info.value)


def test_first_onboard_up_uses_natural_port_order():
    # Embedded.1 is down, so Embedded.2 is the first onboard port that is up; "1-2" sorts
    # before "1-10" naturally, but Embedded sorts before Integrated.
    assert select_provisioning_nic(PORTS, NicRule(rule="first-onboard-up")).id == \
        "NIC.Embedded.2-1-1"
    integrated = [p for p in PORTS if "Integrated" in p.id]
    assert select_provisioning_nic(integrated, NicRule(rule="first-onboard-up")).id == \
        "NIC.Integrated.1-2-1"


def test_no_match_names_the_rule_and_the_ports():
    with pytest.raises(ProvisioningNicError) as info:
        select_provisioning_nic(PORTS, NicRule(mac_prefix="52:54:00"))
    assert info.value.reason == "no PXE NIC matched"
    assert "mac_prefix=52:54:00" in str(info.value)
    assert "NIC.Slot.5-1" in str(info.value)
    with pytest.raises(ProvisioningNicError, match="ports seen: none"):
        select_provisioning_nic([], NicRule(rule="first-onboard-up"))


@dataclass
class Rule:
    port_id: str | None = None
    name: str | None = None
    mac_prefix: str | None = None
    rule: str | None = None


def test_rule_objects_that_bypass_the_inventory_are_checked():
    with pytest.raises(InputError, match="empty"):
        select_provisioning_nic(PORTS, Rule())
    with pytest.raises(InputError, match="unknown provisioning_nic rule"):
        select_provisioning_nic(PORTS, Rule(rule="fastest"))
    assert select_provisioning_nic(PORTS, Rule(rule="first-up")).id == "NIC.Embedded.2-1-1"


def test_pinned_mac():
    assert pinned_port(PORTS, "B8-3F-D2-90-97-C4").id == "NIC.Slot.5-1"
    with pytest.raises(ProvisioningNicError, match="not among the host's ports"):
        pinned_port(PORTS, "52:54:00:00:00:01")


# -- facts-based rules: unknown link, exclusions, the verdict of every port -----------------

LOM = NicPort("eno1", "02:00:5e:00:00:01", onboard=True, location="embedded",
              location_from="adapter Location Embedded")
LOM_DOWN = NicPort("eno2", "02:00:5e:00:00:02", link_up=False, onboard=True,
                   location="embedded")
ADDIN_UP = NicPort("ens3f0", "02:00:5e:00:00:03", link_up=True, onboard=False,
                   location="slot", location_from="adapter Location Slot 'PCIe Slot 3'")
USB = NicPort("usb0", "02:00:5e:00:00:04", link_up=True, onboard=False, location="usb",
              excluded="a USB network device")
NOWHERE = NicPort("eth9", "02:00:5e:00:00:09", link_up=True)


def test_unknown_link_is_accepted_with_a_warning_when_nothing_is_up():
    choice = explain_selection([LOM_DOWN, LOM, ADDIN_UP], NicRule(rule="first-onboard-up"))
    assert choice.port == LOM
    assert "reports no link state" in choice.warnings[0]
    verdicts = {v.port.id: v for v in choice.verdicts}
    assert verdicts["eno2"].reasons == ("link down",)
    assert verdicts["ens3f0"].reasons[0].startswith("not onboard (slot, from adapter Location")


def test_a_port_with_link_up_beats_an_earlier_one_with_unknown_link():
    up = NicPort("eno5", "02:00:5e:00:00:05", link_up=True, onboard=True)
    choice = explain_selection([LOM, up], NicRule(rule="first-onboard-up"))
    assert choice.port == up and not choice.warnings
    assert {v.port.id: v.reasons for v in choice.verdicts}["eno1"] == (
        "eno5 comes first (link unknown)",)


def test_link_down_never_matches_a_first_rule():
    with pytest.raises(ProvisioningNicError):
        select_provisioning_nic([LOM_DOWN], NicRule(rule="first-up"))


def test_excluded_ports_never_match_a_rule_but_a_pinned_id_may_name_them():
    assert select_provisioning_nic([USB, ADDIN_UP], NicRule(rule="first-up")) == ADDIN_UP
    assert select_provisioning_nic([USB, ADDIN_UP], NicRule(port_id="usb0")) == USB


def test_refusal_names_candidates_and_the_rule_to_write():
    with pytest.raises(ProvisioningNicError) as info:
        select_provisioning_nic([LOM_DOWN, ADDIN_UP, NOWHERE, USB],
                                NicRule(rule="first-onboard-up"))
    text = str(info.value)
    assert "rule=first-onboard-up" in text
    assert "eno2 02:00:5e:00:00:02 embedded link=down" in text
    assert "ens3f0 02:00:5e:00:00:03 slot link=up" in text
    assert info.value.hint and "{port_id: ens3f0}" in info.value.hint
    assert "{rule: first-up}" in info.value.hint
    assert {p.id for p in info.value.candidates} == {"eno2", "ens3f0", "eth9", "usb0"}
    verdicts = {v.port.id: v.reasons for v in
                explain_selection([NOWHERE, USB], NicRule(rule="first-onboard-up")).verdicts}
    assert verdicts["eth9"] == ("onboard unknown: the BMC says nowhere where this port sits",)
    assert verdicts["usb0"] == ("never a PXE port: a USB network device",)


def test_refusal_without_any_link_up_says_to_cable_and_names_a_port():
    with pytest.raises(ProvisioningNicError) as info:
        select_provisioning_nic([LOM_DOWN], NicRule(rule="first-onboard-up"))
    assert info.value.hint and "cable or enable" in info.value.hint
    assert "{port_id: eno2}" in info.value.hint


def test_choice_as_json_carries_every_fact():
    data = choice_to_dict(explain_selection([LOM, ADDIN_UP], NicRule(rule="first-up")))
    assert data["chosen"] == "02:00:5e:00:00:03" and data["error"] is None
    ports = {p["id"]: p for p in data["ports"]}
    assert ports["ens3f0"]["chosen"] is True
    assert ports["eno1"]["link"] == "unknown"
    assert ports["eno1"]["location_from"] == "adapter Location Embedded"
    assert ports["eno1"]["why_not"] == ["ens3f0 comes first (link unknown)"]


def test_inventory_accepts_every_rule_nic_select_implements():
    from provisioner.workflow.nic_choice import KNOWN_RULES

    for rule in KNOWN_RULES:
        assert NicRule(rule=rule).rule == rule
