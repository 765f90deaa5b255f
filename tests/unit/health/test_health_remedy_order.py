"""A host's remedy and the order of its findings: the most expensive remedy among failing
results, whatever order the checks ran in; failing findings before warnings even when a warning
names a dearer remedy; then the part's name in natural order (text as text, numbers by value)."""

from __future__ import annotations

from itertools import permutations

import pytest

from provisioner.health.model import (
    CheckResult,
    Finding,
    Remedy,
    RemedyKind,
    Status,
    finding_order,
    worst_remedy,
)


def _result(status: Status, kind: RemedyKind) -> CheckResult:
    return CheckResult(id=f"t.{kind}", status=status, summary="", remedy=Remedy(kind=kind))


@pytest.mark.parametrize("order", list(permutations(
    [RemedyKind.REBOOT, RemedyKind.REPAIR, RemedyKind.RESET_GPU])))
def test_the_host_remedy_is_the_dearest_failing_one_in_any_order(
        order: tuple[RemedyKind, ...]) -> None:
    results = [_result(Status.FAIL, k) for k in order]
    assert worst_remedy(results).kind is RemedyKind.REPAIR


def test_a_warning_or_a_pass_never_sets_the_host_remedy() -> None:
    results = [_result(Status.ERROR, RemedyKind.REBOOT), _result(Status.WARN, RemedyKind.REPAIR),
               _result(Status.PASS, RemedyKind.REIMAGE)]
    assert worst_remedy(results).kind is RemedyKind.REBOOT
    assert worst_remedy([]).kind is RemedyKind.NONE


def _finding(status: Status, kind: RemedyKind, part: str) -> Finding:
    return Finding(status=status, summary=part, remedy=kind, part=part)


def test_failing_findings_come_before_warnings_with_a_dearer_remedy() -> None:
    findings = [_finding(Status.WARN, RemedyKind.REPAIR, "psu1"),
                _finding(Status.FAIL, RemedyKind.NONE, "gpu0"),
                _finding(Status.FAIL, RemedyKind.REBOOT, "gpu1")]
    assert [f.part for f in sorted(findings, key=finding_order)] == ["gpu1", "gpu0", "psu1"]


@pytest.mark.parametrize(("parts", "ordered"), [
    (["mlx5_10/1", "mlx5_3/1", "mlx5_03/2"], ["mlx5_3/1", "mlx5_03/2", "mlx5_10/1"]),
    (["gpu10", "gpu9"], ["gpu9", "gpu10"]),  # the first number too
    (["ib", "eth"], ["eth", "ib"]),  # text by letters, not by length
    (["rail1 b", "rail1 aa"], ["rail1 aa", "rail1 b"]),  # also after a number
])
def test_parts_sort_in_natural_order(parts: list[str], ordered: list[str]) -> None:
    findings = [_finding(Status.FAIL, RemedyKind.REPAIR, p) for p in parts]
    assert [f.part for f in sorted(findings, key=finding_order)] == ordered
