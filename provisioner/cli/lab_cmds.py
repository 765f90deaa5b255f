"""`provision lab up/down/status`: the virtual rack on this machine."""

from __future__ import annotations

import json
from typing import Literal

import typer

from provisioner.cli.consoles import TerminalConsole
from provisioner.cli.errors import exit_with, handle_errors
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.exceptions import ExitCode
from provisioner.wording import plural

lab_app = typer.Typer(
    help="The virtual lab: qemu VMs with Redfish BMCs in a private network namespace "
    "(needs root). Its site is `lab`: `provision ... --site lab`.",
    no_args_is_help=True,
)
# Tables fit the terminal (80 columns when piped), dropping the least useful columns first.
console = TerminalConsole(highlight=False, emoji=False)


def _print_status(st: object, wide: bool = False) -> None:
    from provisioner.lab.lab import LabStatus

    assert isinstance(st, LabStatus)
    state = (
        "[green]up[/]"
        if st.up
        else ("[red]down[/]" if not st.netns_exists else "[yellow]degraded[/]")
    )
    console.print(f"lab {st.netns!r}: {state}")
    console.print(
        f"  namespace: {'yes' if st.netns_exists else 'no'}   uplink: {'yes' if st.uplink else 'no'}"
        f"   libvirtd: {'running' if st.libvirtd else 'not running'}"
        f"   apt proxy: {st.apt_proxy or 'not running'}"
    )
    console.print(f"  site: {st.site or 'not generated'}")
    if st.hosts:
        cols = (
            Col("host"),
            Col("VM", priority=3),
            Col("power"),
            Col("BMC", priority=2),
            Col("answers", priority=1),
            Col("provisioning MAC", priority=1),
            Col("root disk", priority=3),
        )
        rows = [
            [
                h.name,
                dash(h.domain),
                dash(h.power),
                dash(h.bmc_url),
                "[green]yes[/]" if h.bmc_answers else "[red]no[/]",
                dash(h.provisioning_mac),
                dash(h.root_disk_serial),
            ]
            for h in st.hosts
        ]
        table = fit_table(plural(len(rows), "host"), cols, rows, width=console.width, wide=wide)
        print_table(console, table, wide=wide)
    bmcs = {h.bmc_pid for h in st.hosts}
    others = {pid: name for pid, name in st.netns_processes.items() if pid not in bmcs}
    if others:
        console.print(
            "  other processes in the namespace: "
            + ", ".join(f"{name}[{pid}]" for pid, name in sorted(others.items()))
        )


@lab_app.command("up")
@handle_errors
def up_cmd(
    hosts: int = typer.Option(None, "--hosts", help="Number of servers (default 2, or as now)."),
    disks: int = typer.Option(None, "--disks", help="Disks per server (default 3, or as now)."),
    firmware: str = typer.Option(None, "--firmware", help="bios (SeaBIOS+iPXE) or uefi (OVMF)."),
    memory: int = typer.Option(None, "--memory", help="MiB of memory per VM (default 1024)."),
) -> None:
    """Create the lab, or repair it: idempotent, a second run keeps what exists."""
    from provisioner.lab.lab import resolve_plan, up

    fw: Literal["bios", "uefi"] | None = None
    if firmware is not None:
        if firmware not in ("bios", "uefi"):
            from provisioner.exceptions import InputError

            raise InputError(f"--firmware {firmware!r} is not supported", hint="use bios or uefi")
        fw = firmware  # type: ignore[assignment]
    plan = resolve_plan(hosts=hosts, disks=disks, firmware=fw, memory_mib=memory)
    console.print(
        f"bringing up lab {plan.netns!r}: {plural(plan.hosts, 'host')}, "
        f"{plural(plan.disks, 'disk')} each, "
        f"{plan.firmware} firmware (VMs stay powered off; their BMCs power them on)"
    )
    _print_status(up(plan))
    console.print(f"next: provision discover --site lab   (site file {plan.site_path})")


@lab_app.command("down")
@handle_errors
def down_cmd(
    purge: bool = typer.Option(
        False,
        "--purge",
        help="Also remove the lab site's state database and logs, and the lab OS image cache.",
    ),
) -> None:
    """Remove what the lab made: VMs, disks, BMCs, processes, networks, the generated site.

    The lab site's state database and logs, and the built lab OS image, are kept (the next
    `provision rack` reuses the image); --purge removes them too, and nothing of other sites
    (the deploy ramdisk cache, which every site on the embedded backend boots, stays).
    """
    from provisioner.lab.lab import down

    report = down(purge=purge)
    if report.nothing:
        console.print("lab down: nothing to remove")
    else:
        removed = [
            plural(len(report.domains), "VM"),
            *(["the disk pool"] if report.pool else []),
            plural(len(report.killed_pids), "process", "processes"),
            *(["the namespace"] if report.netns else []),
            plural(len(report.links), "link"),
            plural(len(report.files), "file"),
        ]
        stopped = f"; stopped {', '.join(report.daemons)}" if report.daemons else ""
        console.print(f"lab down: removed {', '.join(removed)}{stopped}", markup=False)
    for line in report.purged:
        console.print(f"  purged {line}", markup=False)
    if report.kept:
        console.print("kept (`provision lab down --purge` removes them):")
        for line in report.kept:
            console.print(f"  {line}", markup=False)
    if report.shared:
        console.print("kept for every site on the embedded backend (--purge leaves it; "
                      "rebuilt on the next deploy if removed):", markup=False)
        for line in report.shared:
            console.print(f"  {line}", markup=False)


@lab_app.command("status")
@handle_errors
def status_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    wide: bool = WideOption,
) -> None:
    """Show what runs: namespace, VMs with power state, BMCs answering. Exit 5 unless up."""
    from provisioner.lab.lab import status

    st = status()
    if as_json:
        typer.echo(json.dumps(st.to_dict(), indent=2))
    else:
        _print_status(st, wide)
    if not st.up:
        exit_with(ExitCode.NOT_READY)


@lab_app.command("console")
@handle_errors
def console_cmd(
    host: str = typer.Argument(..., help="Lab host name, e.g. lab-host01."),
    lines: int = typer.Option(40, "--lines", "-n", help="How many lines to show."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new output."),
) -> None:
    """Show a VM's serial console (firmware, iPXE, deploy ramdisk, OS boot)."""
    import time

    from provisioner.lab.lab import console_log, tail_lines

    path = console_log(host)
    for line in tail_lines(path, lines):
        typer.echo(line)
    if not follow:
        return
    with path.open("rb") as fh:
        fh.seek(0, 2)
        while True:
            chunk = fh.read()
            if chunk:
                typer.echo(chunk.decode(errors="replace"), nl=False)
            else:
                time.sleep(0.5)


def register(app: typer.Typer) -> None:
    """Add `provision lab ...` to the root app."""
    app.add_typer(lab_app, name="lab")
