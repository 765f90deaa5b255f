"""Findings of lint and validate: what is wrong, where, and the action that fixes it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
# Every kind of validate finding, in report order (JUnit has one test case per kind).
# Root causes (a plane, a rail, a device mostly dark) come first: the cables they explain follow them.
ROOT_KINDS = ("plane_down", "rail_down", "device_down")
VALIDATE_KINDS = (*ROOT_KINDS, "duplicate_guid", "duplicate_name", "moved", "swapped", "missing", "down", "unexpected",
                  "degraded_width", "degraded_speed", "flapping", "link_errors", "changed", "identity")


@dataclass(slots=True)
class Finding:
    """One problem: a rule or fault kind, a severity, a message, and a fix a person can act on."""

    kind: str
    severity: Severity
    message: str
    fix: str = ""
    where: str = ""
    endpoints: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for JSON reports."""
        d = asdict(self)
        if not d["data"]:
            del d["data"]
        return d


@dataclass
class Report:
    """What a lint or validate run found, with counts for the summary line."""

    title: str
    findings: list[Finding] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Findings of severity error."""
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        """Findings of severity warning."""
        return sum(1 for f in self.findings if f.severity == "warning")

    def failed(self, strict: bool = False) -> bool:
        """Whether CI should fail: any error, or any warning when ``strict``."""
        return self.errors > 0 or (strict and self.warnings > 0)

    def by_kind(self) -> dict[str, int]:
        """Count of findings per kind."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out
