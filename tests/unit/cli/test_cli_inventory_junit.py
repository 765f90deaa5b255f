"""`provision inventory check SITE... --junit F`: every site checked, one JUnit case each."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


def test_several_sites_one_bad_one_junit_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    text = (REPO / "inventory/example/site.yml").read_text()
    (bad / "site.yml").write_text(text.replace("\n  uplink_gbps: 100\n", "\n  uplink_gbpz: 100\n"))
    report = tmp_path / "reports" / "inventory.xml"
    res = runner.invoke(
        app, ["inventory", "check", str(REPO / "inventory/example"), str(bad), "--junit", str(report)]
    )
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "ok: site 'example'" in res.output  # checked although another site fails
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases[str(REPO / "inventory/example")].find("failure") is None
    failure = cases[str(bad)].find("failure")
    assert failure is not None and "unknown key 'uplink_gbpz'" in (failure.get("message") or "")
    assert "did you mean 'uplink_gbps'?" in (failure.text or "")
    ok = runner.invoke(app, ["inventory", "check", "example", "--junit", str(report)])
    assert ok.exit_code == 0, ok.output
    assert ET.parse(report).getroot().find("testsuite").get("failures") == "0"  # type: ignore[union-attr]
