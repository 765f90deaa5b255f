"""Report writers: JSON, JUnit XML, text, and the SVG/HTML picture with faults marked."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

from rich.console import Console

from cabling.diff import validate
from cabling.discovery.iblinkinfo import load_iblinkinfo
from cabling.manifest import load_manifest
from cabling.report.json import render_json
from cabling.report.junit import render_junit
from cabling.report.svg import render_html, render_svg
from cabling.report.text import render_text, summary
from cabling.report.worklist import render_worklist
from cabling.resolve import resolve
from cabling.rules import RULES, lint
from cabling.simulate import FAULT_KINDS

SVG = "{http://www.w3.org/2000/svg}"


def _report(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    return m, validate(m, resolve(load_iblinkinfo(fixtures / "small-fabric.iblinkinfo"), m))


def test_json_report(fixtures):
    _, report = _report(fixtures)
    data = json.loads(render_json(report))
    assert data["ok"] is False and data["errors"] == 5 and data["by_kind"]["swapped"] == 1
    assert {"kind", "severity", "message", "fix", "where", "endpoints"} <= set(data["findings"][0])


def test_junit_report_one_case_per_kind(fixtures):
    _, report = _report(fixtures)
    root = ET.fromstring(render_junit(report, list(FAULT_KINDS)))
    suite = root.find("testsuite")
    cases = {tc.get("name"): tc for tc in suite.iter("testcase")}
    assert set(cases) == set(FAULT_KINDS)
    assert cases["missing"].find("failure") is None
    fail = cases["swapped"].find("failure")
    assert fail is not None and "swap the cables in l1 ports 3 and 4" in fail.text
    assert suite.get("failures") == "4"


def test_junit_lint_clean(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    report = lint(m)
    root = ET.fromstring(render_junit(report, report.checks))
    assert root.get("failures") == "0" and len(list(root.iter("testcase"))) == len(RULES)


def test_text_report_log_and_table(fixtures):
    _, report = _report(fixtures)
    buf = io.StringIO()
    render_text(report, Console(file=buf, width=200), limit=2)
    text = buf.getvalue()
    assert "fix: swap the cables in l1 ports 3 and 4" in text and "... 3 more" in text
    buf = io.StringIO()
    render_text(report, Console(file=buf, width=200, force_terminal=True), limit=None)
    assert "severity" in buf.getvalue()
    assert summary(report).endswith("matched links 9)")
    assert "clean" in summary(lint(load_manifest(fixtures / "small-fabric.yaml")))


def test_svg_is_well_formed_and_marks_faults(fixtures):
    m, report = _report(fixtures)
    root = ET.fromstring(render_svg(m, report))
    assert root.tag == f"{SVG}svg"
    faults = [e for e in root.iter(f"{SVG}line") if "fault" in (e.get("class") or "")]
    kinds = {e.get("data-kind") for e in faults}
    assert kinds == {"swapped", "down", "degraded_width", "degraded_speed"}
    titles = [e.find(f"{SVG}title").text for e in faults]
    assert any("swap the cables in l1 ports 3 and 4" in t for t in titles)
    bad = {e.get("data-name") for e in root.iter(f"{SVG}rect") if e.get("class") == "device fault"}
    assert {"l1", "h3", "h4", "l0", "s2"} <= bad and "s1" not in bad
    labels = [e.text for e in root.iter(f"{SVG}text")]
    assert any(t.startswith("spine (2)") for t in labels) and any(t.startswith("hosts (4)") for t in labels)


def test_svg_without_findings_and_unplanned_device(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    root = ET.fromstring(render_svg(m, lint(m)))
    assert not [e for e in root.iter(f"{SVG}line") if "fault" in (e.get("class") or "")]
    _, report = _report(fixtures)
    report.findings[0].endpoints = ["ghost:1", "l0:1"]  # a device the manifest does not have
    report.findings[0].kind = "unexpected"
    root = ET.fromstring(render_svg(m, report))
    assert any(e.get("data-kind") == "unexpected" for e in root.iter(f"{SVG}line"))


def test_html_page(fixtures):
    m, report = _report(fixtures)
    page = render_html(m, report)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "swap the cables" in page


def test_worklist_groups_fixes_by_rack(fixtures):
    from cabling.findings import Finding

    m, report = _report(fixtures)
    report.findings.insert(0, Finding("missing", "error", "no link", "connect s2 port 3 to s1 port 4",
                                      endpoints=["s2:3", "s1:4"]))
    text = render_worklist(report, m)
    lines = text.splitlines()
    assert lines[1] == "6 task(s) in 2 rack(s)"
    r01 = lines.index("rack r01 (5)")
    assert lines[r01 + 1].startswith("  [ ] l0 (U40): ")
    assert "  [ ] l1 (U38): swap the cables in l1 ports 3 and 4" in text[text.index("rack r01"):]
    assert lines.index("rack r02 (1)") > r01  # racks in order
    assert "  [ ] s2 (U38): connect s2 port 3 to s1 port 4" in lines
    lint_text = render_worklist(lint(m), m)
    assert "0 task(s) in 0 rack(s)" in lint_text
