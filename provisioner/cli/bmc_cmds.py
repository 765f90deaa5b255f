"""`provision discover`, `provision power`, `provision boot`: BMC work across a rack."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from provisioner.bmc.base import BootTarget, PowerAction
from provisioner.bmc.bulk import ActionResult, boot_operation, power_operation, run_on_hosts
from provisioner.bmc.discovery import (
    DiscoveryResult,
    clock_skew_alerts,
    discover_site,
    facts_to_dict,
)
from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import handle_errors, is_tty, plain
from provisioner.exceptions import InputError, PartialFailure
from provisioner.inventory import Host, Site, load_site
from provisioner.state import NodeState, StateStore

err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

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
                         hint="e.g. `provision power status 'gpu-r01-*'`")
    return site.select(hosts or None, rack)


def _skip_maintenance(store: StateStore, hosts: list[Host], force: bool) -> list[Host]:
    store.ensure_hosts([h.name for h in hosts])
    if force:
        return hosts
    kept = []
    for host in hosts:
        if store.get(host.name).state == NodeState.MAINTENANCE:
            err.print(f"[yellow]skipped[/] {host.name}: in maintenance (use --force)")
        else:
            kept.append(host)
    return kept


def _failure_exit(failed: Sequence[str], total: int, what: str) -> None:
    if failed:
        raise PartialFailure(
            f"{what} failed on {len(failed)} of {total} hosts: {', '.join(failed)}",
            hint="the table above gives each host's reason; fix those BMCs and re-run with "
            "just those hosts",
        )


# -- discover -----------------------------------------------------------------------------


def _discovery_table(results: Sequence[DiscoveryResult], max_skew_s: float) -> Table:
    table = Table(title=f"discovery: {sum(r.ok for r in results)}/{len(results)} hosts read")
    for col in ("host", "vendor/model", "serial", "provisioning MAC", "NICs", "disks",
                "BMC fw", "clock skew", "result"):
        table.add_column(col)
    for res in results:
        f = res.facts
        skew = ""
        if f and f.clock_skew_s is not None:
            colour = "red" if abs(f.clock_skew_s) > max_skew_s else ""
            skew = f"[{colour}]{f.clock_skew_s:+.0f}s[/]" if colour else f"{f.clock_skew_s:+.0f}s"
        result = "[green]ok[/]" if res.ok else f"[red]{res.reason}[/]"
        if res.ok and res.warnings:
            result = f"[yellow]ok ({len(res.warnings)} warnings)[/]"
        table.add_row(
            res.host,
            f"{f.extra.get('vendor')}: {f.model or '?'}" if f else "",
            (f.serial or "") if f else "",
            (f.provisioning_mac or "") if f else "",
            str(len(f.nics)) if f else "",
            str(len(f.drives)) if f else "",
            (f.bmc_firmware or "") if f else "",
            skew,
            result,
        )
    return table


@handle_errors
def discover(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: all)."),
    rack: str | None = typer.Option(None, "--rack", "-r", help="Only this rack."),
    site: str | None = SiteOption,
    as_json: bool = JsonOption,
    parallel: int | None = ParallelOption,
) -> None:
    """Read every BMC at once: serials, NICs and the provisioning MAC, disks, clocks, firmware."""
    s = load_site(site_name(site))
    selected = _select(s, hosts, rack, required=False)
    store = StateStore.for_site(s)
    with store.orchestrator_lock("discover"):
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
    if as_json:
        print_json([
            {
                "host": r.host,
                "ok": r.ok,
                "reason": r.reason,
                "error": r.error,
                "seconds": round(r.seconds, 3),
                "warnings": r.warnings,
                "clock_skew_alert": r.host in skewed,
                "facts": facts_to_dict(r.facts) if r.facts else None,
            }
            for r in results
        ])
    else:
        console.print(_discovery_table(results, max_skew))
        for res in results:
            if not res.ok:
                err.print(f"[red]{res.host}[/] {res.reason}: {plain(res.error)}")
            for warning in res.warnings:
                err.print(f"[yellow]{res.host}[/] warning: {plain(warning)}")
        for host, skew in skewed.items():
            err.print(f"[yellow]{host}[/] BMC clock is off by {skew:+.0f}s "
                      f"(more than max_clock_skew_s={max_skew:g})")
    _failure_exit([r.host for r in results if not r.ok], len(results), "discovery")


# -- power and boot ------------------------------------------------------------------------


def _action_table(title: str, results: Sequence[ActionResult]) -> Table:
    table = Table(title=title)
    for col in ("host", "result", "detail"):
        table.add_column(col)
    for res in results:
        if res.ok:
            detail = res.detail + ("; " + "; ".join(res.warnings) if res.warnings else "")
            table.add_row(res.host, "[green]ok[/]", detail)
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
    """Power hosts on/off/cycle through their BMCs, or show their power state."""
    s = load_site(site_name(site))
    selected = _select(s, hosts, rack, required=True)
    if command == PowerCommand.status:
        results = run_on_hosts(s, selected, power_operation(None), max_parallel=parallel)
        _report(results, "power state", as_json, "reading the power state")
        return
    action = PowerAction(command.value)
    store = StateStore.for_site(s)
    with store.orchestrator_lock(f"power {command.value}"):
        selected = _skip_maintenance(store, selected, force)
        results = run_on_hosts(s, selected, power_operation(action, wait_s=wait),
                               max_parallel=parallel)
        for res in results:
            store.record_event(res.host, "power", f"power {command.value}: "
                               + ("ok" if res.ok else f"{res.reason}"),
                               {"error": res.error} if res.error else None)
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
    if image and target != BootCommand.cd:
        raise InputError("--image goes with `boot cd`",
                         hint="e.g. provision boot cd HOST --image http://198.18.254.1/boot.iso")
    if image and eject:
        raise InputError("--image and --eject contradict each other", hint="give one of them")
    s = load_site(site_name(site))
    selected = _select(s, hosts, rack, required=True)
    store = StateStore.for_site(s)
    with store.orchestrator_lock(f"boot {target.value}"):
        selected = _skip_maintenance(store, selected, force)
        results = run_on_hosts(
            s, selected,
            boot_operation(BOOT_TARGETS[target], persistent=persistent, image=image, eject=eject),
            max_parallel=parallel,
        )
        for res in results:
            store.record_event(res.host, "boot", f"boot {target.value}: "
                               + ("ok" if res.ok else f"{res.reason}"),
                               {"error": res.error} if res.error else None)
    _report(results, f"boot {target.value}", as_json, f"boot {target.value}")


def register(app: typer.Typer) -> None:
    """Add the BMC commands."""
    app.command("discover")(discover)
    app.command("power")(power)
    app.command("boot")(boot)
