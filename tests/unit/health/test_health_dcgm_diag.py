"""``dcgmi diag -j`` judged for DCGM 3.x and 4.x, and never crashing on JSON of another shape.

The 4.x documents are written here from the field names of NVIDIA/DCGM (Apache-2.0, commit
72fa3feaa67d716a75323a8f47c34ff3ee73f824): nvvs/include/NvvsJsonStrings.h (NVVS_NAME
"DCGM Diagnostic", entity_group, entity_id, test_summary, warnings/warning/error_id),
dcgmi/Diag.cpp HelperJsonAddResult, and testing/python3/tests/test_dcgm_diag.py (~l.1520). No
real 4.x output with a citable source was found.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.checks.gpu import check_dcgm_diag
from provisioner.health.collector import Section
from provisioner.health.config import Expectations
from provisioner.health.model import RemedyKind, Status

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"


def _result(gpu: int, status: str, warning: str | None = None) -> dict[str, object]:
    res: dict[str, object] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu,
                              "status": status}
    if warning:
        res["warnings"] = [{"warning": warning, "error_id": 95, "error_category": 4,
                            "error_severity": 2}]
    return res


def v4(memory_gpu3: str = "Fail") -> str:
    """A DCGM 4.x document (written here): GPU 3 fails (or passes) the memory test."""
    warn = "GPU 3 had uncorrectable memory errors" if memory_gpu3 == "Fail" else None
    doc = {"DCGM Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [{"name": "software", "results": [_result(0, "Pass")],
                                              "test_summary": {"status": "Pass"}}]},
        {"category": "Hardware", "tests": [{"name": "memory", "results": [
            _result(0, "Pass"), _result(3, memory_gpu3, warn)],
            "test_summary": {"status": memory_gpu3}}]}],
        "version": "4.2.3", "Driver Version Detected": "570.148.08"}}
    return json.dumps(doc, indent=3)


def diag(text: str, rc: int = 0):
    ctx = Context(host="h1", sections={"dcgm_diag": Section("dcgm_diag", rc, text)},
                  expect=Expectations(gpus=8), deep=True)
    return check_dcgm_diag(ctx)


@pytest.mark.parametrize("rc", [226, 0])
def test_dcgm4_failing_test_names_the_gpu_whatever_the_exit_status(rc):
    r = diag(v4(), rc)
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    assert r.remedy.part == "GPU 3"
    assert r.evidence == ["memory: GPU 3 GPU 3 had uncorrectable memory errors"]


def test_dcgm4_passing_run_passes():
    r = diag(v4("Pass"))
    assert r.status is Status.PASS and r.observed["results"] == 3


def test_dcgm4_failure_only_in_the_test_summary_is_still_a_failure():
    doc = json.loads(v4("Pass"))
    doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["test_summary"] = {
        "status": "Fail", "warnings": [{"warning": "plugin error", "error_id": 1}]}
    r = diag(json.dumps(doc), 226)
    assert r.status is Status.FAIL and r.evidence == ["memory: (no GPU named) plugin error"]


def test_dcgm3_fixture_still_names_its_gpu():
    r = diag((FIX / "dcgmi-diag-r2.one-fail.json").read_text(), 226)
    assert r.status is Status.FAIL and r.remedy.part == "GPU 1"


def test_dcgm_runtime_error_is_an_error():
    text = json.dumps({"DCGM Diagnostic": {"version": "4.2.3",
                                            "runtime_error": "Unable to run the diagnostic"}})
    r = diag(text, 226)
    assert r.status is Status.ERROR and "Unable to run" in r.summary


@pytest.mark.parametrize("text", [
    '{"DCGM GPU Diagnostic": null}',
    '{"DCGM Diagnostic": "x"}',
    '{"DCGM GPU Diagnostic": {"test_categories": null}}',
    '{"DCGM GPU Diagnostic": {"test_categories": "abc"}}',
    '{"DCGM GPU Diagnostic": {"test_categories": [5]}}',
    '{"DCGM GPU Diagnostic": {"test_categories": [{"tests": null}]}}',
    '{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": ["Fail"]}]}]}}',
    '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": [{"status": 1}]}]}]}}',
    '{"DCGM GPU Diagnostic": NaN}',
    '{"DCGM GPU Diagnostic": {"test_categories": []}}',
    '{"other": 1}',
    "[1, 2]",
    "{" * 100000,
    '{"x": ' + "9" * 5000 + "}",
])
def test_wrong_shapes_are_cannot_judge_errors_never_exceptions(text):
    r = diag(text)  # the check itself, not run_checks: nothing may escape it
    assert r.status is Status.ERROR
    assert all(len(e) <= 200 for e in r.evidence)


def test_json_is_found_among_banner_and_stderr_lines():
    text = "Error: {something} went wrong\n" + v4() + "\nSuccessfully ran diagnostic for group.\n"
    r = diag(text, 226)
    assert r.status is Status.FAIL and r.remedy.part == "GPU 3"
    fixture = (FIX / "dcgmi-diag-r2.one-fail.json").read_text()
    assert diag(fixture + "\nsome stderr line", 226).remedy.part == "GPU 1"


def test_exit_205_with_every_test_passing_is_judged_by_the_results():
    r = diag(v4("Pass"), 205)
    assert r.status is Status.PASS and "exit 205" in r.summary


def test_other_exit_status_without_a_failing_result_cannot_be_judged():
    r = diag(v4("Pass"), 226)
    assert r.status is Status.ERROR and "226" in r.summary


def test_warn_status_warns():
    r = diag(v4("Warn"))
    assert r.status is Status.WARN


def test_dcgm_diag_through_run_checks_has_no_crash_message():
    ctx = Context(host="h1", sections={"dcgm_diag": Section("dcgm_diag", 0, "[1]")},
                  expect=Expectations(gpus=8), deep=True)
    r = {x.id: x for x in run_checks(ctx)}["gpu.dcgm_diag"]
    assert r.status is Status.ERROR and "crashed" not in r.summary
