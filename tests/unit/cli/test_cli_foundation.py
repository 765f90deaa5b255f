"""The CLI in-process: inventory check/show, status, history, maintenance and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("state_dir")


def test_help_lists_commands() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("inventory", "status", "history"):
        assert cmd in res.output


def test_inventory_check_ok() -> None:
    res = runner.invoke(app, ["inventory", "check", "example"])
    assert res.exit_code == 0, res.output
    assert "32 hosts" in res.output


def test_inventory_check_bad_input_exit_code(tmp_path: Path) -> None:
    text = (REPO / "inventory/example/site.yml").read_text().replace("cidr: 10.12.0.0/20", "cidr: 10.10.4.0/22")
    (tmp_path / "site.yml").write_text(text)
    res = runner.invoke(app, ["inventory", "check", str(tmp_path)])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "overlaps network 'provisioning'" in res.output


def test_inventory_show_json() -> None:
    res = runner.invoke(app, ["inventory", "show", "--site", "example", "--json", "--rack", "r02"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert len(doc["hosts"]) == 16
    assert doc["hosts"][0]["addresses"]["provisioning"] == "10.10.0.130"


def test_status_history_and_maintenance() -> None:
    res = runner.invoke(app, ["status", "--site", "example", "--json", "gpu-r01-u03"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["state"] == "enrolled"
    res = runner.invoke(app, ["maintenance", "--site", "example", "gpu-r01-u03", "-r", "bad PSU"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["history", "--site", "example", "gpu-r01-u03", "--json"])
    events = json.loads(res.stdout)
    assert events[-1]["to"] == "maintenance" and events[-1]["message"] == "bad PSU"
    res = runner.invoke(app, ["maintenance", "--site", "example", "--off", "gpu-r01-u03"])
    assert "maintenance -> enrolled" in res.output  # the state it had before


def test_unknown_host_is_bad_input() -> None:
    res = runner.invoke(app, ["history", "--site", "example", "gpu-r09-u01"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "no host 'gpu-r09-u01'" in res.output
