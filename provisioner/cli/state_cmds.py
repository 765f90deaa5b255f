"""`provision status`, `provision history`, `provision maintenance` and `provision state ...`
(check, backup, restore, prune: looking after the state file)."""

from __future__ import annotations

import re
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import err_console, handle_errors, plain
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.exceptions import InputError, NotReady
from provisioner.state.store import KEEP_DAYS, KEEP_RUNS
from provisioner.wording import plural

if TYPE_CHECKING:  # annotations only: `--help` must not load these (test_cli_lazy)
    from provisioner.state import Event


@handle_errors
def status(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: all)."),
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
    wide: bool = WideOption,
) -> None:
    """Show each host's state, its reason and last error."""
    from provisioner.inventory import load_site
    from provisioner.state import NodeState, StateStore

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


SinceHelp = ("Only events since then: 30m, 12h, 7d (ago), or a UTC date or time "
             "(2026-11-27, 2026-11-27T10:00).")
KindHelp = ("Only events of this kind (transition, facts, health, bios, firmware, ...); "
            "repeat for several.")
_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGO = re.compile(r"(?P<n>\d+)\s*(?P<unit>[smhdw])")


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: an age (30m, 12h, 7d) before ``now``, or an ISO date/time read as UTC."""
    value = text.strip()
    if m := _AGO.fullmatch(value.lower()):
        return now - timedelta(seconds=int(m["n"]) * _UNITS_S[m["unit"]])
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"--since {value!r} is neither an age nor a date",
                         hint="write an age such as 30m, 12h or 7d, or a UTC date or time "
                         "such as 2026-11-27 or 2026-11-27T10:00") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _history_rows(events: list[Event], wide: bool) -> list[list[str]]:
    """State changes in their own column; a facts update names how many facts (the names are
    in --wide and --json): one discovery must not take a screen."""
    rows = []
    for e in events:
        change = ""
        if e.to_state:
            change = f"{e.from_state.value if e.from_state else ''} -> {e.to_state.value}"
        message = e.message
        if e.kind == "facts" and not wide and message.startswith(_FACTS):
            names = message.removeprefix(_FACTS).split(", ")
            message = _FACTS + plural(len(names), "fact")
        rows.append([e.ts.strftime("%Y-%m-%d %H:%M:%S"), plain(change.strip()),
                     plain(message), e.kind])
    return rows


_FACTS = "facts updated: "


@handle_errors
def history(
    host: str = typer.Argument(..., help="Host name."),
    site: str | None = SiteOption,
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="Last N events."),
    since: str | None = typer.Option(None, "--since", metavar="WHEN", help=SinceHelp),
    kinds: list[str] = typer.Option(None, "--kind", metavar="KIND", help=KindHelp),
    as_json: bool = JsonOption,
    wide: bool = WideOption,
) -> None:
    """Show a host's event log (state changes, facts, deploy and health events), oldest first;
    --since and --kind narrow it, --limit keeps the last N of what is left."""
    from provisioner.inventory import load_site
    from provisioner.state import StateStore

    s = load_site(site_name(site))
    s.host(host)
    cutoff = parse_since(since, datetime.now(UTC)) if since is not None else None
    store = StateStore.for_site(s, readonly=True)
    known = {r.name for r in store.all()}
    events = store.events(host) if host in known else []
    events = [e for e in events if (cutoff is None or e.ts >= cutoff)
              and (not kinds or e.kind in kinds)][-limit:]
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
    # the kind mostly repeats the message's first words: its column only with --wide
    cols: tuple[Col, ...] = (Col("time (UTC)"), Col("change"), Col("message", wrap=True),
                             Col("kind"))
    rows = _history_rows(events, wide)
    if not wide:
        cols, rows = cols[:-1], [r[:-1] for r in rows]
    title = f"{plain(host)}: last {plural(len(events), 'event')}"
    table = fit_table(title, cols, rows, width=console.width, wide=wide)
    print_table(console, table, wide=wide)


@handle_errors
def maintenance(
    hosts: list[str] = typer.Argument(..., help="Host names or globs."),
    off: bool = typer.Option(False, "--off", help="Take the hosts out of maintenance: each "
                             "returns to the state it had."),
    reason: str = typer.Option("", "--reason", "-r", help="Why (kept in the history)."),
    site: str | None = SiteOption,
) -> None:
    """Put hosts into maintenance (nothing touches them without --force), or take them out."""
    from provisioner.inventory import load_site
    from provisioner.state import NodeState, StateStore
    from provisioner.workflow.firmware_journal import in_flight

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
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.state.errors import damaged
    from provisioner.state.upkeep import summarise

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
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.state.upkeep import backup

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
    from provisioner.inventory import load_site
    from provisioner.state import default_state_dir
    from provisioner.state.upkeep import restore

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
    from provisioner.inventory import load_site
    from provisioner.state import StateStore

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
