"""A pytest plugin that keeps the suite from going green by skipping.

A test may skip only because the machine lacks a capability it names (root, a device, a tool the
project's install script puts there). Anything else (a recording not found, a role missing, a
feature "not yet") is a failure of the run. Under CI (``CI`` set) a missing tool is a failure too:
`scripts/install-deps` installs every tool the tests need, so a skip there hides a missing step.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import pytest

# Reasons that name what the machine lacks, in the wording the suite's skips use.
MACHINE = re.compile(r"\bneeds? root\b|\blab needs root\b|/dev/(net/tun|kvm)\b|\bcreates /var/run/"
                     r"|\bgeteuid\b|\bas root\b|\bnetwork namespace", re.I)
TOOL = re.compile(r"not installed|could not import|prerequisites missing|missing .*install-deps"
                  r"|^missing [\w., -]+$", re.I)


@dataclass
class SkipAudit:
    """Skip reasons seen in this run, sorted into allowed and refused."""

    refused: list[tuple[str, str]] = field(default_factory=list)

    def judge(self, nodeid: str, reason: str) -> None:
        if MACHINE.search(reason):
            return
        if TOOL.search(reason) and not os.environ.get("CI"):
            return
        self.refused.append((nodeid, reason))


# A stack, not one object: a pytester run nests a session inside the outer one.
_AUDITS: list[SkipAudit] = []


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_sessionstart(session: pytest.Session) -> None:
    _AUDITS.append(SkipAudit())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and _AUDITS:
        _AUDITS[-1].judge(report.nodeid, _reason(report))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    refused = _AUDITS[-1].refused if _AUDITS else []
    if not refused:
        return
    terminalreporter.section("skips refused (only a missing machine capability may skip)")
    for nodeid, reason in refused:
        terminalreporter.line(f"{nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _AUDITS and _AUDITS[-1].refused and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    if _AUDITS:
        _AUDITS.pop()
