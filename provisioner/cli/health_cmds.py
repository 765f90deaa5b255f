"""`provision health`, `provision hosts`, `provision ticket`, `provision bisect`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from provisioner.cli.common import (
    JsonOption,
    SiteOption,
    console,
    holding,
    print_json,
    site_name,
)
from provisioner.cli.errors import err_console, exit_with, handle_errors, is_tty, plain
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.exceptions import ExitCode, NotReady
from provisioner.health.kinds import RemedyKind
from provisioner.safetext import terminal
from provisioner.wording import plural

if TYPE_CHECKING:  # annotations only: `--help` must not load these (test_cli_lazy)
    from provisioner.health.model import HostReport
    from provisioner.inventory import Host, Site


def report_document(rep: HostReport) -> dict[str, object]:
    """The --json document of one host."""
    return {
        "host": rep.host, "run_id": rep.run_id, "started_at": rep.started_at,
        "duration_s": rep.duration_s, "verdict": rep.verdict.value,
        "remedy": rep.remedy.model_dump(mode="json"), "clean_streak": rep.clean_streak,
        "checks": [r.model_dump(mode="json") for r in rep.results],
    }


MAX_FINDING_LINES = 8  # per check; the rest are in --json and `provision ticket`


def failure_lines(rep: HostReport) -> list[str]:
    """What needs doing on a host, one line per failing finding (each GPU, link, result)."""
    out = []
    for r in rep.failed:
        findings = [f for f in r.findings if f.failing]
        if not findings:
            part = f" [{r.remedy.part}]" if r.remedy.part else ""
            out.append(f"  {rep.host}: {r.id}: {r.summary} -> {r.remedy.kind.value}{part}")
            continue
        for f in findings[:MAX_FINDING_LINES]:
            out.append(f"  {rep.host}: {r.id}: {f.summary} -> {f.remedy.value}")
        if len(findings) > MAX_FINDING_LINES:
            out.append(f"  {rep.host}: {r.id}: ... and {len(findings) - MAX_FINDING_LINES} more "
                       f"(provision ticket {rep.host})")
    return out


def host_line(rep: HostReport, width: int = 80) -> str:
    """One host's verdict as it finishes: name, verdict, remedy and the checks that are not
    clean, cut to the terminal width (the details follow, and `provision ticket` has all)."""
    from provisioner.health.model import Status, Verdict

    bad = [r.id for r in rep.results if r.status in (Status.FAIL, Status.ERROR, Status.WARN)]
    remedy = rep.remedy.kind.value if rep.verdict is Verdict.NEEDS_ATTENTION else ""
    line = f"{rep.host:<20} {rep.verdict.value:<15} {remedy:<9} {', '.join(bad) or '-'}"
    line = plain(line.rstrip())
    return line if len(line) <= width else line[: max(10, width - 1)] + "…"


def _capture(s: Site, selected: list[Host], as_json: bool) -> None:
    from provisioner.health.errors import HealthInputError
    from provisioner.health.manifest import golden_doubts
    from provisioner.health.service import capture_topology as capture_topology_of

    if len(selected) != 1:
        raise HealthInputError(f"--capture-topology takes one golden host, got {len(selected)}",
                               hint="name the host whose layout every host of its profile must match")
    path, manifest = capture_topology_of(s, selected[0])
    doubts = golden_doubts(manifest)
    if as_json:
        print_json({"path": str(path), "doubts": doubts,
                    "manifest": manifest.model_dump(exclude_none=True)})
    else:
        console.print(f"wrote {path}: {len(manifest.gpus)} GPU(s), {len(manifest.pcie)} PCIe "
                      f"device(s), {len(manifest.nics)} NIC(s); review it and commit it")
        for doubt in doubts:
            console.print(f"  check the golden host: {plain(doubt)}")


@handle_errors
def health(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: all)."),
    site: str | None = SiteOption,
    rack: str | None = typer.Option(None, "--rack", help="Only this rack."),
    deep: bool = typer.Option(False, "--deep", help="Also run dcgmi diag -r 2 and judge links under load."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document per host (JSON Lines)."),
    junit: Path | None = typer.Option(None, "--junit", help="Write a JUnit XML report to FILE."),
    textfile: bool = typer.Option(True, "--textfile/--no-textfile",
                                  help="Write node_exporter textfile metrics on each host."),
    any_state: bool = typer.Option(False, "--any-state",
                                   help="Also check hosts that are not deployed/configured."),
    skip: list[str] = typer.Option(None, "--skip", help="Check id to leave out (repeatable)."),
    capture_topology: bool = typer.Option(
        False, "--capture-topology",
        help="Save HOST's layout as .provisioner/topology/PROFILE.yml in the site folder."),
) -> None:
    """Check hosts over SSH, record the results, and say which need attention (exit 3 if any)."""
    from provisioner.health.junit import render_junit, write_atomic
    from provisioner.health.model import Verdict
    from provisioner.health.service import run_site_health
    from provisioner.inventory import load_site
    from provisioner.state import StateStore

    s = load_site(site_name(site))
    selected = s.select(hosts or None, rack=rack)
    if capture_topology:
        _capture(s, selected, as_json)
        return
    store = StateStore.for_site(s)
    width = console.width

    def checked(rep: HostReport) -> None:
        # Streamed as each host finishes: a JSON line, or one line of text (80 columns).
        if as_json:
            sys.stdout.write(json.dumps(report_document(rep)) + "\n")
            sys.stdout.flush()
        else:
            console.print(host_line(rep, width), highlight=False, soft_wrap=True)

    with holding(store, f"provision health --site {s.name}", selected) as selected, Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err_console, transient=True, disable=not is_tty(),
    ) as progress:
        task = progress.add_task("checking", total=len(selected))

        def on_checked(rep: HostReport) -> None:
            progress.update(task, advance=1, description=f"checked {rep.host}")
            checked(rep)

        summary = run_site_health(
            s, selected, store, deep=deep, any_state=any_state, publish=textfile, skip=skip,
            on_checked=on_checked,
        )
    if junit is not None:
        write_atomic(junit, render_junit(summary.reports))
    if as_json:
        for name, why in summary.skipped.items():
            err_console.print(f"skipped {name}: {plain(why)} (use --any-state to check it anyway)")
    else:
        for rep in summary.needs_attention:
            for line in failure_lines(rep):
                console.print(plain(line))
        for name, why in summary.skipped.items():
            console.print(f"  skipped {name}: {plain(why)} (use --any-state to check it anyway)")
        for name, why in summary.textfile_problems.items():
            console.print(f"  textfile not written on {name}: {plain(why)}")
        counts = {v: sum(r.verdict is v for r in summary.reports) for v in Verdict}
        console.print(
            f"site {s.name}, health run {summary.run_id}: {counts[Verdict.GOLDEN]} golden, "
            f"{counts[Verdict.HEALTHY]} healthy, {counts[Verdict.NEEDS_ATTENTION]} need attention, "
            f"{len(summary.skipped)} skipped"
        )
    if summary.needs_attention:
        exit_with(ExitCode.PARTIAL_FAILURE)


@handle_errors
def hosts_cmd(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: all)."),
    site: str | None = SiteOption,
    golden: bool = typer.Option(False, "--golden", help="Only hosts whose last health run was golden."),
    failed: bool = typer.Option(False, "--failed", help="Only hosts in state failed."),
    remedy: RemedyKind | None = typer.Option(
        None, "--remedy", help="Only hosts whose last health run asks for this remedy."),
    names_only: bool = typer.Option(False, "--names", help="Print host names only, one a line."),
    as_json: bool = JsonOption,
    wide: bool = WideOption,
) -> None:
    """List hosts with their state and last health verdict (--golden: only the fit ones)."""
    from provisioner.health.service import golden_hosts, incidents_of, remedy_of
    from provisioner.inventory import load_site
    from provisioner.state import NodeState, StateStore

    s = load_site(site_name(site))
    names = [h.name for h in s.select(hosts or None)]
    store = StateStore.for_site(s, readonly=True)  # a read command: never writes or waits
    records = {r.name: r for r in store.records(names)}
    golden_set = {n for n, _ in golden_hosts(store, names)} if golden else None
    counts = incidents_of(store, names)
    rows = []
    for name in names:
        rec = records[name]
        if golden_set is not None and name not in golden_set:
            continue
        if failed and rec.state is not NodeState.FAILED:
            continue
        if remedy is not None and remedy_of(rec.facts) is not remedy:
            continue
        h = rec.facts.get("health", {})
        rows.append({"host": name, "state": rec.state.value, "verdict": h.get("verdict"),
                     "clean_streak": h.get("clean_streak"), "remedy": (h.get("remedy") or {}).get("kind"),
                     "incidents_30d": counts.get(name, 0) if h else 0,
                     "last_run": h.get("run_id"), "reason": rec.reason})
    if as_json:
        print_json(rows)
        return
    if (golden or names_only) and not as_json:
        for row in rows:
            typer.echo(row["host"])
        return
    cols = (
        Col("host"),
        Col("state"),
        Col("verdict", priority=1),
        Col("streak", priority=3, justify="right"),
        Col("remedy", priority=2),
        Col("incidents 30d", priority=4, justify="right"),
        Col("reason", priority=1, wrap=True),
    )
    keys = ("host", "state", "verdict", "clean_streak", "remedy", "incidents_30d", "reason")
    cells = [[plain(dash(row[k])) for k in keys] for row in rows]
    title = f"site {s.name}: {plural(len(rows), 'host')}"
    print_table(console, fit_table(title, cols, cells, width=console.width, wide=wide), wide=wide)


@handle_errors
def ticket(
    host: str = typer.Argument(..., help="Host name."),
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
    output: Path | None = typer.Option(None, "--output", "-o", help="Also write the ticket to FILE."),
) -> None:
    """A repair work order for a failed host: host, serials, slot/component, evidence."""
    from provisioner.health.errors import HealthInputError
    from provisioner.health.junit import write_atomic
    from provisioner.health.service import incidents, latest_report
    from provisioner.health.ticket import render_text, work_order
    from provisioner.inventory import load_site
    from provisioner.state import StateStore

    s = load_site(site_name(site))
    h = s.host(host)
    store = StateStore.for_site(s, readonly=True)
    rep = latest_report(store, host)
    if rep is None:
        raise NotReady(f"no health run recorded for {host}",
                       hint=f"run `provision health --site {s.name} {host}` first")
    if not rep.failed:
        raise HealthInputError(
            f"{host}'s last health run ({rep.run_id}) has no failing check: nothing to repair",
            hint="`provision hosts --failed` lists the hosts that need one",
        )
    rack = next((r for r in s.racks if r.name == h.rack), None)
    where = ", ".join(f"{k} {v}" for k, v in (rack.location.items() if rack else []))
    location = f"rack {h.rack} U{h.u}" + (f" ({where})" if where else "")
    facts = store.get(host).facts
    wo = work_order(rep, site=s.name, location=location, host_serial=facts.get("serial"),
                    bmc=h.bmc.address, incidents_30d=incidents(store, host))
    # what hosts and BMCs wrote (evidence, serials) reaches no terminal as controls: JSON with
    # every non-ASCII character escaped, text with controls written as escapes
    text = (json.dumps(wo.model_dump(mode="json"), indent=2) + "\n" if as_json
            else terminal(render_text(wo), newlines=True))
    if output is not None:
        write_atomic(output, text)
    sys.stdout.write(text)


@handle_errors
def bisect_cmd(
    hosts: list[str] = typer.Argument(..., help="The failing set: host names or globs."),
    site: str | None = SiteOption,
    groups: str = typer.Option("6,8", "--groups", help="Groups in round one and round two, e.g. 6,8."),
    command: str = typer.Option(..., "--command", "-c",
                                help="Shell command run per group; {hosts} becomes host1,host2,..."),
    timeout_s: float = typer.Option(900.0, "--timeout", help="Seconds before a group counts as hung."),
    parallel: int = typer.Option(8, "--parallel", help="Groups of a round run at once."),
    confirm: bool = typer.Option(False, "--confirm",
                                 help="Re-run each suspect in place of a host of a passing group."),
    as_json: bool = JsonOption,
) -> None:
    """Name the bad host(s) in a set that fails together, in two rounds of group runs."""
    from provisioner.health.bisect import bisect as run_bisect
    from provisioner.health.bisect import parse_groups, shell_runner
    from provisioner.inventory import load_site

    s = load_site(site_name(site))
    names = [h.name for h in s.select(hosts)]
    rows, cols = parse_groups(groups)
    res = run_bisect(names, rows, cols, shell_runner(command, timeout_s), parallel=parallel,
                     confirm=confirm)
    if as_json:
        print_json({
            "suspects": res.suspects, "ambiguous": res.ambiguous, "confirmed": res.confirmed,
            "groups": [{"round": o.group.round, "index": o.group.index, "hosts": list(o.group.hosts),
                        "rc": o.rc} for o in res.outcomes],
        })
    else:
        for o in res.outcomes:
            mark = "[red]FAIL[/]" if o.failed else "[green]ok[/]"
            console.print(f"round {o.group.round} group {o.group.index}: {mark} "
                          f"{','.join(o.group.hosts)}")
        if res.suspects:
            console.print("suspects: " + ", ".join(
                h + (f" (confirmed: {'bad' if res.confirmed[h] else 'passes'})" if h in res.confirmed else "")
                for h in res.suspects))
            if res.ambiguous:
                console.print("several groups failed in each round: some suspects may be "
                              "innocent; use --confirm")
        else:
            console.print("no host is in a failing group of both rounds")
    if res.suspects:
        exit_with(ExitCode.PARTIAL_FAILURE)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command("health")(health)
    app.command("hosts")(hosts_cmd)
    app.command("ticket")(ticket)
    app.command("bisect")(bisect_cmd)
