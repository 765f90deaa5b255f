"""The lab's address and naming plan: the contract addresses (docs/lab.md) and its limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from netaddr import IPAddress, IPNetwork

from provisioner.exceptions import InputError
from provisioner.lab.plan import LabPlan, lab_slot, validate_netns


def test_default_plan_is_the_contract_address_plan():
    plan = LabPlan()
    assert plan.netns == "provlab"
    assert plan.provisioning_net == IPNetwork("198.18.0.0/24")
    assert plan.data_net == IPNetwork("198.18.1.0/24")
    assert plan.bmc_net == IPNetwork("198.19.0.0/24")
    assert plan.server_address == IPAddress("198.18.0.1")
    assert plan.host_uplink == "provlab-h"
    assert plan.host_uplink_address == IPAddress("198.18.254.1")
    assert plan.netns_uplink_address == IPAddress("198.18.254.2")
    assert plan.reserved_range == "198.18.0.1-198.18.0.99"
    host = plan.host(1)
    assert host.domain == "provlab-host01"
    assert host.name == "lab-host01"
    assert host.provisioning_mac == "52:54:00:18:00:01"
    assert host.data_mac == "52:54:00:18:01:01"
    assert host.bmc_address == IPAddress("198.19.0.11")
    assert host.bmc_port == 443
    assert host.credentials == "lab-bmc-01"
    assert plan.password_file(host) == Path("/var/lib/provisioner-lab/provlab/bmc-01.password")
    assert plan.host(12).provisioning_mac == "52:54:00:18:00:0c"


def test_root_disk_is_never_the_first_enumerated_and_serials_are_distinct():
    plan = LabPlan(disks=3)
    host = plan.host(2)
    assert host.disk_serials == ("PLAB-HOST02-DISK1", "PLAB-HOST02-DISK2", "PLAB-HOST02-DISK3")
    assert host.root_disk_serial == "PLAB-HOST02-DISK2"
    assert plan.disk_size_gib(2) > plan.disk_size_gib(1) == plan.disk_size_gib(3)
    single = LabPlan(disks=1).host(1)
    assert single.root_disk_serial == "PLAB-HOST01-DISK1"


def test_other_slots_move_every_network_and_never_overlap_slot_zero():
    zero, other = LabPlan(), LabPlan(netns="plabt", slot=3)
    for a in (*zero.routed_nets, zero.uplink_net):
        for b in (*other.routed_nets, other.uplink_net):
            assert a != b
    assert other.provisioning_net == IPNetwork("198.18.48.0/24")
    assert other.mac_prefix == "52:54:00:18:06"
    assert other.host(1).provisioning_mac.startswith(other.mac_prefix)
    last = LabPlan(netns="plabx", slot=14)
    assert last.uplink_net != zero.uplink_net


def test_interface_names_fit_the_kernel_limit_for_the_longest_lab_name():
    plan = LabPlan(netns="abcdefghijk", hosts=99)
    host = plan.host(99)
    for name in (plan.host_uplink, host.prov_veth_host, host.data_veth_host):
        assert len(name) <= 15
    assert plan.owns_link(host.prov_veth_host) and plan.owns_link(plan.host_uplink)
    assert not plan.owns_link("eth0")
    assert not LabPlan(netns="provlab").owns_link("provlab0-h")
    assert plan.owns_domain(host.domain) and not plan.owns_domain("abcdefghijk-hostile")


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"hosts": 0}, "--hosts 0"),
        ({"hosts": 100}, "--hosts 100"),
        ({"disks": 0}, "--disks 0"),
        ({"disks": 9}, "--disks 9"),
        ({"firmware": "coreboot"}, "--firmware 'coreboot'"),
        ({"memory_mib": 64}, "--memory 64"),
        ({"slot": 15}, "slot 15"),
        ({"netns": "Bad_Name"}, "'Bad_Name'"),
    ],
)
def test_bad_knobs_are_refused_with_the_option_named(knobs, message):
    with pytest.raises(InputError, match=message):
        LabPlan(**knobs)


def test_host_index_out_of_range():
    with pytest.raises(InputError, match="out of range"):
        LabPlan().host(0)


def test_environment_names_the_lab(monkeypatch, tmp_path):
    monkeypatch.setenv("PROVISIONER_LAB_NETNS", "plabenv")
    monkeypatch.setenv("PROVISIONER_LAB_SLOT", "2")
    monkeypatch.setenv("PROVISIONER_INVENTORY", str(tmp_path))
    monkeypatch.delenv("PROVISIONER_LAB_STATE_DIR", raising=False)
    plan = LabPlan.from_env(hosts=3)
    assert plan.netns == "plabenv" and plan.slot == 2 and plan.hosts == 3
    assert plan.state_dir == Path("/var/lib/provisioner-lab/plabenv")
    assert plan.site_path == tmp_path / "lab" / "site.yml"
    monkeypatch.setenv("PROVISIONER_LAB_STATE_DIR", str(tmp_path / "st"))
    assert LabPlan.from_env().state_dir == tmp_path / "st"


@pytest.mark.parametrize("raw", ["x", "-1", "15"])
def test_bad_slot_environment(monkeypatch, raw):
    monkeypatch.setenv("PROVISIONER_LAB_SLOT", raw)
    with pytest.raises(InputError, match="PROVISIONER_LAB_SLOT"):
        lab_slot()


def test_bad_netns_environment_names_the_variable():
    with pytest.raises(InputError) as err:
        validate_netns("this-name-is-far-too-long")
    assert "PROVISIONER_LAB_NETNS" in str(err.value)
