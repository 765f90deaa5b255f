"""What every check gets (the host's collected sections and expectations) and result helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from provisioner.health.collector import Section
from provisioner.health.config import Expectations
from provisioner.health.errors import ParseError
from provisioner.health.model import CheckResult, Remedy, RemedyKind, Severity, Status
from provisioner.health.nvsmi import NvsmiReport, parse_nvsmi
from provisioner.health.pcie import PciDevice, parse_lspci
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

    def gpu_label(self, bus_id: str) -> str:
        """The best name for the GPU at ``bus_id``: module and serial when nvidia-smi knows it."""
        report = None
        try:
            report = self.nvsmi
        except ParseError:
            report = None
        for g in report.gpus if report else []:
            if g.bus_id == bus_id:
                return g.label()
        serial = serials_from_kernel_log(self.kernel_lines).get(bus_id)
        return f"GPU at PCI {bus_id}" + (f" serial {serial}" if serial else "")


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


def not_applicable(check_id: str, why: str) -> CheckResult:
    """The check does not apply to this host (e.g. a GPU check on a host without GPUs)."""
    return result(check_id, Status.NOT_APPLICABLE, why)


def missing_tool(check_id: str, tool: str, remedy: RemedyKind = RemedyKind.REIMAGE) -> CheckResult:
    """A tool the host should have is not installed: the image is incomplete."""
    return result(
        check_id, Status.FAIL, f"{tool} is not installed on the host",
        remedy=remedy, detail=f"the image should provide {tool}; re-image or install it",
    )
