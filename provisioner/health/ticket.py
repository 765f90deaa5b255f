"""Repair work orders: what a data-centre technician needs to fix a host, from its last health run."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from provisioner.health.model import HostReport, RemedyKind, Status


class WorkItem(BaseModel):
    """One thing to fix: the part, the check that found it, and the evidence."""

    check: str
    component: str
    action: RemedyKind
    summary: str
    detail: str | None = None
    evidence: list[str] = Field(default_factory=list)


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


def work_order(
    report: HostReport, *, site: str, location: str, host_serial: str | None = None,
    bmc: str | None = None, incidents_30d: int = 0,
) -> WorkOrder:
    """A work order from a host's failing results (every fail/error, worst remedy first)."""
    failing = sorted(
        (r for r in report.results if r.status in (Status.FAIL, Status.ERROR)),
        key=lambda r: -r.remedy.rank(),
    )
    items = [
        WorkItem(
            check=r.id, component=r.remedy.part or f"host {report.host}", action=r.remedy.kind,
            summary=r.summary, detail=r.remedy.detail, evidence=r.evidence,
        )
        for r in failing
    ]
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
        lines.append(f"   check {item.check}: {item.summary}")
        if item.detail:
            lines.append(f"   what to do: {item.detail}")
        if item.evidence:
            lines.append("   evidence:")
            lines.extend(f"     {e}" for e in item.evidence)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
