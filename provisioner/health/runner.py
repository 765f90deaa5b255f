"""Collect and check many hosts in parallel over SSH (one session per host), then publish."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime

from provisioner.health.checks import Context, run_checks
from provisioner.health.checks.base import result
from provisioner.health.collector import collector_script, parse_sections
from provisioner.health.config import Expectations
from provisioner.health.model import CheckResult, HostReport, RemedyKind, Status
from provisioner.health.ssh import SshClient, SshTarget
from provisioner.health.textfile import install_command, render_textfile


@dataclass(frozen=True)
class HostPlan:
    """One host to check: how to reach it and what it should contain."""

    target: SshTarget
    expect: Expectations


def _unreachable(plan: HostPlan, stderr: str, timed_out: bool) -> CheckResult:
    why = "timed out" if timed_out else (stderr.strip().splitlines() or ["ssh failed"])[-1]
    return result(
        "host.reachable", Status.FAIL,
        f"cannot run checks over SSH on {plan.target.address}:{plan.target.port}: {why}",
        remedy=RemedyKind.REBOOT,
        detail="power-cycle through the BMC; check the key and ssh_user if it boots",
        evidence=stderr.strip().splitlines()[-5:],
    )


def check_host(client: SshClient, plan: HostPlan, run_id: str, *, deep: bool = False) -> HostReport:
    """Run the collector on one host and every applicable check on its output (not yet judged)."""
    started = datetime.now(UTC)
    t0 = time.monotonic()
    res = client.run_script(plan.target, collector_script(plan.expect, deep=deep))
    if res.unreachable:
        results = [_unreachable(plan, res.stderr, res.timed_out)]
    else:
        sections = parse_sections(res.stdout)
        ctx = Context(host=plan.target.name, sections=sections, expect=plan.expect, deep=deep)
        results = [
            result("host.reachable", Status.PASS, f"ssh {plan.target.user}@{plan.target.address}"),
            *run_checks(ctx),
        ]
    return HostReport(
        host=plan.target.name, run_id=run_id, started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - t0, 3), results=results,
    )


def check_hosts(
    client: SshClient,
    plans: list[HostPlan],
    run_id: str,
    *,
    deep: bool = False,
    parallel: int = 32,
    on_done: Callable[[HostReport], None] | None = None,
) -> list[HostReport]:
    """Check hosts in parallel (bounded); reports come back in the order of ``plans``."""
    reports: dict[str, HostReport] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(plans) or 1))) as pool:
        futures = {pool.submit(check_host, client, p, run_id, deep=deep): p for p in plans}
        for fut in as_completed(futures):
            rep = fut.result()
            reports[rep.host] = rep
            if on_done is not None:
                on_done(rep)
    return [reports[p.target.name] for p in plans]


def publish_textfiles(
    client: SshClient, plans: list[HostPlan], reports: list[HostReport], directory: str,
    *, parallel: int = 32,
) -> dict[str, str]:
    """Write each reachable host's metrics to its node_exporter textfile directory.

    Returns {host: problem} for hosts where the write failed (reported, never fatal).
    """
    by_name = {r.host: r for r in reports}
    now = time.time()

    def one(plan: HostPlan) -> tuple[str, str | None]:
        rep = by_name[plan.target.name]
        if any(r.id == "host.reachable" and r.status is Status.FAIL for r in rep.results):
            return plan.target.name, "unreachable"
        res = client.run(plan.target, install_command(directory), stdin=render_textfile(rep, now))
        if res.rc != 0:
            return plan.target.name, (res.stderr.strip() or f"exit {res.rc}")
        return plan.target.name, None

    problems: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(plans) or 1))) as pool:
        for name, problem in pool.map(one, plans):
            if problem:
                problems[name] = problem
    return problems
