"""Choosing the provisioning NIC: one match or a loud, per-host failure."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from provisioner.bmc.base import NicPort
from provisioner.bmc.nic_select import (
    AmbiguousProvisioningNic,
    ProvisioningNicError,
    pinned_port,
    select_provisioning_nic,
)
from provisioner.exceptions import InputError
from provisioner.inventory import NicRule

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
