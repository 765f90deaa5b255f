"""Text a BMC sends, on its way to every output (#32 item 9): firmware names and versions and BIOS
values holding terminal escapes (clear screen, a hyperlink, recolouring a drifted row "ok"), C1
controls, a bidi override, NUL, CR and backspace reach no terminal as controls, keep the JUnit
XML parseable and the Prometheus textfile well-formed.

Stand-ins: the UpdateService BMC (provisioner/testing/update_peer.py) and the BIOS BMC
(provisioner/testing/bios_peer.py), each behind a TLS proxy, answering with these strings in
their own JSON; the CLI runs in-process (no terminal: rich itself adds no escape).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.testing.bios_peer import bios_peer, bios_site
from provisioner.testing.update_peer import firmware_rack_site, image_bytes

USER, PASSWORD = "admin", "hostile-text-pw"
# what a hostile or broken BMC puts in a name, a version or a value
HOSTILE = ("\x1b[2J\x1b[H\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07"
           "\x1b[32mok\x1b[0m\u202eevil\x00\x9b31m\r\bX[bold]markup[/]")
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SAMPLE = re.compile(r'^[a-z_]+\{([a-z_]+="(?:[^"\\\n]|\\[\\"n])*",?)+\} -?[0-9.e+]+$')


def _no_controls(text: str) -> None:
    found = CONTROLS.search(text)
    assert found is None, f"{found.group()!r} reached the output: {text[max(0, found.start() - 60):found.end() + 20]!r}"


def _textfile_ok(text: str) -> None:
    for line in text.splitlines():
        assert line.startswith("# ") or SAMPLE.match(line), f"not a Prometheus sample: {line!r}"
    _no_controls(text)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FW_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("BIOS_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_firmware_names_and_versions_from_a_bmc_are_shown_never_obeyed(env, stack, tmp_path):
    def profiles(images: Path) -> str:
        path = images / "bmc.bin"
        path.write_bytes(image_bytes("BMC", "2.0"))
        return ("profiles:\n  bmc:\n    provisioning_nic: {rule: first-onboard-up}\n"
                "    firmware: [{component: '*', version: '2.0'}]\n")

    inventory = {"BMC": {"Name": f"BMC{HOSTILE}", "Version": f"1.0{HOSTILE}"}}
    site, _ = firmware_rack_site(stack, tmp_path, "hostile", USER, PASSWORD,
                                 {"a": (inventory, {}, {})}, {"a": "bmc"}, profiles)
    junit, prom = tmp_path / "fw.xml", tmp_path / "fw.prom"
    res = _run("firmware", "check", "--site", str(site), "--all", "--junit", str(junit),
               "--textfile", str(prom), "--wide")
    assert res.exit_code == 3, res.stdout + res.stderr
    out = res.stdout + res.stderr
    _no_controls(out)
    assert "\\x1b[2J" in out and "\\u202e" in out and "\\x00" in out  # shown, as escapes
    assert "[bold]markup[/]" in out  # brackets shown as they came, never read as markup
    root = ET.parse(junit).getroot()  # parseable
    failure = root.find(".//failure")
    assert failure is not None and "\\x1b[32mok" in failure.attrib["message"]
    _no_controls(junit.read_text())
    _textfile_ok(prom.read_text())
    data = json.loads(_run("firmware", "check", "--site", str(site), "--json").stdout)
    assert data[0]["items"][0]["have"] == f"1.0{HOSTILE}"  # JSON keeps the value, escaped


def test_bios_values_from_a_bmc_are_shown_never_obeyed(env, stack, tmp_path):
    registry = {"RegistryEntries": {"Attributes": [
        {"AttributeName": "AssetTag", "Type": "String", "MaxLength": 200, "ReadOnly": False}],
        "Dependencies": []}}
    peer = stack.enter_context(bios_peer(USER, PASSWORD, {"AssetTag": HOSTILE}, registry))
    profiles = ("profiles:\n  gpu:\n    provisioning_nic: {rule: first-onboard-up}\n"
                "    bios:\n      AssetTag: rack-7\n")
    site = bios_site(stack, tmp_path, "hostile-bios", USER, PASSWORD, {"a": peer}, {"a": "gpu"},
                     profiles)
    junit, prom = tmp_path / "bios.xml", tmp_path / "bios.prom"
    res = _run("bios", "check", "--site", str(site), "--junit", str(junit), "--textfile",
               str(prom), "--wide")
    assert res.exit_code == 3, res.stdout + res.stderr
    out = res.stdout + res.stderr
    _no_controls(out)
    assert "\\x1b]8;;http://evil.example/\\x07" in out
    ET.parse(junit)
    _no_controls(junit.read_text())
    _textfile_ok(prom.read_text())
