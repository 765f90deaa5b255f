"""Helpers other areas use (namespace commands, lab-up check), prerequisites and `lab up` knobs."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from provisioner.exceptions import InputError, NotReady
from provisioner.lab import daemons, netns
from provisioner.lab.lab import resolve_plan
from provisioner.lab.plan import LabPlan


@pytest.fixture
def lab_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PROVISIONER_LAB_NETNS", "plabunit")
    monkeypatch.setenv("PROVISIONER_LAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_INVENTORY", str(tmp_path / "inv"))
    monkeypatch.delenv("PROVISIONER_LAB_SLOT", raising=False)
    return tmp_path


def test_in_netns_prefixes_the_lab_namespace(lab_env):
    assert netns.in_netns(["dnsmasq", "--test"]) == [
        "ip",
        "netns",
        "exec",
        "plabunit",
        "dnsmasq",
        "--test",
    ]
    assert netns.in_netns(["true"], "other")[:4] == ["ip", "netns", "exec", "other"]


def test_require_lab_says_to_run_lab_up(lab_env):
    with pytest.raises(NotReady) as err:
        netns.require_lab()
    assert "provision lab up" in str(err.value) and "plabunit" in str(err.value)
    with pytest.raises(NotReady, match="provision lab up"):
        netns.run_in_netns(["true"])


def test_require_lab_needs_root(lab_env, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NotReady, match="needs root"):
        netns.require_lab()


def test_run_names_a_missing_command_and_a_failing_one():
    with pytest.raises(NotReady, match="command not found: no-such-tool-xyz"):
        netns.run(["no-such-tool-xyz"])
    with pytest.raises(netns.CommandFailed, match="exit status 3: boom"):
        netns.run(["sh", "-c", "echo boom >&2; exit 3"])
    assert netns.run(["sh", "-c", "exit 3"], check=False).returncode == 3
    with pytest.raises(netns.CommandFailed, match="did not finish"):
        netns.run(["sleep", "5"], timeout=0.2)


def test_pid_alive_and_namespace_pids():
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert netns.pid_alive(child.pid)
    finally:
        child.kill()
    child.wait()
    assert not netns.pid_alive(child.pid)
    assert netns.netns_pids("plab-does-not-exist") == []


def test_missing_prerequisites_are_listed_with_their_packages(monkeypatch):
    monkeypatch.setattr(daemons.shutil, "which", lambda _cmd: None)
    missing = daemons.missing_tools("uefi")
    assert "qemu-system-x86_64 (qemu-system-x86)" in missing
    assert "libvirtd (libvirt-daemon-system)" in missing
    with pytest.raises(NotReady) as err:
        daemons.require_tools()
    assert "scripts/install-deps" in str(err.value) and "qemu-img (qemu-utils)" in str(err.value)


def test_lab_needs_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NotReady, match="needs root"):
        daemons.require_tools()


def _manifest(lab_env, **knobs):
    plan = LabPlan.from_env()
    plan.state_dir.mkdir(parents=True)
    plan.manifest_path.write_text(json.dumps(knobs))


def test_lab_up_knobs_default_and_follow_the_running_lab(lab_env):
    plan = resolve_plan()
    assert (plan.hosts, plan.disks, plan.firmware, plan.memory_mib) == (2, 3, "bios", 1024)
    _manifest(lab_env, hosts=3, disks=2, firmware="uefi", memory_mib=768)
    plan = resolve_plan()
    assert (plan.hosts, plan.disks, plan.firmware, plan.memory_mib) == (3, 2, "uefi", 768)
    assert resolve_plan(hosts=5).hosts == 5  # a lab may grow


@pytest.mark.parametrize(
    "asked, flag",
    [({"hosts": 2}, "--hosts 3"), ({"disks": 4}, "--disks 2"), ({"firmware": "bios"}, "uefi")],
)
def test_lab_up_refuses_to_shrink_or_rebuild_a_running_lab(lab_env, asked, flag):
    _manifest(lab_env, hosts=3, disks=2, firmware="uefi", memory_mib=1024)
    with pytest.raises(InputError) as err:
        resolve_plan(**asked)
    assert flag in str(err.value) and "provision lab down" in str(err.value)


def test_down_removes_only_the_labs_own_files_from_a_shared_state_dir(lab_env):
    from provisioner.lab.lab import _remove_state_dir

    plan = LabPlan.from_env()
    for name in ("disks", "pki", "bmc-01", "lab-host01"):
        (plan.state_dir / name).mkdir(parents=True)
        (plan.state_dir / name / "f").write_text("x")
    for name in ("manifest.json", "bmc-01.password", "notes.txt"):
        (plan.state_dir / name).write_text("x")
    removed = _remove_state_dir(plan)
    assert sorted(p.name for p in plan.state_dir.iterdir()) == ["notes.txt"]
    assert len(removed) == 6
    (plan.state_dir / "notes.txt").unlink()
    (plan.state_dir / "ssh").mkdir()
    assert _remove_state_dir(plan)[-1] == str(plan.state_dir)
    assert not plan.state_dir.exists()
