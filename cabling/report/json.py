"""JSON form of a report, for scripts and dashboards."""

from __future__ import annotations

import json
from typing import Any

from cabling.findings import Report


def report_dict(report: Report) -> dict[str, Any]:
    """The report as plain data."""
    return {
        "title": report.title,
        "ok": not report.failed(),
        "errors": report.errors,
        "warnings": report.warnings,
        "by_kind": report.by_kind(),
        "stats": report.stats,
        "findings": [f.to_dict() for f in report.findings],
    }


def render_json(report: Report) -> str:
    """The report as indented JSON text."""
    return json.dumps(report_dict(report), indent=2) + "\n"
