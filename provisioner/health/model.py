"""What a health check reports: status, severity, remedy, evidence; and the verdict of a host."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from provisioner.health.kinds import RemedyKind


class Status(StrEnum):
    """Outcome of one check on one host."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NOT_APPLICABLE = "not_applicable"
    ERROR = "error"  # the check could not run (collector missing, output unreadable)


class Severity(StrEnum):
    """How much a non-passing result matters for training jobs."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


_REMEDY_RANK = {k: i for i, k in enumerate(RemedyKind)}


class Remedy(BaseModel):
    """A remedy, naming the part for repairs (e.g. "GPU at PCI 0000:18:00.0 serial 1654922006536")."""

    kind: RemedyKind = RemedyKind.NONE
    part: str | None = None
    detail: str | None = None

    def rank(self) -> int:
        """Order of cost: none < reset_gpu < reboot < reimage < repair."""
        return _REMEDY_RANK[self.kind]


NO_REMEDY = Remedy()


class GpuRef(BaseModel):
    """Where a GPU is, the ways a technician finds it: PCI address (nvidia-smi Bus Id, lspci),
    the PCIe slot the OS reports, the BMC's name for its position, module slot and serial."""

    pci: str
    index: int | None = None  # nvidia-smi / NVML index (what DCGM and nvlink --status number)
    slot: str | None = None  # PCIe slot from sysfs / lspci ("Physical Slot", SltCap "Slot #")
    bmc_slot: str | None = None  # the BMC's location of this GPU (discovery), e.g. HGX_GPU_SXM_4
    module: int | None = None
    serial: str | None = None

    def label(self) -> str:
        """"GPU at PCI 0000:19:00.0 slot 28 module 1 serial 1654922006536"."""
        bits = [f"GPU at PCI {self.pci}"]
        if self.slot:
            bits.append(f"slot {self.slot}")
        if self.bmc_slot:
            bits.append(f"BMC {self.bmc_slot}")
        if self.module is not None:
            bits.append(f"module {self.module}")
        if self.serial:
            bits.append(f"serial {self.serial}")
        return " ".join(bits)


class Finding(BaseModel):
    """One fault a check found (one GPU, one link, one test result), with its own remedy."""

    status: Status
    summary: str
    remedy: RemedyKind = RemedyKind.NONE
    part: str | None = None
    gpu: GpuRef | None = None
    detail: str | None = None
    evidence: list[str] = Field(default_factory=list)
    # How findings of one kind read together in the check's summary ("{n} GPU(s) ECC off").
    headline: str | None = Field(default=None, exclude=True)

    @property
    def failing(self) -> bool:
        """A fail or error (it needs its remedy), not a warning."""
        return self.status in (Status.FAIL, Status.ERROR)


def _natural(text: str) -> list[tuple[int, str]]:
    """"mlx5_3/1" before "mlx5_10/1": digit runs compare by length, then text (no int(): a
    hostile run of 5,000 digits must not cost anything)."""
    return [(len(t.lstrip("0")), t.lstrip("0")) if i % 2 else (0, t)
            for i, t in enumerate(re.split(r"([0-9]+)", text))]


def finding_order(f: Finding) -> tuple[int, int, list[tuple[int, str]]]:
    """Failing findings first, the most expensive remedy first; then warnings; then by part
    (PCI address, rail), numbers in their order."""
    return (0 if f.failing else 1, -_REMEDY_RANK[f.remedy],
            _natural(f.gpu.pci if f.gpu else (f.part or "")))


class CheckResult(BaseModel):
    """One check's result on one host, with what was seen and the limit it was judged against."""

    id: str
    status: Status
    summary: str
    severity: Severity = Severity.INFO
    observed: dict[str, Any] = Field(default_factory=dict)
    threshold: dict[str, Any] = Field(default_factory=dict)
    remedy: Remedy = Field(default_factory=Remedy)
    evidence: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)  # each GPU/link/result, remedy order

    @property
    def clean(self) -> bool:
        """Whether this result allows a host to count the run as clean (towards golden)."""
        return self.status in (Status.PASS, Status.NOT_APPLICABLE)


class Verdict(StrEnum):
    """A host's fitness for training."""

    GOLDEN = "golden"  # healthy and clean for the site's golden_after consecutive runs
    HEALTHY = "healthy"
    NEEDS_ATTENTION = "needs-attention"


class HostReport(BaseModel):
    """All results of one run on one host, with the verdict and the remedy that drives follow-up."""

    host: str
    run_id: str
    started_at: str
    duration_s: float
    results: list[CheckResult]
    verdict: Verdict = Verdict.HEALTHY
    remedy: Remedy = Field(default_factory=Remedy)
    clean_streak: int = 0

    @property
    def clean(self) -> bool:
        """No warning, failure or error in this run."""
        return all(r.clean for r in self.results)

    @property
    def failed(self) -> list[CheckResult]:
        """The results that make the host need attention (fail or error)."""
        return [r for r in self.results if r.status in (Status.FAIL, Status.ERROR)]


def worst_remedy(results: list[CheckResult]) -> Remedy:
    """The most expensive remedy among failing results (a repair beats a reboot)."""
    best = NO_REMEDY
    for r in results:
        if r.status in (Status.FAIL, Status.ERROR) and r.remedy.rank() > best.rank():
            best = r.remedy
    return best


def judge(report: HostReport, golden_after: int, previous_clean_streak: int) -> HostReport:
    """Set verdict, remedy and clean streak on a report from its results and the host's history."""
    streak = previous_clean_streak + 1 if report.clean else 0
    if report.failed:
        verdict = Verdict.NEEDS_ATTENTION
    elif streak >= golden_after:
        verdict = Verdict.GOLDEN
    else:
        verdict = Verdict.HEALTHY
    return report.model_copy(
        update={"verdict": verdict, "remedy": worst_remedy(report.results), "clean_streak": streak}
    )
