"""Peer text on its way out (provisioner/safetext.py): every control, bidi and invisible format
character shown as its escape on a terminal; XML that stays parseable; Prometheus label values
that stay one label; and the renderers (health and baseline JUnit and textfiles, the CLI's
markup helper) that use them, with what a hostile BMC or host sends."""

from __future__ import annotations

import ast
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.cli.errors import plain
from provisioner.health.checks.base import result
from provisioner.health.junit import render_junit
from provisioner.health.model import HostReport, RemedyKind, Status, judge
from provisioner.health.textfile import render_textfile
from provisioner.safetext import prom_label, terminal, xml, xml_tree
from provisioner.workflow.baseline import render_junit as baseline_junit
from provisioner.workflow.baseline import render_metrics
from provisioner.workflow.baseline_items import HostCompliance, Item
from provisioner.workflow.baseline_items import Status as ItemStatus

HOSTILE = "a\x1b[2J\x1b]8;;http://x/\x07b\x9b31m\u202ec\u2066d\u200be\x00f\rg\bh\ufeffi"
CLI = Path(__file__).resolve().parents[3] / "provisioner" / "cli"


def test_terminal_shows_each_control_as_its_escape():
    assert terminal(HOSTILE) == ("a\\x1b[2J\\x1b]8;;http://x/\\x07b\\x9b31m\\u202ec\\u2066d"
                                 "\\u200be\\x00f\\rg\\x08h\\ufeffi")
    assert terminal("one\ntwo\tthree") == "one\\ntwo\\tthree"
    assert terminal("one\ntwo\x1b", newlines=True) == "one\ntwo\\x1b"
    nice = "GPU 0000:18:00.0 \u2013 H100 80GB HBM3 \u2713 \u00e9t\u00e9 \u4e2d"
    assert terminal(nice) == nice
    assert terminal(42) == "42"


ACTING = {"Cc", "Cf", "Cs", "Zl", "Zp"}  # controls, format characters, surrogates, separators


def test_every_code_point_that_acts_is_escaped_and_no_other():
    everything = "".join(map(chr, range(0x110000)))
    shown = terminal(everything)
    assert not [c for c in shown if unicodedata.category(c) in ACTING]
    # only what acts is changed (and format characters newer than this Python's Unicode)
    changed = [c for c in everything if terminal(c) != c]
    assert {unicodedata.category(c) for c in changed} <= ACTING | {"Cn"}


@given(st.text())
def test_xml_text_always_parses_back(text):
    root = ET.Element("t", message=text)
    root.text = text
    parsed = ET.fromstring(ET.tostring(xml_tree(root), encoding="unicode"))
    assert parsed.get("message") == xml(text) and (parsed.text or "") == xml(text)


@given(st.text())
def test_a_prometheus_label_value_stays_one_label(text):
    value = prom_label(text)
    assert "\n" not in value
    # every quote is escaped, every backslash starts an escape the format knows
    i = 0
    while i < len(value):
        if value[i] == "\\":
            assert value[i + 1] in '\\"n'
            i += 2
            continue
        assert value[i] != '"'
        i += 1


def test_plain_escapes_controls_and_markup():
    assert plain("[red]x\x1b[0m[/]") == "\\[red]x\\x1b[0m\\[/]"


def _report(summary: str, evidence: str) -> HostReport:
    bad = result("gpu.ecc", Status.FAIL, summary, remedy=RemedyKind.REPAIR, evidence=[evidence])
    return judge(HostReport(host="gpu01", run_id="r1", started_at="2026-11-22T11:00:00+00:00",
                            duration_s=1.0, results=[bad]), 3, 0)


def test_health_junit_with_what_a_host_printed_stays_parseable():
    text = render_junit([_report(f"ECC {HOSTILE}", f"nvidia-smi said {HOSTILE}")])
    failure = ET.fromstring(text).find(".//failure")
    assert failure is not None and "\\x1b[2J" in failure.get("message", "")
    assert "\x1b" not in text and "\x00" not in text


def test_health_textfile_labels_hold_no_control():
    rep = HostReport(host=f"gpu{HOSTILE}\n", run_id="r1", started_at="x", duration_s=1.0,
                     results=[result(f"c{HOSTILE}", Status.PASS, "ok")])
    text = render_textfile(judge(rep, 3, 0), 1.0)
    assert "\x1b" not in text and "\x00" not in text and len(text.splitlines()) == 15


def test_baseline_junit_and_metrics_with_bmc_values():
    item = Item(kind="firmware", name=f"BMC{HOSTILE}", have=f"1.0{HOSTILE}", want="2.0",
                status=ItemStatus.DRIFT, hint=f"BMC says {HOSTILE}", entry="BMC")
    rep = HostCompliance(host="a", items=[item])
    text = baseline_junit("firmware", [rep])
    assert ET.fromstring(text).find(".//failure") is not None and "\x1b" not in text
    metrics = render_metrics("firmware", [rep])
    assert "\x1b" not in metrics and "\x00" not in metrics


@pytest.mark.parametrize("module", sorted(p.name for p in CLI.glob("*.py")))
def test_cli_modules_escape_markup_only_through_plain(module):
    """rich's bare escape() lets controls through: the CLI escapes peer text with plain()."""
    if module == "errors.py":
        return
    tree = ast.parse((CLI / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "rich.markup":
            assert "escape" not in {a.name for a in node.names}, (
                f"cli/{module} imports rich.markup.escape: use cli.errors.plain (it also "
                "escapes controls, provisioner/safetext.py)")
