"""Repair work orders: what a data-centre technician needs to fix a host, from its last health run."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from provisioner.health.model import CheckResult, HostReport, RemedyKind, Status


class WorkItem(BaseModel):
    """One thing to fix: the part, the check that found it, and the evidence. A GPU is named
    by PCI address, PCIe slot and module as well as by serial."""

    check: str
    component: str
    action: RemedyKind
    summary: str
    detail: str | None = None
    evidence: list[str] = Field(default_factory=list)
    pci: str | None = None
    slot: str | None = None
    bmc_slot: str | None = None
    serial: str | None = None


_RANK = {k: i for i, k in enumerate(RemedyKind)}


class WorkOrder(BaseModel):
    """A ticket for one host."""

    host: str
    site: str
    location: str
    host_serial: str | None
    bmc: str | None
    run_id: str
    checked_at: str
    created_at: str
    remedy: RemedyKind
    incidents_30d: int = 0
    items: list[WorkItem]


def _items(r: CheckResult, host: str) -> list[WorkItem]:
    """One item per failing finding (each GPU, link, test result), or the check's own."""
    findings = [f for f in r.findings if f.failing]
    if not findings:
        return [WorkItem(check=r.id, component=r.remedy.part or f"host {host}", action=r.remedy.kind,
                         summary=r.summary, detail=r.remedy.detail, evidence=r.evidence)]
    return [WorkItem(check=r.id, component=f.part or f"host {host}", action=f.remedy,
                     summary=f.summary, detail=f.detail, evidence=f.evidence,
                     pci=f.gpu.pci if f.gpu else None, slot=f.gpu.slot if f.gpu else None,
                     bmc_slot=f.gpu.bmc_slot if f.gpu else None,
                     serial=f.gpu.serial if f.gpu else None)
            for f in findings]


def work_order(
    report: HostReport, *, site: str, location: str, host_serial: str | None = None,
    bmc: str | None = None, incidents_30d: int = 0,
) -> WorkOrder:
    """A work order from a host's failing results: one item per failing finding, the most
    expensive remedy first (a technician's repair before a reboot that would not fix it)."""
    failing = [r for r in report.results if r.status in (Status.FAIL, Status.ERROR)]
    items = sorted((item for r in failing for item in _items(r, report.host)),
                   key=lambda i: -_RANK[i.action])
    return WorkOrder(
        host=report.host, site=site, location=location, host_serial=host_serial, bmc=bmc,
        run_id=report.run_id, checked_at=report.started_at,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        remedy=report.remedy.kind, incidents_30d=incidents_30d, items=items,
    )


def render_text(wo: WorkOrder) -> str:
    """The work order as plain text (for a ticket body or an e-mail)."""
    lines = [
        f"WORK ORDER  {wo.host}  ({wo.site})",
        f"Location:     {wo.location}",
        f"Host serial:  {wo.host_serial or 'unknown (not discovered yet)'}",
        f"BMC:          {wo.bmc or '-'}",
        f"Health run:   {wo.run_id} at {wo.checked_at}",
        f"Action:       {wo.remedy.value}",
        f"Incidents:    {wo.incidents_30d} in the last 30 days"
        + ("  (repeat offender: consider replacing the whole node)" if wo.incidents_30d >= 3 else ""),
        "",
    ]
    if not wo.items:
        lines.append("No failing check in the last run: nothing to repair.")
    for i, item in enumerate(wo.items, 1):
        lines.append(f"{i}. [{item.action.value}] {item.component}")
        if item.pci:
            where = [f"PCI {item.pci}"] + ([f"PCIe slot {item.slot}"] if item.slot else []) + (
                [f"BMC {item.bmc_slot}"] if item.bmc_slot else [])
            lines.append(f"   where: {', '.join(where)}")
        lines.append(f"   check {item.check}: {item.summary}")
        if item.detail:
            lines.append(f"   what to do: {item.detail}")
        if item.evidence:
            lines.append("   evidence:")
            lines.extend(f"     {e}" for e in item.evidence)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
