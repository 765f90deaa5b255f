"""nvidia-smi -q that is empty, printed NVML errors instead of values, listed a GPU twice or
more GPUs than expected; lspci that printed only an error. Real base: the 565.57.01 H100 SXM
recording (tests/fixtures/health/nvidia-smi-q.565.h100x2.txt, see the README); the error
strings are written here into its values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.model import RemedyKind, Status
from provisioner.health.nvsmi import parse_nvsmi

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
REAL = (FIX / "nvidia-smi-q.565.h100x2.txt").read_text()
HEAD, GPU0, GPU1 = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", REAL)
H100 = Expectations(gpus=2, gpu_model="H100", settings=HealthSettings(dcgm_exporter=False),
                    firmware={"gpu_vbios": "96.00.74.00.01"})


def run(nvsmi: str | tuple[int, str], expect: Expectations = H100, **more: str):
    rc, text = nvsmi if isinstance(nvsmi, tuple) else (0, nvsmi)
    sections = {"nvsmi": Section("nvsmi", rc, text),
                **{k: Section(k, 0, v) for k, v in more.items()}}
    return {r.id: r for r in run_checks(Context(host="h1", sections=sections, expect=expect))}


def every_value(block: str, value: str) -> str:
    """The GPU block with every "Key : value" leaf replaced (written here)."""
    return re.sub(r"(?m)^(\s+[^:\n]+?\s*:\s).+$", lambda m: m.group(1) + value, block)


def test_real_565_recording_passes_and_reads_module_id_under_platform_info():
    res = run(REAL)
    for cid in ("gpu.count", "gpu.ecc", "gpu.row_remap", "firmware.versions"):
        assert res[cid].status is Status.PASS, (cid, res[cid].summary)
    labels = [g.label() for g in parse_nvsmi(REAL).gpus]
    assert labels[0] == "GPU at PCI 0000:18:00.0 module 2 serial 1654423001593"


@pytest.mark.parametrize("check", ["gpu.count", "gpu.ecc", "gpu.row_remap", "gpu.throttle"])
def test_empty_nvidia_smi_with_exit_0_cannot_be_judged(check):
    r = run("")[check]
    assert r.status is Status.ERROR and "nvidia-smi printed nothing" in r.summary


@pytest.mark.parametrize("value", ["GPU requires reset", "[GPU requires reset]", "Unknown Error",
                                   "[Unknown Error]", "ERR!"])
def test_a_gpu_printing_errors_needs_a_reset_naming_it(value):
    res = run(HEAD + every_value(GPU0, value) + GPU1)
    for cid in ("gpu.count", "gpu.ecc", "gpu.row_remap"):
        r = res[cid]
        assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.RESET_GPU, (cid, r.summary)
        assert r.remedy.part == "GPU at PCI 0000:18:00.0", cid
    assert "serial" not in res["gpu.count"].remedy.part
    assert res["firmware.versions"].status is Status.WARN  # not "off the manifest -> reimage"
    assert res["firmware.versions"].remedy.kind is RemedyKind.NONE


@pytest.mark.parametrize("value", ["Unknown Error", "GPU requires reset"])
def test_gpus_answering_only_errors_are_not_not_applicable(value):
    res = run(HEAD + every_value(GPU0, value) + every_value(GPU1, value))
    for cid in ("gpu.ecc", "gpu.row_remap"):
        assert res[cid].status is Status.FAIL and res[cid].remedy.kind is RemedyKind.RESET_GPU


def test_unknown_error_in_a_field_no_check_judges_is_not_a_fault():
    # leptonai/gpud's valid 535.154.05 RTX 4090 recording prints this on every healthy GPU.
    text = REAL.replace("    Persistence Mode                      : Enabled",
                        "    Persistence Mode                      : Enabled\n"
                        "    Addressing Mode                       : Unknown Error")
    assert "Addressing Mode" in text
    assert run(text)["gpu.count"].status is Status.PASS


def test_tab_indented_output_keeps_its_fields():
    res = run(REAL.replace("    ", "\t"))
    assert res["gpu.ecc"].status is Status.PASS and res["gpu.row_remap"].status is Status.PASS


def test_a_gpu_listed_twice_does_not_hide_a_missing_one():
    r = run(HEAD + GPU0 + GPU0)["gpu.count"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REBOOT
    assert r.observed["driver_gpus"] == 1
    assert "listed twice: GPU 0000:18:00.0" in r.evidence


def test_more_gpus_than_the_profile_expects_warns():
    r = run(REAL, Expectations(gpus=1, gpu_model="H100"))["gpu.count"]
    assert r.status is Status.WARN and "profile expects 1" in r.summary


@pytest.mark.parametrize("junk", ["lspci: Unable to load libkmod resources: error -2",
                                  "pcilib: Cannot open /proc/bus/pci"])
def test_lspci_printing_only_an_error_cannot_be_judged(junk):
    r = run(REAL, lspci=junk)["gpu.count"]
    assert r.status is Status.ERROR and r.remedy.kind is RemedyKind.NONE
