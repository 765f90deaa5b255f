"""`provision lab ...` argument handling and exit codes (no lab is built here)."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from tests.support import machine

runner = CliRunner()


@pytest.fixture(autouse=True)
def lab_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PROVISIONER_LAB_NETNS", "plabcli")
    monkeypatch.setenv("PROVISIONER_LAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_INVENTORY", str(tmp_path / "inv"))
    monkeypatch.delenv("PROVISIONER_LAB_SLOT", raising=False)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hosts", "0"], "--hosts 0"),
        (["--disks", "12"], "--disks 12"),
        (["--firmware", "coreboot"], "use bios or uefi"),
    ],
)
def test_lab_up_rejects_bad_options_with_exit_2(args, message):
    res = runner.invoke(app, ["lab", "up", *args])
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_lab_up_with_a_bad_slot_is_bad_input(monkeypatch):
    monkeypatch.setenv("PROVISIONER_LAB_SLOT", "99")
    res = runner.invoke(app, ["lab", "up"])
    assert res.exit_code == 2 and "PROVISIONER_LAB_SLOT" in res.output


def test_lab_up_as_non_root_is_not_ready(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    res = runner.invoke(app, ["lab", "up"])
    assert res.exit_code == 5 and "needs root" in res.output


def test_status_of_an_absent_lab_exits_5():
    res = runner.invoke(app, ["lab", "status"])
    assert res.exit_code == 5
    assert "lab 'plabcli': down" in res.output
    res = runner.invoke(app, ["lab", "status", "--json"])
    assert res.exit_code == 5
    doc = json.loads(res.output)
    assert doc["up"] is False and doc["netns_exists"] is False and doc["hosts"] == []


@machine.needs("root")
def test_down_of_an_absent_lab_removes_nothing():
    res = runner.invoke(app, ["lab", "down"])
    assert res.exit_code == 0, res.output
    assert "nothing to remove" in res.output


@machine.needs("root")
def test_lab_commands_refuse_to_run_twice_at_once(monkeypatch, tmp_path):
    from provisioner.lab import daemons, lab
    from provisioner.lab.plan import LabPlan

    monkeypatch.setattr(lab, "LOCK_DIR", tmp_path / "lock")
    monkeypatch.setattr(daemons, "missing_tools", lambda firmware="bios": [])
    with lab.lab_lock(LabPlan.from_env()):
        res = runner.invoke(app, ["lab", "up"])
        assert res.exit_code == 4, res.output
        assert "another `provision lab` command is running" in res.output
        assert runner.invoke(app, ["lab", "down"]).exit_code == 4
    assert not list((tmp_path / "lock").iterdir())


def test_console_shows_the_tail_of_a_vms_serial_log(tmp_path):
    import json as _json

    from provisioner.lab.plan import LabPlan

    plan = LabPlan.from_env()
    plan.state_dir.mkdir(parents=True)
    plan.manifest_path.write_text(_json.dumps({"hosts": 2}))
    res = runner.invoke(app, ["lab", "console", "lab-host02"])
    assert res.exit_code == 5 and "no console log yet" in res.output
    log = plan.console_log(plan.host(2))
    log.parent.mkdir(parents=True)
    log.write_bytes(b"SeaBIOS\r\n\x1b[2Jline two\r\niPXE: DHCP\r\n")
    res = runner.invoke(app, ["lab", "console", "plabcli-host02", "-n", "2"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == ["line two", "iPXE: DHCP"]
    res = runner.invoke(app, ["lab", "console", "lab-host07"])
    assert res.exit_code == 2 and "lab-host01, lab-host02" in res.output
