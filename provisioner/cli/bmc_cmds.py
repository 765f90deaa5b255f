"""`provision discover`, `provision power`, `provision boot`: BMC work across a rack."""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from provisioner.bmc.base import BootTarget, PowerAction
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
from provisioner.cli.tables import (
    Col,
    WideOption,
    dash,
    fit_table,
    print_table,
    skew_text,
)
from provisioner.exceptions import InputError, PartialFailure
from provisioner.wording import plural

if TYPE_CHECKING:  # annotations only: `--help` must not load these (test_cli_lazy)
    from provisioner.inventory import Host, Site
    from provisioner.state import StateStore
    from provisioner.workflow.bulk import ActionResult
    from provisioner.workflow.discover import DiscoveryResult

err = TerminalConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)

ParallelOption = typer.Option(
    None, "--parallel", min=1, help="BMCs at once (default: settings.redfish.max_parallel)."
)
ForceOption = typer.Option(False, "--force", help="Also act on hosts in maintenance.")


class PowerCommand(StrEnum):
    """What `provision power` can do."""

    on = "on"
    off = "off"
    shutdown = "shutdown"
    restart = "restart"
    cycle = "cycle"
    status = "status"


class BootCommand(StrEnum):
    """Boot targets of `provision boot`."""

    pxe = "pxe"
    http = "http"
    disk = "disk"
    cd = "cd"


BOOT_TARGETS = {
    BootCommand.pxe: BootTarget.PXE,
    BootCommand.http: BootTarget.HTTP,
    BootCommand.disk: BootTarget.DISK,
    BootCommand.cd: BootTarget.CD,
}


def _select(site: Site, hosts: list[str] | None, rack: str | None, *, required: bool) -> list[Host]:
    if required and not hosts and not rack:
        raise InputError("name the hosts (names or globs) or a --rack",
                         hint="e.g. `provision power cycle 'gpu-r01-*'` or `--rack r01`")
    return site.select(hosts or None, rack)


def _skip_maintenance(store: StateStore, hosts: list[Host], force: bool) -> list[Host]:
    from provisioner.workflow.selection import without_maintenance

    kept, held = without_maintenance(store, hosts, force=force)
    for host in held:
        err.print(f"[yellow]skipped[/] {host.name}: in maintenance (use --force)")
    return kept


def _failure_exit(failed: Sequence[str], total: int, what: str) -> None:
    if failed:
        raise PartialFailure(
            f"{what} failed on {len(failed)} of {plural(total, 'host')}: {', '.join(failed)}",
            hint="the table above gives each host's reason; fix those BMCs and re-run with "
            "just those hosts",
        )


# -- discover -----------------------------------------------------------------------------


DISCOVERY_COLUMNS = (
    Col("host"),
    Col("vendor/model", priority=2, wrap=True),
    Col("serial", priority=3),
    Col("provisioning MAC"),
    Col("NICs", priority=5, justify="right"),
    Col("disks", priority=5, justify="right"),
    Col("BMC fw", priority=4),
    Col("skew", priority=1, justify="right"),
    Col("result", wrap=True),
)


def _vendor_cell(site: Site | None, res: DiscoveryResult) -> str:
    """Who made the host, as far as its BMC says; "emulated" for the lab's virtual machines."""
    f = res.facts
    if f is None:
        return "-"
    host = next((h for h in site.hosts if h.name == res.host), None) if site else None
    if host is not None and "lab_domain" in host.vars:
        return "emulated"
    maker = f.manufacturer or f.extra.get("vendor")
    return " ".join(str(p) for p in (maker, f.model) if p) or "-"


def _discovery_rows(
    results: Sequence[DiscoveryResult], max_skew_s: float, site: Site | None = None
) -> list[list[str]]:
    rows = []
    for res in results:
        f = res.facts
        skew = skew_text(f.clock_skew_s if f else None)
        if f and f.clock_skew_s is not None and abs(f.clock_skew_s) > max_skew_s:
            skew = f"[red]{skew}[/]"
        result = "[green]ok[/]" if res.ok else f"[red]{plain(res.reason or 'failed')}[/]"
        if res.ok and res.warnings:
            result = f"[yellow]ok ({plural(len(res.warnings), 'warning')})[/]"
        rows.append(
            [
                res.host,
                plain(_vendor_cell(site, res)),
                plain(dash(f.serial if f else None)),
                plain(dash(f.provisioning_mac if f else None)),
                str(len(f.nics)) if f else "-",
                str(len(f.drives)) if f else "-",
                plain(dash(f.bmc_firmware if f else None)),
                skew,
                result,
            ]
        )
    return rows


def _discovery_table(
    results: Sequence[DiscoveryResult],
    max_skew_s: float,
    site: Site | None = None,
    *,
    width: int = 80,
    wide: bool = False,
) -> Table:
    title = f"discovery: {sum(r.ok for r in results)}/{plural(len(results), 'host')} read"
    rows = _discovery_rows(results, max_skew_s, site)
    return fit_table(title, DISCOVERY_COLUMNS, rows, width=width, wide=wide)


@handle_errors
def discover(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: all)."),
    rack: str | None = typer.Option(None, "--rack", "-r", help="Only this rack."),
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
    parallel: int | None = ParallelOption,
    wide: bool = WideOption,
    explain: str | None = typer.Option(
        None, "--explain", metavar="HOST",
        help="Read one host and show, per NIC, the facts used and why it was (not) chosen."),
) -> None:
    """Read every BMC at once: serials, NICs and the provisioning MAC, disks, clocks, firmware."""
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.workflow.discover import (
        clock_skew_alerts,
        discover_site,
        duplicate_serials,
        facts_to_dict,
    )

    s = load_site(site_name(site))
    if explain:
        hosts = [explain]
    selected = _select(s, hosts, rack, required=bool(explain))
    store = StateStore.for_site(s)
    with holding(store, f"provision discover --site {s.name}", selected) as selected:
        selected = _skip_maintenance(store, selected, force=False)
        show_bar = is_tty() and not as_json
        with Progress(
            TextColumn("discover"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[last]}"), console=err, disable=not show_bar,
            transient=True,
        ) as progress:
            task = progress.add_task("discover", total=len(selected), last="")

            def tick(res: DiscoveryResult) -> None:
                mark = "ok" if res.ok else res.reason
                progress.update(task, advance=1, last=f"{res.host}: {mark}")

            results = discover_site(s, selected, store=store, max_parallel=parallel,
                                    on_result=tick)
    max_skew = s.settings.max_clock_skew_s
    skewed = clock_skew_alerts(results, max_skew)
    stored = {r.name: str(r.facts.get("serial") or "")
              for r in store.records([h.name for h in s.hosts])}
    shared = {h: [o for o in hosts if o != h]
              for hosts in duplicate_serials(results, stored).values() for h in hosts}
    if explain:
        _explain(results, as_json)
    elif as_json:
        print_json([
            {
                "host": r.host,
                "ok": r.ok,
                "reason": r.reason,
                "error": r.error,
                "seconds": round(r.seconds, 3),
                "warnings": r.warnings,
                "clock_skew_alert": r.host in skewed,
                "serial_shared_with": shared.get(r.host, []),
                "facts": facts_to_dict(r.facts) if r.facts else None,
            }
            for r in results
        ])
    else:
        table = _discovery_table(results, max_skew, s, width=console.width, wide=wide)
        print_table(console, table, wide=wide)
        for res in results:
            if not res.ok:
                err.print(f"[red]{res.host}[/] {res.reason}: {plain(res.error)}")
        print_warnings(err, results)
        print_duplicate_serials(err, duplicate_serials(results, stored))
        for host, skew in skewed.items():
            err.print(f"[yellow]{host}[/] BMC clock is off by {skew:+.0f}s "
                      f"(more than max_clock_skew_s={max_skew:g})")
    _failure_exit([r.host for r in results if not r.ok], len(results), "discovery")


_UUID = re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
SHOWN_HOSTS = 3


def grouped_warnings(results: Sequence[DiscoveryResult]) -> list[tuple[list[str], str]]:
    """Each distinct warning once, with the hosts that gave it (first seen first) and the first
    host's words: neither the host's own name nor a system UUID makes a warning distinct."""
    groups: dict[str, tuple[list[str], str]] = {}
    for res in results:
        for warning in res.warnings:
            key = _UUID.sub("<uuid>", warning.replace(res.host, "<host>"))
            hosts, _ = groups.setdefault(key, ([], warning))
            if res.host not in hosts:
                hosts.append(res.host)
    return list(groups.values())


def print_warnings(out: Console, results: Sequence[DiscoveryResult]) -> None:
    """One line per distinct warning: the same 404 from every BMC of a 500-host site is one
    line naming how many hosts gave it (each host's own list is in --json)."""
    for hosts, warning in grouped_warnings(results):
        if len(hosts) == 1:
            out.print(f"[yellow]{hosts[0]}[/] warning: {plain(warning)}")
            continue
        names = ", ".join(hosts[:SHOWN_HOSTS])
        if len(hosts) > SHOWN_HOSTS:
            names += f" and {len(hosts) - SHOWN_HOSTS} more"
        out.print(f"[yellow]{len(hosts)} hosts[/] ({plain(names)}) warning, as "
                  f"{hosts[0]} gave it: {plain(warning)}")


def print_duplicate_serials(out: Console, serials: dict[str, list[str]]) -> None:
    """A warning per serial number several hosts report (this run's or stored facts)."""
    for serial, hosts in serials.items():
        out.print(f"[yellow]{', '.join(hosts)}[/] warning: {len(hosts)} hosts report serial "
                  f"{plain(serial)}: two BMC addresses reach one machine, or boards or VMs "
                  f"were cloned; check these hosts' BMC addresses in the site file")


def _explain(results: Sequence[DiscoveryResult], as_json: bool) -> None:
    from provisioner.cli.nic_explain import print_explanation

    for res in results:
        data = (res.facts.extra.get("nic_explain") if res.facts else None) or {}
        if as_json:
            print_json({"host": res.host, "ok": res.ok, "reason": res.reason,
                        "error": res.error, **data})
        elif res.facts is None:
            err.print(f"[red]{res.host}[/] {res.reason}: {plain(res.error)}")
        else:
            print_explanation(console, err, res.host, data)


# -- power and boot ------------------------------------------------------------------------


def _action_table(title: str, results: Sequence[ActionResult]) -> Table:
    table = Table(title=title)
    for col in ("host", "result", "detail"):
        table.add_column(col)
    for res in results:
        if res.ok:
            detail = res.detail + ("; " + "; ".join(res.warnings) if res.warnings else "")
            table.add_row(res.host, "[green]ok[/]", plain(detail))
        else:
            table.add_row(res.host, f"[red]{res.reason}[/]", plain(res.error or ""))
    return table


def _report(results: list[ActionResult], title: str, as_json: bool, what: str) -> None:
    if as_json:
        print_json([
            {"host": r.host, "ok": r.ok, "detail": r.detail, "reason": r.reason,
             "error": r.error, "warnings": list(r.warnings)}
            for r in results
        ])
    else:
        console.print(_action_table(title, results))
    _failure_exit([r.host for r in results if not r.ok], len(results), what)


@handle_errors
def power(
    command: PowerCommand = typer.Argument(..., help="on, off (immediate), shutdown "
                                           "(graceful), restart, cycle or status."),
    hosts: list[str] = typer.Argument(None, help="Host names or globs."),
    rack: str | None = typer.Option(None, "--rack", "-r", help="Every host of this rack."),
    site: str | None = SiteOption,
    wait: float = typer.Option(0.0, "--wait", min=0, help="Seconds to wait for on/off to "
                               "be reached (0: do not wait)."),
    as_json: bool = JsonOption,
    parallel: int | None = ParallelOption,
    force: bool = ForceOption,
) -> None:
    """Power hosts on/off/cycle through their BMCs, or show their power state (status reads
    every host when none is named)."""
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.workflow.bulk import power_operation, record_outcomes, run_on_hosts

    s = load_site(site_name(site))
    selected = _select(s, hosts, rack, required=command != PowerCommand.status)
    if command == PowerCommand.status:
        results = run_on_hosts(s, selected, power_operation(None), max_parallel=parallel)
        _report(results, "power state", as_json, "reading the power state")
        return
    action = PowerAction(command.value)
    store = StateStore.for_site(s)
    with holding(store, f"provision power {command.value} --site {s.name}", selected) as selected:
        selected = _skip_maintenance(store, selected, force)
        results = run_on_hosts(s, selected, power_operation(action, wait_s=wait),
                               max_parallel=parallel, waits_s=wait)
        record_outcomes(store, results, "power", f"power {command.value}")
    _report(results, f"power {command.value}", as_json, f"power {command.value}")


@handle_errors
def boot(
    target: BootCommand = typer.Argument(..., help="pxe, http (UEFI HTTP), disk or cd."),
    hosts: list[str] = typer.Argument(None, help="Host names or globs."),
    rack: str | None = typer.Option(None, "--rack", "-r", help="Every host of this rack."),
    persistent: bool = typer.Option(False, "--persistent", help="Keep the override for "
                                    "every boot (default: next boot only)."),
    image: str | None = typer.Option(None, "--image", help="With cd: insert this ISO URL as "
                                     "virtual media first (the BMC downloads it)."),
    eject: bool = typer.Option(False, "--eject", help="Eject virtual media first (e.g. with "
                               "disk, after installing from an ISO)."),
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
    parallel: int | None = ParallelOption,
    force: bool = ForceOption,
) -> None:
    """Set (and verify) the boot device of the next boot, or of every boot with --persistent."""
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.workflow.bulk import boot_operation, record_outcomes, run_on_hosts

    if image and target != BootCommand.cd:
        raise InputError("--image goes with `boot cd`",
                         hint="e.g. provision boot cd HOST --image http://198.18.254.1/boot.iso")
    if image and eject:
        raise InputError("--image and --eject contradict each other", hint="give one of them")
    s = load_site(site_name(site))
    selected = _select(s, hosts, rack, required=True)
    store = StateStore.for_site(s)
    with holding(store, f"provision boot {target.value} --site {s.name}", selected) as selected:
        selected = _skip_maintenance(store, selected, force)
        results = run_on_hosts(
            s, selected,
            boot_operation(BOOT_TARGETS[target], persistent=persistent, image=image, eject=eject),
            max_parallel=parallel,
        )
        record_outcomes(store, results, "boot", f"boot {target.value}")
    _report(results, f"boot {target.value}", as_json, f"boot {target.value}")


def register(app: typer.Typer) -> None:
    """Add the BMC commands."""
    app.command("discover")(discover)
    app.command("power")(power)
    app.command("boot")(boot)
