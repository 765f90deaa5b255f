"""Broken and hostile site files and manifests through the CLI: the typed message and exit 2, never a
traceback; the error printer prints text, never Rich markup or emoji codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = (REPO / "inventory/example/site.yml").read_bytes()
SMALL = REPO / "tests/fixtures/cabling/small-fabric.yaml"
IBLINKINFO = REPO / "tests/fixtures/cabling/small-fabric.iblinkinfo"
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("state_dir")


def check(tmp_path: Path, data: bytes) -> tuple[int, str]:
    site = tmp_path / "site" / "site.yml"
    site.parent.mkdir(exist_ok=True)
    site.write_bytes(data)
    res = runner.invoke(app, ["inventory", "check", str(site)])
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, res.output


BROKEN_SITES = {
    "invalid UTF-8": EXAMPLE.replace(b"site: example", b"site: ex\xffample"),
    "control character": EXAMPLE.replace(b"site: example", b"site: ex\x01ample"),
    "huge integer": EXAMPLE.replace(b"index: 1", b"index: " + b"9" * 5000),
    "bad timestamp tag": EXAMPLE.replace(b"site: example", b"site: !!timestamp 2020-99-99"),
    "truncated": EXAMPLE[: len(EXAMPLE) // 2 + 7],
    "deep nesting": b"[" * 50_000,
    "key with brackets": EXAMPLE.replace(b"settings:", b"settings:\n  a[0]: 1", 1),
    "unhashable key": EXAMPLE.replace(b"settings:", b"settings:\n  ? [a, b]\n  : 1", 1),
    "undefined alias": EXAMPLE.replace(b"site: example", b"site: *nowhere"),
}


@pytest.mark.parametrize("name", BROKEN_SITES)
def test_broken_site_is_a_typed_error_with_exit_2(tmp_path: Path, name: str) -> None:
    code, out = check(tmp_path, BROKEN_SITES[name])
    assert code == ExitCode.BAD_INPUT, out
    assert "Traceback" not in out
    assert out.startswith("error: ") and "site.yml" in out


def test_key_in_brackets_survives_the_printer(tmp_path: Path) -> None:
    code, out = check(tmp_path, EXAMPLE.replace(b"settings:", b"settings:\n  bogus_key: 1", 1))
    assert code == ExitCode.BAD_INPUT
    assert "[settings.bogus_key]" in out and "unknown key 'bogus_key'" in out


def test_a_key_holding_brackets_is_named_not_lost(tmp_path: Path) -> None:
    code, out = check(tmp_path, EXAMPLE.replace(b"settings:", b"settings:\n  'x[0]': 1", 1))
    assert code == ExitCode.BAD_INPUT
    assert "[settings.x[0]]" in out and "unknown key 'x[0]'" in out


def test_markup_closing_tag_in_a_message_does_not_crash_the_printer(tmp_path: Path) -> None:
    data = EXAMPLE.replace(b"  - name: r01", b'  - name: "[/]x"', 1)
    assert data != EXAMPLE
    code, out = check(tmp_path, data)
    assert code == ExitCode.BAD_INPUT, out
    assert "'[/]x'" in out


def test_line_100_is_not_an_emoji(tmp_path: Path) -> None:
    comments = b"".join(b"# line %d\n" % i for i in range(1, 100))
    code, out = check(tmp_path, comments + b"bogus: \x01\n" + EXAMPLE)
    assert code == ExitCode.BAD_INPUT
    assert "site.yml:100: character U+0001 is not allowed" in out
    assert "\N{HUNDRED POINTS SYMBOL}" not in out


def test_emoji_codes_and_markup_in_values_print_as_written(tmp_path: Path) -> None:
    data = EXAMPLE.replace(b"site: example", b"site: example\nbogus: 1", 1).replace(
        b"settings:", b"settings:\n  ':smile:[bold]': 1", 1)
    code, out = check(tmp_path, data)
    assert code == ExitCode.BAD_INPUT
    assert ":smile:[bold]" in out and "\N{SMILING FACE WITH SMILING EYES}" not in out


BROKEN_MANIFESTS = {
    "manifest.yaml": SMALL.read_bytes().replace(b"devices:", b"devices:\x00", 1),
    "manifest.json": b'{"devices": [' + b"[" * 30_000,
    "manifest.csv": b"a_device,a_port,b_device,b_port\nh1,mlx5_0,l1,1,extra,cells\n",
    "bad-utf8.yaml": b"fabric: {speed: \xff}\n",
}


@pytest.mark.parametrize("name", BROKEN_MANIFESTS)
def test_broken_manifest_is_a_typed_error_with_exit_2(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(BROKEN_MANIFESTS[name])
    res = runner.invoke(app, ["cabling", "validate", "-m", str(path), "--iblinkinfo", str(IBLINKINFO)])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert res.output.startswith("error: ") and name in res.output
    assert "Traceback" not in res.output


def test_cabling_error_printer_keeps_brackets(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("devices: [{name: '[/]x', kind: nonsense}]\nlinks: []\n")
    res = runner.invoke(app, ["cabling", "validate", "-m", str(path), "--iblinkinfo", str(IBLINKINFO)])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "[devices.0.kind]" in res.output


def test_a_real_process_exits_2_without_a_traceback(tmp_path: Path) -> None:
    site = tmp_path / "site.yml"
    site.write_bytes(BROKEN_SITES["invalid UTF-8"])
    proc = subprocess.run([sys.executable, "-m", "provisioner.cli.main", "inventory", "check", str(site)],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: {site}:4: not UTF-8 text: byte 0xff at column 9" in proc.stderr
