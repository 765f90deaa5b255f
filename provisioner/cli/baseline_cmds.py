"""`provision firmware check` and `provision bios check`: each host against its baseline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import handle_errors, is_tty
from provisioner.exceptions import InputError, PartialFailure
from provisioner.health.junit import write_atomic
from provisioner.inventory import Host, Site, load_site
from provisioner.state import StateStore
from provisioner.state.store import default_state_dir
from provisioner.workflow.baseline import (
    ApplyOptions,
    HostCompliance,
    apply_bios,
    check_bios,
    check_firmware,
    render_junit,
    render_metrics,
)
from provisioner.workflow.bulk import ActionResult
from provisioner.workflow.firmware import HostPlan, UpdateOptions, plan_rack, update_rack
from provisioner.workflow.firmware_images import ImageCache

err = Console(stderr=True, highlight=False, soft_wrap=True)

firmware_app = typer.Typer(help="Firmware baselines: what each host must run, and who drifts.",
                           no_args_is_help=True)
bios_app = typer.Typer(help="BIOS baselines: the attributes each host must have, and who drifts.",
                       no_args_is_help=True)

HostsArg = typer.Argument(None, help="Host names or globs (default: every host with a baseline).")
RackOption = typer.Option(None, "--rack", "-r", help="Only this rack.")
JunitOption = typer.Option(None, "--junit", metavar="FILE", help="Write a JUnit XML report.")
MetricsOption = typer.Option(None, "--textfile", metavar="FILE",
                             help="Write Prometheus metrics (node_exporter textfile format).")
ParallelOption = typer.Option(None, "--parallel", min=1,
                              help="BMCs at once (default: settings.redfish.max_parallel).")
AllOption = typer.Option(False, "--all", help="List entries that are met too.")

Checker = Callable[..., list[HostCompliance]]


def _table(kind: str, reports: Sequence[HostCompliance], show_all: bool) -> Table:
    ok = sum(r.compliant for r in reports)
    table = Table(title=f"{kind} baseline: {ok}/{len(reports)} hosts compliant")
    for col, ratio in (("host", 2), ("entry", 3), ("have", 2), ("want", 2), ("status", 1)):
        table.add_column(col, ratio=ratio, overflow="fold")
    for rep in reports:
        if not rep.read:
            table.add_row(Text(rep.host), Text(rep.reason or ""), "", "",
                          Text("unread", style="red"))
            continue
        shown = rep.items if show_all else rep.drifted
        if not shown:
            table.add_row(Text(rep.host), Text(f"{len(rep.items)} entries"), "", "",
                          Text("ok", style="green"))
        for item in shown:
            style = "green" if item.compliant else "yellow" if item.status == "pending" else "red"
            table.add_row(Text(rep.host), Text(item.name), Text(item.have), Text(item.want),
                          Text(item.status.value, style=style))
    return table


def _json(rep: HostCompliance) -> dict[str, object]:
    return {"host": rep.host, "compliant": rep.compliant, "reason": rep.reason,
            "error": rep.error, "warnings": list(rep.warnings),
            "items": [{"kind": i.kind, "name": i.name, "have": i.have, "want": i.want,
                       "status": i.status.value, "hint": i.hint} for i in rep.items]}


def _select(s: Site, hosts: list[str] | None, rack: str | None, kind: str) -> list[Host]:
    selected = s.select(hosts or None, rack)
    with_baseline = [h for h in selected if (h.bios if kind == "bios" else h.firmware)]
    if not with_baseline:
        raise InputError(
            f"none of the {len(selected)} selected hosts has a {kind} baseline",
            hint=f"add `{kind}:` to their profile (or host) in the site file; see "
            "docs/firmware.md")
    return with_baseline


def _run(kind: str, checker: Checker, hosts: list[str] | None, rack: str | None,
         site: str | None, as_json: bool, junit: Path | None, textfile: Path | None,
         parallel: int | None, show_all: bool) -> None:
    s = load_site(site_name(site))
    reports = checker(s, _select(s, hosts, rack, kind), max_parallel=parallel)
    if junit:
        write_atomic(junit, render_junit(kind, reports))
    if textfile:
        write_atomic(textfile, render_metrics(kind, reports))
    if as_json:
        print_json([_json(r) for r in reports])
    else:
        console.print(_table(kind, reports, show_all))
        for rep in reports:
            for item in rep.drifted:
                if item.hint:
                    err.print(Text(f"{rep.host} {item.name}: {item.hint}"))
            for warning in rep.warnings:
                err.print(Text(f"{rep.host} warning: {warning}", style="yellow"))
            if rep.error:
                err.print(Text(f"{rep.host} {rep.reason}: {rep.error}", style="red"))
    bad = [r.host for r in reports if not r.compliant]
    if bad:
        raise PartialFailure(
            f"{len(bad)} of {len(reports)} hosts do not meet their {kind} baseline: "
            f"{', '.join(bad)}",
            hint="the table gives each entry's have/want; unread hosts give their reason")


@firmware_app.command("check")
@handle_errors
def firmware_check(hosts: list[str] = HostsArg, rack: str | None = RackOption,
                   site: str | None = SiteOption, as_json: bool = JsonOption,
                   junit: Path | None = JunitOption, textfile: Path | None = MetricsOption,
                   parallel: int | None = ParallelOption, show_all: bool = AllOption) -> None:
    """Every host's firmware versions against its baseline; exit 3 on drift."""
    _run("firmware", check_firmware, hosts, rack, site, as_json, junit, textfile, parallel,
         show_all)


@bios_app.command("check")
@handle_errors
def bios_check(hosts: list[str] = HostsArg, rack: str | None = RackOption,
               site: str | None = SiteOption, as_json: bool = JsonOption,
               junit: Path | None = JunitOption, textfile: Path | None = MetricsOption,
               parallel: int | None = ParallelOption, show_all: bool = AllOption) -> None:
    """Every host's BIOS attributes against its baseline; exit 3 on drift."""
    _run("bios", check_bios, hosts, rack, site, as_json, junit, textfile, parallel, show_all)


@bios_app.command("apply")
@handle_errors
def bios_apply(
    hosts: list[str] = typer.Argument(..., help="Host names or globs to bring to baseline."),
    site: str | None = SiteOption,
    reboot: bool = typer.Option(True, "--reboot/--no-reboot",
                                help="Reset each host to apply and verify (else only stage)."),
    force: bool = typer.Option(False, "--force",
                               help="Also reset hosts that are deployed, configured or "
                               "validated (in use)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; send nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before resetting hosts."),
    timeout: float = typer.Option(900.0, "--timeout", metavar="SECONDS", min=1,
                                  help="How long to wait for a host to show the new values."),
    as_json: bool = JsonOption,
    parallel: int | None = ParallelOption,
) -> None:
    """Set each host's BIOS to its baseline: refuse unknown names/values before sending,
    stage, reset hosts not in use, read back. Exit 3 if any host failed."""
    s = load_site(site_name(site))
    selected = _select(s, hosts, None, "bios")
    if dry_run:
        reports = check_bios(s, selected, max_parallel=parallel)
        if as_json:
            print_json([_json(r) for r in reports])
        else:
            console.print(_table("bios", reports, show_all=False))
            console.print("dry run: nothing sent")
        return
    if reboot and not yes:
        if not is_tty():
            raise InputError("bios apply resets hosts and needs confirmation",
                             hint="pass --yes (or --no-reboot to only stage the values)")
        names = ", ".join(h.name for h in selected)
        if not typer.confirm(f"reset {len(selected)} host(s) to apply BIOS settings: {names}?"):
            console.print("nothing done")
            return
    store = StateStore.for_site(s)
    with store.orchestrator_lock("bios apply"):
        results = apply_bios(s, selected, store, max_parallel=parallel,
                             opts=ApplyOptions(reboot=reboot, force=force, timeout_s=timeout))
    _print_results("bios apply", results, as_json)


def _plan_table(plans: dict[str, HostPlan]) -> Table:
    table = Table(title="firmware update plan (in this order per host)")
    for col, ratio in (("host", 2), ("component", 4), ("have", 2), ("want", 2), ("order", 1)):
        table.add_column(col, ratio=ratio, overflow="fold")
    for name, plan in plans.items():
        for step in plan.steps:
            way = plan.ways.get(step.label, "")
            label = Text(step.label)
            if way:
                label.append(f"\nvia {way.split(', Targets')[0]}",
                             style="red" if way.startswith("no way") else "dim")
            table.add_row(Text(name), label, Text(step.component.version),
                          Text(" | ".join(step.requirement.allowed)),
                          Text(step.order.name.lower()))
        for blocked in plan.blocked:
            table.add_row(Text(name), Text(blocked), "", "", Text("blocked", style="red"))
        if not plan.steps and not plan.blocked:
            table.add_row(Text(name), Text("nothing to update"), "", "", "")
    return table


@firmware_app.command("update")
@handle_errors
def firmware_update(
    hosts: list[str] = typer.Argument(..., help="Host names or globs to update."),
    site: str | None = SiteOption,
    force: bool = typer.Option(False, "--force",
                               help="Also update hosts that are deployed, configured or "
                               "validated (in use)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan; send nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before updating."),
    max_parallel: int = typer.Option(8, "--max-parallel", min=1, metavar="N",
                                     help="Hosts updated at once (a rolling wave)."),
    timeout: float = typer.Option(1800.0, "--timeout", metavar="SECONDS", min=1,
                                  help="How long one component's update may take (the "
                                  "task, then the BMC's return and the new version)."),
    as_json: bool = JsonOption,
) -> None:
    """Bring each host's firmware to its baseline: images checked against their sha256 and
    served from here, BMC first, one component at a time, versions read back."""
    s = load_site(site_name(site))
    selected = _select(s, hosts, None, "firmware")
    if dry_run:
        plans, unread = plan_rack(s, selected, max_parallel=max_parallel)
        if as_json:
            print_json({"plans": {n: {"steps": [{"component": st.label, "have":
                                                  st.component.version, "want":
                                                  st.requirement.allowed, "order":
                                                  st.order.name.lower(), "image":
                                                  st.image.url, "via":
                                                  p.ways.get(st.label)} for st in p.steps],
                                       "blocked": p.blocked} for n, p in plans.items()},
                        "unread": [{"host": r.host, "reason": r.reason, "error": r.error}
                                   for r in unread]})
        else:
            console.print(_plan_table(plans))
            for r in unread:
                err.print(Text(f"{r.host} {r.reason}: {r.error}", style="red"))
            console.print("dry run: nothing sent")
        return
    if not yes:
        if not is_tty():
            raise InputError("firmware update flashes and resets hosts and needs "
                             "confirmation", hint="pass --yes (or look first: --dry-run)")
        if not typer.confirm(f"update firmware on {len(selected)} host(s)?"):
            console.print("nothing done")
            return
    store = StateStore.for_site(s)
    cache = ImageCache(default_state_dir() / f"{s.name}-firmware")
    with store.orchestrator_lock("firmware update"):
        results = update_rack(s, selected, store, cache, max_parallel=max_parallel,
                              opts=UpdateOptions(force=force, task_timeout_s=timeout,
                                                 bmc_back_timeout_s=timeout))
    _print_results("firmware update", results, as_json)


def _print_results(title: str, results: Sequence[ActionResult], as_json: bool) -> None:
    if as_json:
        print_json([{"host": r.host, "ok": r.ok, "detail": r.detail, "reason": r.reason,
                     "error": r.error, "warnings": list(r.warnings)} for r in results])
    else:
        table = Table(title=f"{title}: {sum(r.ok for r in results)}/{len(results)} hosts")
        for col in ("host", "result", "detail"):
            table.add_column(col, overflow="fold")
        for r in results:
            table.add_row(Text(r.host), Text("ok" if r.ok else r.reason or "", style="green"
                                             if r.ok else "red"),
                          Text(r.detail if r.ok else r.error or ""))
        console.print(table)
    failed = [r.host for r in results if not r.ok]
    if failed:
        raise PartialFailure(f"{title} failed on {len(failed)} of {len(results)} hosts: "
                             f"{', '.join(failed)}", hint="the table gives each host's reason")


def register(app: typer.Typer) -> None:
    """Mount `provision firmware` and `provision bios`."""
    app.add_typer(firmware_app, name="firmware")
    app.add_typer(bios_app, name="bios")
