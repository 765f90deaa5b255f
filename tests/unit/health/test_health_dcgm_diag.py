"""``dcgmi diag -j`` of DCGM 2.x, 3.x and 4.x judged by its results, never crashing on JSON of
another shape; an entry the parser cannot place is named, never a whole-host error.

The real recording is DCGM 3.1.0's own ("JsonResult: Deserialize real output" in NVIDIA/DCGM);
the variants beside it are written from DCGM's JSON writers and schema (see its PROVENANCE.md).
DCGM's GPU ids are matched to nvidia-smi's PCI addresses with the real 8x H100 recordings
(nvidia-smi -q of driver 535.161.08 and the lspci -vvv of the same kind of HGX board).
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
from provisioner.health.dcgm_diag import find_document, parse_diag
from provisioner.health.model import RemedyKind, Status
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
DCGM = ("dcgm", "dcgmi-diag-json-nvidia-dcgm")


def dcgm(name: str) -> str:
    return corpus_path(*DCGM, name).read_text()


def hgx_sections() -> dict[str, Section]:
    """The real HGX H100 host: nvidia-smi -q (535.161.08) and lspci -vvv (PEX switch slots)."""
    nvsmi = corpus_path("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud",
                        "nvidia-smi-query.535.161.08.out.0.valid").read_text()
    lspci = corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text()
    return {"nvsmi": Section("nvsmi", 0, nvsmi), "lspci": Section("lspci", 0, lspci)}


def diag(text: str, rc: int = 0, host: dict[str, Section] | None = None):
    sections = {**(host or {}), "dcgm_diag": Section("dcgm_diag", rc, text)}
    ctx = Context(host="h1", sections=sections, expect=Expectations(gpus=8), deep=True)
    return check_dcgm_diag(ctx)


def test_real_dcgm_3_1_pass_with_null_entries_passes():
    # The issue: "error: cannot judge ... tests[1] is NoneType" on every passing DCGM 3.1 host.
    r = diag(dcgm("dcgmi-diag-j.3.1.0.8gpu.pass.txt"))
    assert r.status is Status.PASS, r.summary
    assert r.observed["version"] == "3.1.0" and r.observed["results"] == 17
    assert r.observed["null_entries"] == 8 and r.observed["unplaced"] == []


def test_dcgm_3_1_failure_in_capitals_names_the_gpu_by_pci_address_and_slot():
    doc = find_document(dcgm("dcgmi-diag-j.3.1.0.8gpu.pass.txt"))
    custom = doc["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]
    custom["name"] = "Memtest"
    custom["results"][5] = {"gpu_ids": 5, "status": "FAIL", "warnings": ["memtest: miscompare at 0x7f"]}
    r = diag(json.dumps(doc), 226, hgx_sections())
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    (f,) = r.findings
    # DCGM GPU 5 = nvidia-smi index 5 = 0000:bb:00.0, behind PEX port b9:01.0 (SltCap Slot #..).
    assert f.gpu is not None and f.gpu.pci == "0000:bb:00.0" and f.gpu.serial == "1650124048576"
    assert f.gpu.slot is not None and f"slot {f.gpu.slot}" in r.remedy.part
    assert "memtest: miscompare at 0x7f" in f.summary


def test_dcgm_2x_null_result_slot_and_string_warnings():
    r = diag(dcgm("written.dcgm-2.4.r2.gpu6-pcie-fails.json"), 226, hgx_sections())
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    (f,) = r.findings
    assert f.gpu.pci == "0000:cb:00.0" and f.gpu.index == 6
    assert "host-to-device bandwidth 4.12 GB/s" in f.summary
    assert r.observed["null_entries"] == 1 and r.observed["unplaced"] == []


def test_dcgm_3_3_gpu_named_by_its_serial_not_its_position():
    # DCGM saw two of the host's GPUs: its GPU 1 is the host's index 6.
    r = diag(dcgm("written.dcgm-3.3.r2.container-two-gpus.json"), 226, hgx_sections())
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    (f,) = r.findings
    assert f.gpu.pci == "0000:cb:00.0" and f.gpu.serial == "1650124047010"
    assert "(by serial)" in f.evidence[-1]
    assert len(r.observed["skipped"]) == 2 and r.observed["version"] == "3.3.7"


def test_dcgm_4_results_summary_only_failure_warning_and_skips():
    r = diag(dcgm("written.dcgm-4.2.r2.gpu3-memory-fails.json"), 226, hgx_sections())
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    summaries = [f.summary for f in r.findings]
    assert [f.status for f in r.findings] == [Status.FAIL, Status.FAIL, Status.WARN]
    assert r.findings[0].gpu.pci == "0000:5d:00.0"  # GPU 3, by serial 1650124032506
    assert "a GPU DCGM did not name" in summaries[1] and "power sensor" in summaries[1]
    assert r.findings[2].gpu.pci == "0000:bb:00.0" and "replay count 112" in summaries[2]
    assert len(r.observed["skipped"]) == 8 and r.observed["driver"] == "570.148.08"


def test_iterations_are_all_judged():
    r = diag(dcgm("written.dcgm-3.3.iterations-2.second-fails.json"), 226, hgx_sections())
    assert r.status is Status.FAIL
    (f,) = r.findings  # DCGM GPU 0 of the second run: the host's GPU with serial ...48576
    assert f.gpu.serial == "1650124048576" and f.gpu.pci == "0000:bb:00.0"
    assert r.observed["results"] == 2 * 15


def test_without_nvidia_smi_the_dcgm_id_is_still_named():
    r = diag(dcgm("written.dcgm-2.4.r2.gpu6-pcie-fails.json"), 226)
    assert r.status is Status.FAIL and r.remedy.part == "DCGM GPU 6 (not found in nvidia-smi -q)"


def test_deployment_failures_need_software_not_a_new_gpu():
    doc = json.loads(dcgm("written.dcgm-3.3.r2.container-two-gpus.json"))
    tests = doc["DCGM GPU Diagnostic"]["test_categories"][0]["tests"]
    persistence = next(t for t in tests if t["name"] == "Persistence Mode")
    # 3.3's deployment writer: gpu_id as a number, the text under "warnings" in the object.
    persistence["results"] = [{"gpu_id": 1, "status": "Fail", "warnings": [
        {"warnings": "Persistence mode for GPU 1 is disabled", "error_id": 11}]}]
    r = diag(json.dumps(doc), 226, hgx_sections())
    kinds = [(f.remedy, f.gpu.pci if f.gpu else None) for f in r.findings]
    assert kinds == [(RemedyKind.REPAIR, "0000:cb:00.0"), (RemedyKind.REIMAGE, "0000:cb:00.0")]
    assert "Persistence mode for GPU 1 is disabled" in r.findings[1].summary


def test_an_entry_that_cannot_be_placed_is_named_and_the_rest_judged():
    doc = json.loads(dcgm("written.dcgm-4.2.r2.gpu3-memory-fails.json"))
    cats = doc["DCGM Diagnostic"]["test_categories"]
    cats[0]["tests"][0]["results"][2]["status"] = "Flaky"
    cats[1]["tests"].append(17)
    cats[2]["tests"][0]["results"][3]["entity_id"] = "three"
    r = diag(json.dumps(doc), 226, hgx_sections())
    assert r.status is Status.FAIL  # GPU 3's failure is still a failure, though unplaced
    unplaced = r.observed["unplaced"]
    assert "test_categories[0].tests[0].results[2]: status 'Flaky' is not one DCGM writes" in unplaced
    assert "test_categories[1].tests[1]: is int, not an object" in unplaced
    assert any("entity_id 'three' names no entity" in u for u in unplaced)
    assert sum(f.summary.startswith("dcgmi diag output at") for f in r.findings) == 3


def test_passing_results_beside_an_unreadable_entry_warn_not_error():
    text = dcgm("dcgmi-diag-j.3.1.0.8gpu.pass.txt").replace('"PASS"', '"PASSED?"', 1)
    r = diag(text)
    assert r.status is Status.WARN and "Denylist" not in r.summary
    assert "results[0] not judged: status 'PASSED?'" in r.findings[0].summary


def test_every_test_skipped_cannot_be_judged():
    doc = json.loads(dcgm("written.dcgm-3.3.r2.container-two-gpus.json"))
    for cat in doc["DCGM GPU Diagnostic"]["test_categories"]:
        for test in cat["tests"]:
            for res in test["results"]:
                res["status"] = "Skip"
    r = diag(json.dumps(doc))
    assert r.status is Status.ERROR and "every test was skipped" in r.summary


def test_dcgm3_fixture_still_names_its_gpu():
    r = diag((FIX / "dcgmi-diag-r2.one-fail.json").read_text(), 226)
    assert r.status is Status.FAIL and r.remedy.part == "DCGM GPU 1 (not found in nvidia-smi -q)"


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
    '{"iterations": [null, 3]}',
    '{"other": 1}',
    "[1, 2]",
    "{" * 100000,
    '{"x": ' + "9" * 5000 + "}",
])
def test_wrong_shapes_are_cannot_judge_errors_never_exceptions(text):
    r = diag(text)  # the check itself, not run_checks: nothing may escape it
    assert r.status is Status.ERROR
    assert all(len(e) <= 300 for e in r.evidence)


def test_json_is_found_among_banner_and_stderr_lines():
    text = "Error: {something} went wrong\n" + dcgm("written.dcgm-4.2.r2.gpu3-memory-fails.json") + \
        "\nSuccessfully ran diagnostic for group.\n"
    r = diag(text, 226, hgx_sections())
    assert r.status is Status.FAIL and r.findings[0].gpu.pci == "0000:5d:00.0"


def test_exit_205_with_every_test_passing_is_judged_by_the_results():
    r = diag(dcgm("dcgmi-diag-j.3.1.0.8gpu.pass.txt"), 205)
    assert r.status is Status.PASS and "exit 205" in r.summary


def test_other_exit_status_without_a_failing_result_cannot_be_judged():
    r = diag(dcgm("dcgmi-diag-j.3.1.0.8gpu.pass.txt"), 226)
    assert r.status is Status.ERROR and "226" in r.summary


def test_warn_status_warns_naming_the_gpu():
    doc = json.loads(dcgm("written.dcgm-4.2.r2.gpu3-memory-fails.json"))
    hw = doc["DCGM Diagnostic"]["test_categories"][2]["tests"]
    hw[0]["results"][3]["status"] = "Pass"
    hw[0]["test_summary"]["status"] = "Pass"
    hw[2]["test_summary"]["status"] = "Pass"
    r = diag(json.dumps(doc), 0, hgx_sections())
    assert r.status is Status.WARN and r.remedy.kind is RemedyKind.NONE
    assert r.findings[0].gpu.index == 5


def test_parse_reads_serials_of_3_3_and_4_x():
    three = parse_diag(json.loads(dcgm("written.dcgm-3.3.r2.container-two-gpus.json")))
    four = parse_diag(json.loads(dcgm("written.dcgm-4.2.r2.gpu3-memory-fails.json")))
    assert three.serials == {0: "1650124048576", 1: "1650124047010"}
    assert four.serials[3] == "1650124032506" and four.version == "4.2.3"


def test_dcgm_diag_through_run_checks_has_no_crash_message():
    ctx = Context(host="h1", sections={"dcgm_diag": Section("dcgm_diag", 0, "[1]")},
                  expect=Expectations(gpus=8), deep=True)
    r = {x.id: x for x in run_checks(ctx)}["gpu.dcgm_diag"]
    assert r.status is Status.ERROR and "crashed" not in r.summary
