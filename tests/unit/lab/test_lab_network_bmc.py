"""Address conflicts between labs, half-built namespaces, and BMCs that fail to start."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from provisioner.exceptions import NotReady
from provisioner.lab import bmc_emulators as bmc
from provisioner.lab import network
from provisioner.lab.netns import require_lab
from provisioner.lab.plan import LabPlan
from tests.support import machine


def _fake_ip(routes: dict[str, list], addrs: list):
    def fake(*args: str, netns: str | None = None, check: bool = True) -> str:
        if args[:3] == ("-j", "route", "show"):
            return json.dumps(routes.get(args[-1], []))
        if args[:2] == ("-j", "addr"):
            return json.dumps(addrs)
        raise AssertionError(args)

    return fake


def test_a_route_held_by_another_lab_is_a_conflict(monkeypatch):
    plan = LabPlan()
    routes = {"198.18.0.0/24": [{"dst": "198.18.0.0/24", "dev": "otherlab-h"}]}
    monkeypatch.setattr(network, "_ip", _fake_ip(routes, []))
    with pytest.raises(network.LabAddressConflict) as err:
        network.check_conflicts(plan)
    assert "already routed via otherlab-h" in str(err.value)
    assert "PROVISIONER_LAB_SLOT" in str(err.value)


def test_the_uplink_address_on_another_interface_is_a_conflict(monkeypatch):
    addrs = [{"ifname": "eth7", "addr_info": [{"local": "198.18.254.1"}]}]
    monkeypatch.setattr(network, "_ip", _fake_ip({}, addrs))
    with pytest.raises(network.LabAddressConflict) as err:
        network.check_conflicts(LabPlan())
    assert "198.18.254.1 is already assigned to eth7" in str(err.value)


def test_the_labs_own_routes_and_address_are_no_conflict(monkeypatch):
    plan = LabPlan()
    routes = {str(n): [{"dev": "provlab-h"}] for n in plan.routed_nets}
    addrs = [{"ifname": "provlab-h", "addr_info": [{"local": "198.18.254.1"}]}]
    monkeypatch.setattr(network, "_ip", _fake_ip(routes, addrs))
    network.check_conflicts(plan)


@machine.needs("root")
def test_a_namespace_without_the_provisioning_bridge_is_a_half_built_lab():
    name = f"plabh{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        with pytest.raises(NotReady, match="half-built lab"):
            require_lab(name)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def test_a_bmc_that_dies_at_start_is_reported_with_its_log(monkeypatch, tmp_path):
    plan = LabPlan(netns="plabt", state_dir=tmp_path)
    host = plan.host(1)
    proc = bmc.bmc_process(plan, host)
    proc.log.parent.mkdir(parents=True)
    proc.log.write_text("Traceback ...\nOSError: [Errno 98] Address already in use\n")
    monkeypatch.setattr(bmc, "probe", lambda *a, **kw: False)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with pytest.raises(bmc.LabBMCError) as err:
        bmc.wait_ready(plan, host, tmp_path / "ca.pem", dead.pid)
    assert "exited during start-up" in str(err.value)
    assert "Address already in use" in str(err.value) and str(proc.log) in str(err.value)


def test_a_bmc_that_never_answers_times_out(monkeypatch, tmp_path):
    plan = LabPlan(netns="plabt", state_dir=tmp_path)
    monkeypatch.setattr(bmc, "probe", lambda *a, **kw: False)
    monkeypatch.setattr(bmc, "START_TIMEOUT_S", 0.3)
    with pytest.raises(bmc.LabBMCError) as err:
        bmc.wait_ready(plan, plan.host(1), tmp_path / "ca.pem", os.getpid())
    assert "did not answer on https://198.19.0.11:443" in str(err.value)


def test_free_slot_skips_slots_in_use_and_says_when_none_is_left(monkeypatch):
    busy = {str(LabPlan(slot=14).provisioning_net): [{"dev": "someone-h"}]}
    monkeypatch.setattr(network, "_ip", _fake_ip(busy, []))
    assert network.free_slot("plabt") == 13
    everything = {
        str(LabPlan(slot=k).provisioning_net): [{"dev": "someone-h"}] for k in range(0, 15)
    }
    monkeypatch.setattr(network, "_ip", _fake_ip(everything, []))
    with pytest.raises(network.LabAddressConflict, match="every lab address slot"):
        network.free_slot("plabt")


def test_a_kernel_without_macvtap_is_named_before_any_vm_starts(monkeypatch):
    import subprocess as sp

    def fake_run(argv, **kw):
        return sp.CompletedProcess(argv, 2, "", "Error: Unknown device type.")

    monkeypatch.setattr(network, "run", fake_run)
    with pytest.raises(NotReady) as err:
        network.check_macvtap(LabPlan())
    assert "cannot create macvtap devices (Error: Unknown device type.)" in str(err.value)
    assert "CONFIG_MACVTAP" in str(err.value)
    assert LabPlan().owns_link("provlab-m")
