"""Errors that suggest the fix: did-you-mean for sites, hosts, racks, keys and verbs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cabling.errors import CablingInputError
from cabling.manifest import parse_manifest
from provisioner.cli.main import app
from provisioner.exceptions import ExitCode
from provisioner.wording import plural, suggest

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("state_dir")


def test_suggest_and_plural() -> None:
    assert suggest("exampel", ["example", "lab"]) == "example"
    assert suggest("LAB", ["example", "lab"]) == "lab"
    assert suggest("zzz", ["example", "lab"]) is None
    assert [plural(n, "rack") for n in (0, 1, 64)] == ["0 racks", "1 rack", "64 racks"]
    assert plural(2, "switch", "switches") == "2 switches"


def test_unknown_site_suggests_and_names_each_place_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # ./inventory is the checkout's own inventory/
    monkeypatch.delenv("PROVISIONER_INVENTORY", raising=False)
    res = runner.invoke(app, ["status", "--site", "exampel"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "did you mean 'example'?" in res.output
    looked = res.output.split("looked in ", 1)[1].split(")", 1)[0]
    assert looked == str(REPO / "inventory" / "exampel")  # once, not twice


def test_unknown_host_and_rack_suggest() -> None:
    res = runner.invoke(app, ["history", "--site", "example", "gpu-r01-u03x"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "did you mean 'gpu-r01-u03'?" in res.output
    res = runner.invoke(app, ["rack", "--site", "example", "--rack", "r0l", "--dry-run"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "did you mean 'r01'?" in res.output


def test_unknown_verb_suggests() -> None:
    res = runner.invoke(app, ["rak"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "Did you mean 'rack'?" in res.output


def test_site_file_key_typo_names_the_allowed_keys(tmp_path: Path) -> None:
    text = (REPO / "inventory/example/site.yml").read_text()
    assert "\n  uplink_gbps: 100\n" in text
    (tmp_path / "site.yml").write_text(text.replace("\n  uplink_gbps: 100\n", "\n  uplink_gbpz: 100\n"))
    res = runner.invoke(app, ["inventory", "check", str(tmp_path)])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "unknown key 'uplink_gbpz'" in res.output
    assert "did you mean 'uplink_gbps'?" in res.output
    assert "allowed here: deploy_backend, " in res.output


def test_cabling_manifest_key_typo_names_key_allowed_keys_and_suggestion() -> None:
    text = (
        "devices:\n"
        "  - name: x\n"
        "    kind: host\n"
        "  - name: y\n"
        "    kind: host\n"
        "    hcaz: [mlx5_0]\n"
        "links: []\n"
    )
    with pytest.raises(CablingInputError) as err:
        parse_manifest(text, "h.yaml")
    msg = str(err.value)
    assert msg.startswith("h.yaml:6: unknown key 'hcaz' in device 'y'; allowed: name, kind, ")
    assert msg.endswith("; did you mean 'hcas'?")
    with pytest.raises(CablingInputError) as err:
        parse_manifest("fabric:\n  tierz: 2\n", "f.yaml")
    assert "unknown key 'tierz' in 'fabric'; allowed: name, tiers," in str(err.value)
    assert "did you mean 'tiers'?" in str(err.value)
    with pytest.raises(CablingInputError) as err:
        parse_manifest("devices: []\nlinks:\n  - {a: x:1, b: y:1, cabel: C1}\n", "l.yaml")
    assert "unknown key 'cabel' in link #1; allowed: a, b, cable," in str(err.value)
    assert "did you mean 'cable'?" in str(err.value)
