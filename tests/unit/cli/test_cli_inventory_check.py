"""`provision inventory check` of a site named relative to the caller's folder, as pre-commit
names it (inventory/dc1/site.yml from the root of the user's own repository)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.usefixtures("state_dir")


def test_a_relative_site_is_read_from_the_callers_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(REPO / "inventory" / "example", tmp_path / "inventory" / "dc1")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["inventory", "check", "inventory/dc1/site.yml"])
    assert res.exit_code == 0, res.output
    assert "ok: site 'example'" in res.stdout
    assert "not installed here" not in res.stderr  # Ansible's view was really checked
