"""What every check gets (the host's collected sections and expectations) and result helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from provisioner.health.collector import Section
from provisioner.health.config import Expectations
from provisioner.health.errors import ParseError
from provisioner.health.model import (
    CheckResult,
    Finding,
    GpuRef,
    Remedy,
    RemedyKind,
    Severity,
    Status,
    finding_order,
)
from provisioner.health.nvsmi import Gpu, NvsmiReport, parse_nvsmi
from provisioner.health.pcie import PciDevice, parse_lspci, pci_slots
from provisioner.health.xid import serials_from_kernel_log

MAX_EVIDENCE = 20


@dataclass
class Context:
    """One host's collected output, parsed lazily and shared by the checks."""

    host: str
    sections: dict[str, Section]
    expect: Expectations
    deep: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> Section | None:
        """A section, or None when the collector did not produce it (cut off, not run)."""
        return self.sections.get(name)

    def text(self, name: str) -> str:
        """A section's text ("" when absent or failed)."""
        s = self.sections.get(name)
        return s.text if s is not None and s.ok else ""

    @cached_property
    def nvsmi(self) -> NvsmiReport | None:
        """``nvidia-smi -q`` parsed; None when the tool is missing or failed."""
        s = self.sections.get("nvsmi")
        if s is None or not s.ok or not s.text.strip():
            return None
        return parse_nvsmi(s.text)

    @cached_property
    def pci(self) -> list[PciDevice]:
        """``lspci -vvv`` parsed (empty without lspci)."""
        return parse_lspci(self.text("lspci"))

    @cached_property
    def kernel_lines(self) -> list[str]:
        """The kernel log since boot."""
        return self.text("kernel_log").splitlines()

    def nvsmi_gpus(self) -> list[Gpu]:
        """nvidia-smi's GPUs in its (NVML index) order; empty when it cannot be read."""
        try:
            report = self.nvsmi
        except ParseError:
            return []
        return report.gpus if report else []

    @cached_property
    def slots(self) -> dict[str, str]:
        """PCI address -> the PCIe slot the OS reports (sysfs slots, lspci)."""
        return pci_slots(self.pci, self.text("pci_sysfs"))

    def gpu_ref(self, bus_id: str) -> GpuRef:
        """Everything that locates the GPU at ``bus_id``: its nvidia-smi index, PCIe slot,
        module and serial (from the kernel log when nvidia-smi does not list it)."""
        gpus = self.nvsmi_gpus()
        index = next((i for i, g in enumerate(gpus) if g.bus_id == bus_id), None)
        g = gpus[index] if index is not None else None
        serial = g.serial if g else serials_from_kernel_log(self.kernel_lines).get(bus_id)
        return GpuRef(pci=bus_id, index=index, slot=self.slots.get(bus_id),
                      module=g.module_id if g else None, serial=serial)

    def gpu_at_index(self, index: int) -> GpuRef | None:
        """The GPU nvidia-smi (and NVML, DCGM, ``nvlink --status``) numbers ``index``."""
        gpus = self.nvsmi_gpus()
        return self.gpu_ref(gpus[index].bus_id) if 0 <= index < len(gpus) else None

    def gpu_label(self, bus_id: str) -> str:
        """The best name for the GPU at ``bus_id``: PCI address, slot, module and serial."""
        return self.gpu_ref(bus_id).label()


CheckFn = Callable[[Context], CheckResult]


@dataclass(frozen=True)
class Check:
    """A registered check: its id, what it looks at, and whether it only runs with --deep."""

    id: str
    title: str
    fn: CheckFn
    deep_only: bool = False


def result(
    check_id: str,
    status: Status,
    summary: str,
    *,
    severity: Severity | None = None,
    observed: dict[str, Any] | None = None,
    threshold: dict[str, Any] | None = None,
    remedy: RemedyKind = RemedyKind.NONE,
    part: str | None = None,
    detail: str | None = None,
    evidence: list[str] | None = None,
) -> CheckResult:
    """Build a CheckResult; severity defaults from the status."""
    if severity is None:
        severity = {
            Status.FAIL: Severity.CRITICAL,
            Status.ERROR: Severity.WARNING,
            Status.WARN: Severity.WARNING,
        }.get(status, Severity.INFO)
    ev = list(evidence or [])
    if len(ev) > MAX_EVIDENCE:
        ev = [*ev[:MAX_EVIDENCE], f"... and {len(ev) - MAX_EVIDENCE} more"]
    return CheckResult(
        id=check_id, status=status, summary=summary, severity=severity,
        observed=observed or {}, threshold=threshold or {},
        remedy=Remedy(kind=remedy, part=part, detail=detail), evidence=ev,
    )


def finding(status: Status, summary: str, *, remedy: RemedyKind = RemedyKind.NONE,
            gpu: GpuRef | None = None, part: str | None = None, detail: str | None = None,
            evidence: list[str] | None = None, headline: str | None = None) -> Finding:
    """One fault; a GPU finding's part is the GPU's label unless told otherwise. ``headline``
    ("{n} GPU(s) with ECC off") says how findings of its kind read together in a summary."""
    return Finding(status=status, summary=summary, remedy=remedy, gpu=gpu,
                   part=part or (gpu.label() if gpu else None), detail=detail,
                   evidence=[e[:300] for e in (evidence or [])][:MAX_EVIDENCE], headline=headline)


def _summary(ordered: list[Finding]) -> str:
    """Findings of one kind counted under their headline, the others as they read."""
    groups: dict[str, list[Finding]] = {}
    for f in ordered:
        groups.setdefault(f.headline or f.summary, []).append(f)
    # One finding reads as itself (it names its part); several under their headline, counted
    # (replace(), not format(): a summary quotes host output, which may hold braces).
    texts = [fs[0].summary if len(fs) == 1 else key.replace("{n}", str(len(fs)))
             for key, fs in groups.items()]
    text = "; ".join(texts[:3])
    return text + (f" (+{len(texts) - 3} more)" if len(texts) > 3 else "")


def from_findings(check_id: str, findings: list[Finding], passed: str, *,
                  observed: dict[str, Any] | None = None,
                  threshold: dict[str, Any] | None = None) -> CheckResult:
    """A check's result from its findings: PASS without any; else the worst status, the most
    expensive remedy naming every part that needs it, every finding kept in remedy order."""
    if not findings:
        return result(check_id, Status.PASS, passed, observed=observed, threshold=threshold)
    ordered = sorted(findings, key=finding_order)
    failing = [f for f in ordered if f.failing]
    status = (Status.FAIL if any(f.status is Status.FAIL for f in failing)
              else Status.ERROR if failing else Status.WARN)
    top = failing[0].remedy if failing else RemedyKind.NONE
    lead = [f for f in (failing or ordered) if f.remedy is top]
    parts = list(dict.fromkeys(f.part for f in lead if f.part))
    summary = _summary(ordered)
    evidence = [line for f in ordered for line in (f.summary, *f.evidence)]
    res = result(check_id, status, summary, observed=observed, threshold=threshold, remedy=top,
                 part=", ".join(parts) or None, detail=next((f.detail for f in lead if f.detail), None),
                 evidence=evidence)
    return res.model_copy(update={"findings": ordered})


def not_applicable(check_id: str, why: str) -> CheckResult:
    """The check does not apply to this host (e.g. a GPU check on a host without GPUs)."""
    return result(check_id, Status.NOT_APPLICABLE, why)


def missing_tool(check_id: str, tool: str, remedy: RemedyKind = RemedyKind.REIMAGE) -> CheckResult:
    """A tool the host should have is not installed: the image is incomplete."""
    return result(
        check_id, Status.FAIL, f"{tool} is not installed on the host",
        remedy=remedy, detail=f"the image should provide {tool}; re-image or install it",
    )
