"""`firmware check` / `bios check` of a whole site without baselines (the lab): a read verb
with nothing to check says so and exits 0; hosts named without one, and `firmware update`,
are still refused (#36 item 10)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.usefixtures("state_dir")
runner = CliRunner()


@pytest.fixture
def bare_site(tmp_path: Path) -> Path:
    """The example site without its BIOS and firmware baselines."""
    site_dir = tmp_path / "bare"
    shutil.copytree(REPO / "inventory" / "example", site_dir)
    path = site_dir / "site.yml"
    text = path.read_text()
    bare = re.sub(r"\n    (bios|firmware):\n(      .*\n)+", "\n", text)
    assert "firmware:" not in bare and "bios:" not in bare
    path.write_text(bare)
    return path


@pytest.mark.parametrize("kind", ["firmware", "bios"])
def test_check_without_a_baseline_says_so_and_exits_0(bare_site: Path, kind: str,
                                                      tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    res = runner.invoke(app, [kind, "check", "--site", str(bare_site), "--junit", str(junit)])
    assert res.exit_code == 0, res.output
    assert f"none of the 32 selected hosts has a {kind} baseline: nothing checked" in res.stderr
    assert junit.is_file()
    res = runner.invoke(app, [kind, "check", "--site", str(bare_site), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == []


def test_hosts_named_without_a_baseline_are_still_refused(bare_site: Path) -> None:
    res = runner.invoke(app, ["firmware", "check", "gpu-r01-u03", "--site", str(bare_site)])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output


def test_update_without_a_baseline_is_still_refused(bare_site: Path) -> None:
    res = runner.invoke(app, ["firmware", "update", "gpu-r01-u03", "--site", str(bare_site),
                              "--yes"])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "has a firmware baseline" in res.output
