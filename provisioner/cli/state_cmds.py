"""`provision status`, `provision history`, `provision maintenance` and `provision state ...`
(check, backup, restore, prune: looking after the state file)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer
from rich.table import Table

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import err_console, handle_errors, plain
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.exceptions import InputError, NotReady
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore, default_state_dir
from provisioner.state.errors import damaged
from provisioner.state.store import KEEP_DAYS, KEEP_RUNS
from provisioner.state.upkeep import backup, restore, summarise
from provisioner.wording import plural
from provisioner.workflow.firmware_journal import in_flight


@handle_errors
def status(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: all)."),
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
    wide: bool = WideOption,
) -> None:
    """Show each host's state, its reason and last error."""
    s = load_site(site_name(site))
    selected = s.select(hosts or None)
    # read-only: never writes, never waits for a run, works in a read-only state directory
    store = StateStore.for_site(s, readonly=True)
    rows = store.records([h.name for h in selected])
    if as_json:
        print_json(
            [
                {
                    "host": r.name,
                    "state": r.state.value,
                    "reason": r.reason,
                    "last_error": r.last_error,
                    "updated_at": r.updated_at.isoformat(),
                    "facts": r.facts,
                }
                for r in rows
            ]
        )
        return
    colours = {NodeState.FAILED: "red", NodeState.MAINTENANCE: "yellow"}
    cells = []
    for r in rows:
        colour = colours.get(r.state, "green" if r.state != NodeState.ENROLLED else "")
        state = f"[{colour}]{r.state.value}[/]" if colour else r.state.value
        cells.append(
            [
                r.name,
                state,
                plain(dash(r.reason)),
                plain(dash(r.last_error)),
                r.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            ]
        )
    cols = (
        Col("host"),
        Col("state"),
        Col("reason", wrap=True),
        Col("last error", priority=2, wrap=True),
        Col("updated", priority=1),
    )
    title = f"site {s.name}: {plural(len(rows), 'host')}"
    print_table(console, fit_table(title, cols, cells, width=console.width, wide=wide), wide=wide)


@handle_errors
def history(
    host: str = typer.Argument(..., help="Host name."),
    site: str | None = SiteOption,
    limit: int = typer.Option(50, "--limit", "-n", help="Last N events."),
    as_json: bool = JsonOption,
) -> None:
    """Show a host's event log (state changes, facts, deploy and health events)."""
    s = load_site(site_name(site))
    s.host(host)
    store = StateStore.for_site(s, readonly=True)
    known = {r.name for r in store.all()}
    events = store.events(host, limit=limit) if host in known else []
    if as_json:
        print_json(
            [
                {
                    "ts": e.ts.isoformat(),
                    "kind": e.kind,
                    "from": e.from_state.value if e.from_state else None,
                    "to": e.to_state.value if e.to_state else None,
                    "message": e.message,
                    "data": e.data,
                }
                for e in events
            ]
        )
        return
    table = Table(title=f"{host}: last {plural(len(events), 'event')}")
    for col in ("time (UTC)", "kind", "change", "message"):
        table.add_column(col)
    for e in events:
        change = ""
        if e.to_state:
            change = f"{e.from_state.value if e.from_state else ''} -> {e.to_state.value}"
        table.add_row(e.ts.strftime("%Y-%m-%d %H:%M:%S"), e.kind, change, plain(e.message))
    console.print(table)


@handle_errors
def maintenance(
    hosts: list[str] = typer.Argument(..., help="Host names or globs."),
    off: bool = typer.Option(False, "--off", help="Take the hosts out of maintenance: each "
                             "returns to the state it had."),
    reason: str = typer.Option("", "--reason", "-r", help="Why (kept in the history)."),
    site: str | None = SiteOption,
) -> None:
    """Put hosts into maintenance (nothing touches them without --force), or take them out."""
    s = load_site(site_name(site))
    selected = s.select(hosts)
    store = StateStore.for_site(s)
    verb = "maintenance --off" if off else "maintenance"
    with store.hold(f"provision {verb} --site {s.name}", [h.name for h in selected]) as lease:
        for name, holder in lease.busy.items():
            err_console.print(f"skipped {name}: in use by {plain(holder)}")
        store.ensure_hosts(lease.hosts)
        flashing = {h.name: f for h in selected if not off and h.name not in lease.busy
                    and (f := in_flight(store, h.name)) is not None}
        for h in selected:
            if h.name in lease.busy:
                continue
            if h.name in flashing:
                err_console.print(f"refused {h.name}: a firmware update may still be running "
                                  f"on its BMC ({plain(flashing[h.name].describe())})")
                continue
            rec = store.get(h.name)
            if off and rec.state != NodeState.MAINTENANCE:
                console.print(f"{h.name}: not in maintenance ({rec.state.value})")
                continue
            if off:
                back, had = store.leave_maintenance(h.name, reason=reason)
                note = "" if back.state is had else f" (its {had.value} was cut short)"
                console.print(f"{h.name}: maintenance -> {back.state.value}{note}")
                continue
            store.transition(h.name, NodeState.MAINTENANCE, reason=reason)
            console.print(f"{h.name}: {rec.state.value} -> maintenance")
    if flashing:
        raise NotReady(f"{', '.join(flashing)} not put in maintenance: an interrupted firmware "
                       "update was left on the BMC", hint="run `provision firmware update "
                       f"{' '.join(flashing)}`: it finds out what became of it (waiting for "
                       "a task still running) and sends nothing twice")


state_app = typer.Typer(
    help="The site's state file: check it, back it up, restore a backup, prune old history.",
    no_args_is_help=True,
)


@state_app.command("check")
@handle_errors
def state_check(
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
) -> None:
    """Check the state file with SQLite's integrity check; exit 2 if it is damaged."""
    s = load_site(site_name(site))
    summary = summarise(StateStore.for_site(s, readonly=True))
    if as_json:
        print_json({"path": str(summary.path), "size_bytes": summary.size_bytes,
                    "hosts": summary.hosts, "events": summary.events,
                    "health_runs": summary.health_runs, "ok": not summary.problems,
                    "problems": summary.problems})  # fmt: skip
    else:
        console.print(
            f"{summary.path}: {summary.size_bytes / 2**20:.1f} MiB, "
            f"{plural(summary.hosts, 'host')}, {plural(summary.events, 'event')}, "
            f"{plural(summary.health_runs, 'health run')}"
        )
        for problem in summary.problems:
            err_console.print(f"  {plain(problem)}")
        console.print("damaged" if summary.problems else "ok: the file is whole")
    if summary.problems:
        raise damaged(summary.path, "; ".join(summary.problems[:3]), "trust its content")


@state_app.command("backup")
@handle_errors
def state_backup(
    dest: Path = typer.Argument(None, help="Backup file (default: <state dir>/<site>-<UTC "
                                "time>.sqlite.bak)."),
    site: str | None = SiteOption,
) -> None:
    """Copy the state file as one consistent snapshot, while runs go on."""
    s = load_site(site_name(site))
    store = StateStore.for_site(s, readonly=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = dest or store.path.with_name(f"{s.name}-{stamp}.sqlite.bak")
    size = backup(store, target)
    console.print(f"backed up {store.path} to {target} ({size / 2**20:.1f} MiB)")


@state_app.command("restore")
@handle_errors
def state_restore(
    source: Path = typer.Argument(..., help="A backup made by `provision state backup`."),
    site: str | None = SiteOption,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Put a backup in place of the state file (kept aside, never deleted); needs the whole
    site: refused while any run is going on."""
    s = load_site(site_name(site))
    if not source.is_file():
        raise InputError(f"backup {source} not found", hint="give the file `state backup` wrote")
    path = default_state_dir() / f"{s.name}.sqlite"
    if not yes:
        if not sys.stdin.isatty():
            raise InputError("restoring replaces the site's state and needs confirmation",
                             hint="pass --yes (-y)")
        if not typer.confirm(f"replace {path} by {source}?", default=False):
            console.print("nothing done")
            return
    kept = restore(path, s.name, source, f"provision state restore --site {s.name}")
    console.print(f"restored {path} from {source}"
                  + (f"; the file it replaced is kept as {kept}" if kept else ""))


@state_app.command("prune")
@handle_errors
def state_prune(
    site: str | None = SiteOption,
    keep_runs: int = typer.Option(KEEP_RUNS, "--keep-runs", min=1, metavar="N",
                                  help="Health runs kept whole per host."),
    keep_days: float = typer.Option(KEEP_DAYS, "--keep-days", min=1, metavar="DAYS",
                                    help="Verdicts and events (not state changes) kept this long."),
    vacuum: bool = typer.Option(True, "--vacuum/--no-vacuum",
                                help="Compact the file afterwards (needs room for a copy)."),
) -> None:
    """Drop old health results and events (state changes are kept forever), then compact."""
    s = load_site(site_name(site))
    store = StateStore.for_site(s)
    report = store.prune(keep_runs=keep_runs, keep_days=keep_days)
    console.print(
        f"pruned: {plural(report.runs_summarised, 'health run')} kept as verdicts only, "
        f"{plural(report.runs_deleted, 'health run')} and "
        f"{plural(report.events_deleted, 'event')} older than {keep_days:g} days removed"
    )
    if vacuum:
        shrunk = store.vacuum()
        console.print(f"compacted: {store.path} is {store.size_bytes() / 2**20:.1f} MiB "
                      f"({shrunk / 2**20:.1f} MiB freed)")


def register(app: typer.Typer) -> None:
    """Add the state commands."""
    app.command("status")(status)
    app.command("history")(history)
    app.command("maintenance")(maintenance)
