"""JUnit XML, so CI systems show each lint rule / fault kind as a test case."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from cabling.findings import Report


def render_junit(report: Report, cases: list[str]) -> str:
    """One test case per entry of ``cases`` (rule ids or fault kinds); findings become failures."""
    by_case: dict[str, list[str]] = {c: [] for c in cases}
    for f in report.findings:
        by_case.setdefault(f.kind, []).append(
            f"[{f.severity}] {f.message}" + (f"\n  fix: {f.fix}" if f.fix else "") + (f"\n  at: {f.where}" if f.where else "")
        )
    failures = sum(1 for msgs in by_case.values() if msgs)
    suite = ET.Element("testsuite", name=report.title, tests=str(len(by_case)), failures=str(failures),
                       errors="0", skipped="0")
    for case, msgs in by_case.items():
        tc = ET.SubElement(suite, "testcase", classname="cabling", name=case)
        if msgs:
            fail = ET.SubElement(tc, "failure", message=f"{len(msgs)} finding(s)", type=case)
            fail.text = "\n".join(msgs)
    root = ET.Element("testsuites", name="cabling", tests=suite.get("tests", "0"), failures=str(failures))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
