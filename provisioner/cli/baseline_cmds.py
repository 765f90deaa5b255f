"""`provision firmware check` and `provision bios check`: each host against its baseline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from provisioner.cli.common import (
    JsonOption,
    SiteOption,
    console,
    holding,
    print_json,
    site_name,
)
from provisioner.cli.consoles import TerminalConsole
from provisioner.cli.errors import handle_errors, is_tty, plain
from provisioner.cli.tables import Col, WideOption, fit_table, print_table
from provisioner.exceptions import InputError, PartialFailure
from provisioner.safetext import terminal

if TYPE_CHECKING:  # annotations only: `--help` must not load these (test_cli_lazy)
    from provisioner.inventory import Host, Site
    from provisioner.state import StateStore
    from provisioner.workflow.baseline import HostCompliance
    from provisioner.workflow.bios_apply import ApplyOptions
    from provisioner.workflow.bulk import ActionResult
    from provisioner.workflow.firmware import HostPlan, Step

# Hints wrap at 80 columns (or the terminal's width), indented under the host they are for.
err = TerminalConsole(stderr=True, highlight=False, soft_wrap=False, emoji=False, max_width=80)

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

Checker = Callable[..., list["HostCompliance"]]


BASELINE_COLUMNS = (Col("host"), Col("entry"), Col("status"), Col("want", priority=1),
                    Col("have", priority=2))
STYLE = {"ok": "green", "pending": "yellow", "foreign-pending": "yellow"}


def _table(kind: str, reports: Sequence[HostCompliance], show_all: bool, *,
           wide: bool = False) -> Table:
    """Names and values are never cut mid-word: a column that does not fit is left out
    (the caption says which; --wide shows it)."""
    ok = sum(r.compliant for r in reports)
    rows: list[tuple[str, ...]] = []
    for rep in reports:
        host = plain(rep.host)
        if not rep.read:
            rows.append((host, plain(rep.reason or ""), "[red]unread[/]", "", ""))
            continue
        shown = rep.items if show_all else rep.drifted
        if not shown:
            rows.append((host, f"{len(rep.items)} entries", "[green]ok[/]", "", ""))
        for item in shown:
            style = STYLE.get(item.status.value, "red")
            rows.append((host, plain(item.shown), f"[{style}]{item.status.value}[/]",
                         plain(item.want), plain(item.have)))
    return fit_table(f"{kind} baseline: {ok}/{len(reports)} hosts compliant", BASELINE_COLUMNS,
                     rows, width=console.width, wide=wide)


def _hint(host: str, text: str, style: str | None = None) -> None:
    """One hint on stderr, wrapped under its host's name."""
    err.print(Text(terminal(f"{host}: {text}"), style=style or ""), overflow="fold")


def _json(rep: HostCompliance) -> dict[str, object]:
    return {"host": rep.host, "compliant": rep.compliant, "reason": rep.reason,
            "error": rep.error, "warnings": list(rep.warnings),
            "items": [{"kind": i.kind, "name": i.name, "entry": i.entry or i.name,
                       "have": i.have, "want": i.want, "status": i.status.value,
                       "hint": i.hint} for i in rep.items]}


def _with_baseline(s: Site, hosts: list[str] | None, rack: str | None,
                   kind: str) -> tuple[list[Host], int]:
    """The selected hosts that have a ``kind`` baseline, and how many were selected."""
    selected = s.select(hosts or None, rack)
    return [h for h in selected if (h.bios if kind == "bios" else h.firmware)], len(selected)


def _no_baseline(kind: str, selected: int) -> tuple[str, str]:
    return (f"none of the {selected} selected hosts has a {kind} baseline",
            f"add `{kind}:` to their profile (or host) in the site file; see docs/firmware.md")


def _select(s: Site, hosts: list[str] | None, rack: str | None, kind: str) -> list[Host]:
    """The hosts to change: refused when none has a baseline (there is nothing to apply)."""
    with_baseline, selected = _with_baseline(s, hosts, rack, kind)
    if not with_baseline:
        what, hint = _no_baseline(kind, selected)
        raise InputError(what, hint=hint)
    return with_baseline


def _show(kind: str, reports: Sequence[HostCompliance], show_all: bool, wide: bool) -> None:
    print_table(console, _table(kind, reports, show_all, wide=wide), wide=wide)
    for rep in reports:
        for item in rep.drifted:
            if item.hint:
                _hint(rep.host, f"{item.shown}: {item.hint}")
        for warning in rep.warnings:
            _hint(rep.host, f"warning: {warning}", "yellow")
        if rep.error:
            _hint(rep.host, f"{rep.reason}: {rep.error}", "red")


def _run(kind: str, checker: Checker, hosts: list[str] | None, rack: str | None,
         site: str | None, as_json: bool, junit: Path | None, textfile: Path | None,
         parallel: int | None, show_all: bool, wide: bool) -> None:
    from provisioner.health.junit import write_atomic
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.workflow.baseline import render_junit, render_metrics

    s = load_site(site_name(site))
    selected, count = _with_baseline(s, hosts, rack, kind)
    reports: list[HostCompliance] = []
    if not selected:
        what, hint = _no_baseline(kind, count)
        if hosts:  # the hosts named cannot be checked: a mistake worth exit 2
            raise InputError(what, hint=hint)
        # the whole site (or a rack) without baselines, as the lab: nothing to check, exit 0
        err.print(Text(terminal(f"note: {what}: nothing checked; {hint}"), style="yellow"))
    elif kind == "bios":
        reports = checker(s, selected, max_parallel=parallel,
                          store=StateStore.for_site(s, readonly=True))
    else:
        reports = checker(s, selected, max_parallel=parallel)
    if junit:
        write_atomic(junit, render_junit(kind, reports))
    if textfile:
        write_atomic(textfile, render_metrics(kind, reports))
    if as_json:
        print_json([_json(r) for r in reports])
    elif reports:
        _show(kind, reports, show_all, wide)
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
                   parallel: int | None = ParallelOption, show_all: bool = AllOption,
                   wide: bool = WideOption) -> None:
    """Every host's firmware versions against its baseline; exit 3 on drift."""
    from provisioner.workflow.baseline import check_firmware

    _run("firmware", check_firmware, hosts, rack, site, as_json, junit, textfile, parallel,
         show_all, wide)


@bios_app.command("check")
@handle_errors
def bios_check(hosts: list[str] = HostsArg, rack: str | None = RackOption,
               site: str | None = SiteOption, as_json: bool = JsonOption,
               junit: Path | None = JunitOption, textfile: Path | None = MetricsOption,
               parallel: int | None = ParallelOption, show_all: bool = AllOption,
               wide: bool = WideOption) -> None:
    """Every host's BIOS attributes (and intents) against its baseline, and pending values
    someone else staged; exit 3 on drift."""
    from provisioner.workflow.baseline import check_bios

    _run("bios", check_bios, hosts, rack, site, as_json, junit, textfile, parallel, show_all,
         wide)


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
    clear_pending: bool = typer.Option(
        False, "--clear-pending", help="Discard pending BIOS values someone else staged "
        "(and iDRAC's queued BIOS jobs) before applying."),
    include_pending: bool = typer.Option(
        False, "--include-pending", help="Let the reset apply pending values someone else "
        "staged as well."),
    retry_reset: bool = typer.Option(
        False, "--retry-reset", help="Reset again for values an earlier reset did not apply."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; send nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before resetting hosts."),
    timeout: float = typer.Option(900.0, "--timeout", metavar="SECONDS", min=1,
                                  help="How long to wait for a host to show the new values."),
    as_json: bool = JsonOption,
    parallel: int | None = ParallelOption,
    wide: bool = WideOption,
) -> None:
    """Set each host's BIOS to its baseline: refuse unknown names/values before sending,
    stage (in stages where the registry's dependencies need it), reset hosts not in use,
    read back. Exit 3 if any host failed."""
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.workflow.bios_apply import ApplyOptions, apply_bios

    if clear_pending and include_pending:
        raise InputError("--clear-pending and --include-pending contradict each other",
                         hint="discard others' pending values, or apply them: pick one")
    s = load_site(site_name(site))
    selected = _select(s, hosts, None, "bios")
    opts = ApplyOptions(reboot=reboot, force=force, timeout_s=timeout,
                        clear_pending=clear_pending, include_pending=include_pending,
                        retry_reset=retry_reset)
    if dry_run:
        _dry_run(s, selected, StateStore.for_site(s, readonly=True), opts, as_json, parallel,
                 wide)
        return
    store = StateStore.for_site(s)
    # ask only about the hosts the apply would reset: a host in use is refused, not reset
    to_reset = [h for h in selected if h.name not in _in_use(store, selected, opts)]
    if to_reset and reboot and not yes:
        if not is_tty():
            raise InputError("bios apply resets hosts and needs confirmation",
                             hint="pass --yes (or --no-reboot to only stage the values)")
        names = ", ".join(h.name for h in to_reset)
        spared = len(selected) - len(to_reset)
        left = f" ({spared} in use left alone)" if spared else ""
        if not typer.confirm(f"reset {len(to_reset)} host(s) to apply BIOS settings: "
                             f"{names}{left}?"):
            console.print("nothing done")
            return
    with holding(store, f"provision bios apply --site {s.name}", selected) as selected:
        results = apply_bios(s, selected, store, max_parallel=parallel, opts=opts)
    _print_results("bios apply", results, as_json)


def _dry_run(s: Site, selected: list[Host], store: StateStore, opts: ApplyOptions,
             as_json: bool, parallel: int | None, wide: bool) -> None:
    """The drift table, and where the real apply would refuse a host (exit 3 then)."""
    from provisioner.workflow.baseline import check_bios
    from provisioner.workflow.bios_apply import refusals

    reports = check_bios(s, selected, max_parallel=parallel, store=store)
    in_use = _in_use(store, selected, opts)
    refused = {r.host: [*([in_use[r.host]] if r.host in in_use else []), *refusals(r.items, opts)]
               for r in reports}
    refused = {h: why for h, why in refused.items() if why}
    if as_json:
        print_json([{**_json(r), "would_refuse": refused.get(r.host, [])} for r in reports])
    else:
        _show("bios", reports, False, wide)
        for host, why in refused.items():
            for text in why:
                _hint(host, f"apply would refuse: {text}", "red")
        console.print("dry run: nothing sent")
    unread = [r.host for r in reports if not r.read]
    if refused or unread:
        hosts = sorted({*refused, *unread})
        raise PartialFailure(f"bios apply would not change {len(hosts)} of {len(reports)} "
                             f"hosts: {', '.join(hosts)}",
                             hint="the hints say why per host; nothing was sent")


def _in_use(store: StateStore, hosts: Sequence[Host], opts: ApplyOptions) -> dict[str, str]:
    """The hosts the apply would refuse to reset because they serve (as apply_bios does), each
    with why; none when nothing is reset (--no-reboot) or --force."""
    from provisioner.state import SERVING

    if opts.force or not opts.reboot:
        return {}
    return {r.name: f"{r.name} is {r.state.value}: a BIOS apply resets it; put it in "
            f"maintenance first (provision maintenance {r.name}) or pass --force"
            for r in store.records([h.name for h in hosts]) if r.state in SERVING}


PLAN_COLUMNS = (Col("host"), Col("component", wrap=True), Col("order"),
                Col("want", priority=1), Col("have", priority=2))


def _plan_table(plans: dict[str, HostPlan], *, wide: bool = False) -> Table:
    rows: list[tuple[str, ...]] = []
    for name, plan in plans.items():
        host = plain(name)
        if plan.in_flight:
            rows.append((host, plain(plan.in_flight), "[yellow]earlier run[/]", "", ""))
        for step, order in [*((s, "shared") for s in plan.shared),
                            *((s, s.order.name.lower()) for s in plan.steps)]:
            way = plan.ways.get(step.label, "")
            label = plain(step.label)
            if way:
                colour = "red" if way.startswith("no way") else "dim"
                label += f"\n[{colour}]via {plain(way.split(', Targets')[0])}[/]"
            rows.append((host, label, order, plain(" | ".join(step.requirement.allowed)),
                         plain(step.component.version)))
        rows += [(host, plain(blocked), "[red]blocked[/]", "", "") for blocked in plan.blocked]
        if not plan.steps and not plan.shared and not plan.blocked:
            rows.append((host, "nothing to update", "", "", ""))
    return fit_table("firmware update plan (in this order per host)", PLAN_COLUMNS, rows,
                     width=console.width, wide=wide)


def _plan_json(plan: HostPlan) -> dict[str, object]:
    def step(st: Step) -> dict[str, object]:
        return {"component": st.label, "have": st.component.version,
                "want": st.requirement.allowed, "order": st.order.name.lower(),
                "kind_from": st.component.kind_from, "image": st.image.url,
                "via": plan.ways.get(st.label)}
    return {"steps": [step(st) for st in plan.steps],
            "shared": [step(st) for st in plan.shared], "peers": list(plan.peers),
            "blocked": plan.blocked, "in_flight": plan.in_flight or None}


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
    wide: bool = WideOption,
) -> None:
    """Bring each host's firmware to its baseline: images checked against their sha256 and
    served from here, BMC first, one component at a time, versions read back."""
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.state.store import default_state_dir
    from provisioner.workflow.firmware import UpdateOptions, plan_update, update_rack
    from provisioner.workflow.firmware_images import ImageCache

    s = load_site(site_name(site))
    selected = _select(s, hosts, None, "firmware")
    opts = UpdateOptions(force=force, task_timeout_s=timeout, bmc_back_timeout_s=timeout)
    if dry_run:
        plans, unread = plan_update(s, selected, StateStore.for_site(s, readonly=True),
                                    opts=opts, max_parallel=max_parallel)
        if as_json:
            print_json({"plans": {n: _plan_json(p) for n, p in plans.items()},
                        "unread": [{"host": r.host, "reason": r.reason, "error": r.error}
                                   for r in unread]})
        else:
            print_table(console, _plan_table(plans, wide=wide), wide=wide)
            for r in unread:
                _hint(r.host, f"{r.reason}: {r.error}", "red")
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
    with holding(store, f"provision firmware update --site {s.name}", selected) as selected:
        results = update_rack(s, selected, store, cache, max_parallel=max_parallel,
                              opts=opts)
    _print_results("firmware update", results, as_json)


RESULT_COLUMNS = (Col("host"), Col("result"), Col("detail", wrap=True))


def _print_results(title: str, results: Sequence[ActionResult], as_json: bool) -> None:
    if as_json:
        print_json([{"host": r.host, "ok": r.ok, "detail": r.detail, "reason": r.reason,
                     "error": r.error, "warnings": list(r.warnings)} for r in results])
    else:
        rows = [(plain(r.host), "[green]ok[/]" if r.ok else f"[red]{plain(r.reason or '')}[/]",
                 plain(r.detail if r.ok else r.error or "")) for r in results]
        print_table(console, fit_table(
            f"{title}: {sum(r.ok for r in results)}/{len(results)} hosts", RESULT_COLUMNS,
            rows, width=console.width))
    failed = [r.host for r in results if not r.ok]
    if failed:
        raise PartialFailure(f"{title} failed on {len(failed)} of {len(results)} hosts: "
                             f"{', '.join(failed)}", hint="the table gives each host's reason")


def register(app: typer.Typer) -> None:
    """Mount `provision firmware` and `provision bios`."""
    app.add_typer(firmware_app, name="firmware")
    app.add_typer(bios_app, name="bios")
