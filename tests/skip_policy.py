"""A pytest plugin that keeps the suite from going green by skipping.

A test may skip only because the machine lacks one capability from the explicit list in
tests/support/machine.py (root, /dev/net/tun, ...), in the wording `machine.needs`/`require`
write. Anything else fails the run, in CI and outside it alike: a recording not found, a tool
`scripts/install-deps` installs (tests fail for those, naming the fix), an `importorskip`, a
capability not on the list, or one this machine has (a skip that names root while running as
root hides another reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.support.machine import CAPABILITIES, REASON


def refusal(reason: str) -> str | None:
    """Why a skip with this reason is refused, or None when it names a capability truly lacking."""
    m = REASON.match(reason)
    if m is None:
        return "names no machine capability"
    cap = CAPABILITIES.get(m["name"])
    if cap is None:
        return f"{m['name']!r} is not a machine capability ({', '.join(CAPABILITIES)})"
    if cap.probe():
        return f"this machine has {cap.name}"
    return None


@dataclass
class SkipAudit:
    """Skip reasons seen in this run that the policy refused, with why."""

    refused: list[tuple[str, str, str]] = field(default_factory=list)

    def judge(self, nodeid: str, reason: str) -> None:
        why = refusal(reason)
        if why is not None:
            self.refused.append((nodeid, reason, why))


# A stack, not one object: a pytester run nests a session inside the outer one.
_AUDITS: list[SkipAudit] = []


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_sessionstart(session: pytest.Session) -> None:
    _AUDITS.append(SkipAudit())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and _AUDITS:
        _AUDITS[-1].judge(report.nodeid, _reason(report))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A module-level skip (pytest.skip(allow_module_level=True), importorskip) skips at collection.
    if report.skipped and _AUDITS:
        _AUDITS[-1].judge(report.nodeid, _reason(report))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    refused = _AUDITS[-1].refused if _AUDITS else []
    if not refused:
        return
    terminalreporter.section("skips refused (only a machine capability it lacks may skip a test)")
    for nodeid, reason, why in refused:
        terminalreporter.line(f"{nodeid}: {reason} -- refused: {why}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # NO_TESTS_COLLECTED too: a run whose only module skipped at collection is no pass.
    green = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    if _AUDITS and _AUDITS[-1].refused and exitstatus in green:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    if _AUDITS:
        _AUDITS.pop()
