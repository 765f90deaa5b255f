"""gpu.ecc at the edges of its counts: one uncorrectable error is one too many, and the remedy of
a host whose GPUs need different repairs is the one that fixes them all. Real base: the
565.57.01 H100 SXM recording (tests/fixtures/health/nvidia-smi-q.565.h100x2.txt); the counts
and modes are written here into its values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.model import CheckResult, RemedyKind, Status

REAL = (Path(__file__).resolve().parents[2] / "fixtures" / "health"
        / "nvidia-smi-q.565.h100x2.txt").read_text()
H100 = Expectations(gpus=2, gpu_model="H100", settings=HealthSettings(dcgm_exporter=False))
GPU0 = "0000:18:00.0"  # the first GPU block of the recording


def ecc(text: str) -> CheckResult:
    sections = {"nvsmi": Section("nvsmi", 0, text)}
    results = run_checks(Context(host="h1", sections=sections, expect=H100))
    return next(r for r in results if r.id == "gpu.ecc")


def write(text: str, gpu: int, path: tuple[str, ...], value: str) -> str:
    """``value`` written at ``section > subsection > key`` of GPU ``gpu``'s block (0 = first)."""
    parts = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", text)
    block = parts[gpu + 1]
    start = 0
    for depth, name in enumerate(path[:-1], 1):
        start = block.index(f"\n{'    ' * depth}{name}\n", start) + 1
    pattern = rf"(?m)^(\s+{re.escape(path[-1])}\s*:\s).*$"
    head, tail = block[:start], block[start:]
    parts[gpu + 1] = head + re.sub(pattern, lambda m: m.group(1) + value, tail, count=1)
    return "".join(parts)


def test_the_recording_as_is_passes() -> None:
    assert ecc(REAL).status is Status.PASS


@pytest.mark.parametrize("counter", ["DRAM Uncorrectable", "SRAM Uncorrectable SEC-DED",
                                     "SRAM Uncorrectable Parity"])
def test_one_uncorrectable_error_since_driver_load_fails_the_gpu(counter: str) -> None:
    r = ecc(write(REAL, 0, ("ECC Errors", "Volatile", counter), "1"))
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.RESET_GPU, r.summary
    (f,) = r.findings
    assert f.gpu is not None and f.gpu.pci == GPU0
    assert "1 uncorrectable ECC error(s) since driver load" in f.summary


def test_one_uncorrectable_error_in_the_past_is_a_warning() -> None:
    r = ecc(write(REAL, 1, ("ECC Errors", "Aggregate", "DRAM Uncorrectable"), "1"))
    assert r.status is Status.WARN and r.remedy.kind is RemedyKind.NONE, r.summary
    assert "1 uncorrectable ECC error(s) in the past" in r.findings[0].summary


def test_a_correctable_error_is_no_finding() -> None:
    r = ecc(write(REAL, 0, ("ECC Errors", "Volatile", "DRAM Correctable"), "1"))
    assert r.status is Status.PASS and r.findings == []


def _ecc_off(text: str, gpu: int, pending: str) -> str:
    text = write(text, gpu, ("ECC Mode", "Current"), "Disabled")
    return write(text, gpu, ("ECC Mode", "Pending"), pending)


@pytest.mark.parametrize(("pending", "remedy"), [
    (("Enabled", "Enabled"), RemedyKind.REBOOT),  # a reboot turns ECC on on both
    (("Enabled", "Disabled"), RemedyKind.REIMAGE),  # any GPU not pending: the reboot is not enough
    (("Disabled", "Enabled"), RemedyKind.REIMAGE),
    (("Disabled", "Disabled"), RemedyKind.REIMAGE),
])
def test_ecc_off_remedy_is_a_reboot_only_when_every_gpu_has_ecc_pending(
        pending: tuple[str, str], remedy: RemedyKind) -> None:
    text = _ecc_off(_ecc_off(REAL, 0, pending[0]), 1, pending[1])
    r = ecc(text)
    assert r.status is Status.FAIL and r.remedy.kind is remedy, r.summary
    assert len(r.findings) == 2


def test_one_error_is_in_the_evidence_against_a_limit_of_zero() -> None:
    """The result's evidence names each GPU with an uncorrectable error, one error included,
    and the limit it was judged against is zero (what `health --json` and the ticket show)."""
    text = write(REAL, 0, ("ECC Errors", "Volatile", "DRAM Uncorrectable"), "1")
    text = write(text, 1, ("ECC Errors", "Aggregate", "DRAM Uncorrectable"), "1")
    r = ecc(text)
    gpu1 = r.findings[1].gpu
    assert gpu1 is not None and gpu1.pci != GPU0
    assert r.observed == {"ecc_off": [], "uncorrectable_volatile": {GPU0: 1},
                          "uncorrectable_aggregate": {gpu1.pci: 1}}
    assert r.threshold == {"ecc": "Enabled", "uncorrectable_volatile": 0}


def test_clean_gpus_leave_the_evidence_empty() -> None:
    r = ecc(REAL)
    assert r.observed == {"ecc_off": [], "uncorrectable_volatile": {},
                          "uncorrectable_aggregate": {}}
