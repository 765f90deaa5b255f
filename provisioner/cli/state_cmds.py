"""`provision status`, `provision history`, `provision maintenance`."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import handle_errors
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore
from provisioner.wording import plural


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
    store = StateStore.for_site(s)
    store.ensure_hosts([h.name for h in s.hosts])
    records = {r.name: r for r in store.all()}
    rows = [records[h.name] for h in selected]
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
                escape(dash(r.reason)),
                escape(dash(r.last_error)),
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
    store = StateStore.for_site(s)
    store.ensure_hosts([host])
    events = store.events(host, limit=limit)
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
        table.add_row(e.ts.strftime("%Y-%m-%d %H:%M:%S"), e.kind, change, e.message)
    console.print(table)


@handle_errors
def maintenance(
    hosts: list[str] = typer.Argument(..., help="Host names or globs."),
    off: bool = typer.Option(False, "--off", help="Take the hosts out of maintenance."),
    reason: str = typer.Option("", "--reason", "-r", help="Why (kept in the history)."),
    site: str | None = SiteOption,
) -> None:
    """Put hosts into maintenance (nothing touches them without --force), or take them out."""
    s = load_site(site_name(site))
    selected = s.select(hosts)
    store = StateStore.for_site(s)
    store.ensure_hosts([h.name for h in selected])
    target = NodeState.DISCOVERED if off else NodeState.MAINTENANCE
    for h in selected:
        rec = store.get(h.name)
        if off and rec.state != NodeState.MAINTENANCE:
            console.print(f"{h.name}: not in maintenance ({rec.state.value})")
            continue
        store.transition(h.name, target, reason=reason or ("back in service" if off else ""))
        console.print(f"{h.name}: {rec.state.value} -> {target.value}")


def register(app: typer.Typer) -> None:
    """Add the state commands."""
    app.command("status")(status)
    app.command("history")(history)
    app.command("maintenance")(maintenance)
