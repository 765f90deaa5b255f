"""`provision rack` and `provision reimage`: the main job."""

from __future__ import annotations

import sys
import threading
from typing import Literal

import typer
from rich.live import Live
from rich.table import Table

from provisioner.cli.common import SiteOption, console, print_json, site_name
from provisioner.cli.errors import err_console, exit_with, handle_errors
from provisioner.deploy.base import backend_class
from provisioner.exceptions import ExitCode, InputError
from provisioner.inventory import Host, Site, load_site
from provisioner.state import StateStore
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.configure import repo_root
from provisioner.workflow.rack import HostResult, RackOptions, RackResult, RackRunner
from provisioner.workflow.rack_plan import plan_rack
from provisioner.workflow.reimage import reimage_targets

PHASE_COLOURS = {"failed": "red", "retry": "yellow", "done": "green", "skipped": "dim"}


class LiveReporter:
    """A live per-host table on a terminal; one line per phase change otherwise."""

    def __init__(self, hosts: list[Host], *, live: bool) -> None:
        self._rows: dict[str, tuple[str, str]] = {h.name: ("queued", "") for h in hosts}
        self._lock = threading.Lock()
        self._live: Live | None = None
        if live:
            self._live = Live(self._table(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveReporter:
        if self._live:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.__exit__(None, None, None)

    def _table(self) -> Table:
        t = Table(title="provision rack", expand=False)
        t.add_column("host")
        t.add_column("phase")
        t.add_column("detail", overflow="fold")
        for name, (phase, detail) in self._rows.items():
            colour = PHASE_COLOURS.get(phase, "cyan")
            t.add_row(name, f"[{colour}]{phase}[/]", detail)
        return t

    def phase(self, host: str, phase: str, message: str) -> None:
        with self._lock:
            self._rows[host] = (phase, message)
            if self._live:
                self._live.update(self._table())
            else:
                console.print(f"{host}: {phase}: {message}")

    def finished(self, result: HostResult) -> None:
        phase = {"ok": "done", "failed": "failed", "skipped": "skipped"}[result.status]
        self.phase(result.host, phase, result.reason)


def _summary(result: RackResult, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "wave": {
                    "size": result.wave.size,
                    "streams": result.wave.streams,
                    "reason": result.wave.reason,
                    "bound_s": result.wave.bound_s,
                },
                "hosts": [
                    {
                        "host": r.host,
                        "status": r.status,
                        "reason": r.reason,
                        "attempts": r.attempts,
                        "phases": {k: round(v, 1) for k, v in r.phases.items()},
                    }
                    for r in result.results
                ],
                "ok": len(result.ok),
                "failed": len(result.failed),
                "skipped": len(result.skipped),
            }
        )
        return
    table = Table(title="summary")
    for col in ("host", "result", "reason", "attempts", "time (s)"):
        table.add_column(col)
    for r in result.results:
        colour = {"ok": "green", "failed": "red", "skipped": "dim"}[r.status]
        total = sum(r.phases.values())
        table.add_row(
            r.host, f"[{colour}]{r.status}[/]", r.reason, str(r.attempts or ""), f"{total:.0f}" if total else ""
        )
    console.print(table)
    console.print(
        f"{len(result.ok)} ok, {len(result.failed)} failed, {len(result.skipped)} skipped "
        f"(wave: {result.wave.summary})"
    )
    if result.configure_log:
        console.print(f"site.yml log: {result.configure_log}")


def _dry_run(site: Site, hosts: list[Host], options: RackOptions, as_json: bool) -> None:
    """Say what a run would do, changing nothing (the backend's own plan when it has one)."""
    plan = plan_rack(site, hosts, options, _QuietReporter())
    todo, skipped, wave, backend_plan = plan.todo, plan.skipped, plan.wave, plan.backend_plan
    if as_json:
        print_json(
            {
                "deploy": [h.name for h in todo],
                "skip": {r.host: r.reason for r in skipped},
                "wave": {
                    "size": wave.size,
                    "streams": wave.streams,
                    "reason": wave.reason,
                    "bound_s": wave.bound_s,
                },
                "backend": backend_plan.to_dict() if backend_plan is not None else None,
            }
        )
        return
    verb = "re-image" if options.reimage else "deploy"
    console.print(f"dry run: would {verb} {len(todo)} host(s), {wave.summary}")
    for h in todo:
        console.print(f"  {verb}: {h.name}")
    for r in skipped:
        console.print(f"  skip: {r.host} ({r.reason})")
    if backend_plan is not None:
        console.print(backend_plan.render())


def _run(
    site: Site,
    hosts: list[Host],
    options: RackOptions,
    command: str,
    as_json: bool,
    dry_run: bool = False,
) -> None:
    if dry_run:
        _dry_run(site, hosts, options, as_json)
        return
    backend_cls = backend_class(site.settings.deploy_backend)
    backend = backend_cls()
    store = StateStore.for_site(site)
    with store.orchestrator_lock(command):
        runner = RackRunner(
            site, store, backend, open_bmc=open_bmc, reporter=_reporter(hosts, as_json), options=options
        )
        rep = runner.reporter
        if isinstance(rep, LiveReporter):
            with rep:
                result = runner.run(hosts)
        else:
            result = runner.run(hosts)
    _summary(result, as_json)
    if result.failed:
        exit_with(ExitCode.PARTIAL_FAILURE)


class _QuietReporter:
    def phase(self, host: str, phase: str, message: str) -> None:
        print(f"{host}: {phase}: {message}", file=sys.stderr)

    def finished(self, result: HostResult) -> None:
        pass


def _reporter(hosts: list[Host], as_json: bool) -> LiveReporter | _QuietReporter:
    if as_json:
        return _QuietReporter()
    return LiveReporter(hosts, live=console.is_terminal)


PlaybookOption = typer.Option(
    None,
    "--playbook",
    "-p",
    help="Playbook to run after the install instead of playbooks/site.yml (repeatable, in order), "
    "e.g. one stage: playbooks/monitoring.yml.",
)


MethodOption = typer.Option(
    None, "--method", "-m", help="image (write a disk image) or autoinstall (Ubuntu installer)."
)


@handle_errors
def rack(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: every host)."),
    site: str | None = SiteOption,
    rack_name: str | None = typer.Option(None, "--rack", help="Only this rack."),
    max_parallel: int | None = typer.Option(
        None, "--max-parallel", "-k", min=1, help="Hosts installing at once (default: sized to the uplink)."
    ),
    method: str | None = MethodOption,
    skip_configure: bool = typer.Option(False, "--skip-configure", help="Do not run site.yml."),
    playbook: list[str] = PlaybookOption,
    no_ssh_wait: bool = typer.Option(
        False, "--no-ssh-wait", help="Do not wait for SSH after the install (e.g. no route to hosts)."
    ),
    force: bool = typer.Option(False, "--force", help="Also deploy hosts in maintenance."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing."),
) -> None:
    """Install every (or the named) host of a rack: discover, PXE, install, boot, SSH, site.yml.

    Hosts already deployed are skipped, so re-running resumes. Exit code 3 if any host failed.
    """
    s = load_site(site_name(site))
    selected = s.select(hosts or None, rack_name)
    options = RackOptions(
        method=_method(method, s),
        max_parallel=max_parallel,
        configure=not skip_configure,
        wait_ssh=not no_ssh_wait,
        force=force,
        playbooks=_playbooks(playbook),
    )
    _run(s, selected, options, f"provision rack --site {s.name}", as_json, dry_run)


@handle_errors
def reimage(
    hosts: list[str] = typer.Argument(None, help="Host names or globs to wipe and reinstall."),
    site: str | None = SiteOption,
    failed: bool = typer.Option(False, "--failed", help="Target every host in the failed state."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    max_parallel: int | None = typer.Option(None, "--max-parallel", "-k", min=1),
    method: str | None = MethodOption,
    skip_configure: bool = typer.Option(False, "--skip-configure", help="Do not run site.yml."),
    playbook: list[str] = PlaybookOption,
    no_ssh_wait: bool = typer.Option(False, "--no-ssh-wait", help="Do not wait for SSH."),
    force: bool = typer.Option(False, "--force", help="Also hosts in maintenance."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing."),
) -> None:
    """Reinstall the named hosts (root disk only: data disks and ZFS pools are kept)."""
    s = load_site(site_name(site))
    if not hosts and not failed:
        raise InputError(
            "name the hosts to re-image, or pass --failed",
            hint="re-imaging wipes the root disk: provision never picks hosts by itself",
        )
    targets = reimage_targets(s, hosts, failed=failed)
    for name, remedy in targets.refused.items():
        err_console.print(
            f"not re-imaging {name}: its health remedy is {remedy.value} "
            f"(see `provision ticket {name}`)"
        )
    selected = targets.hosts
    if not selected:
        console.print("no host to re-image")
        return
    if not dry_run:
        # on stderr, so that --json keeps stdout machine-readable
        err_console.print(
            f"These {len(selected)} host(s) will have their root disk WIPED and reinstalled:"
        )
        for h in selected:
            err_console.print(f"  {h.name}  (rack {h.rack} U{h.u}, BMC {h.bmc.address})")
    if not yes and not dry_run:
        # without a terminal (CI, cron) an unanswered prompt reads EOF and aborts: nothing is wiped
        typer.confirm("Proceed?", abort=True)
    options = RackOptions(
        method=_method(method, s),
        max_parallel=max_parallel,
        configure=not skip_configure,
        wait_ssh=not no_ssh_wait,
        reimage=True,
        force=force,
        playbooks=_playbooks(playbook),
    )
    _run(s, selected, options, f"provision reimage --site {s.name}", as_json, dry_run)


def _playbooks(given: list[str] | None) -> tuple[str, ...]:
    books = tuple(given or ("playbooks/site.yml",))
    root = repo_root()
    for b in books:
        if not (root / b).is_file():
            raise InputError(f"playbook {b!r} not found in {root}", hint="e.g. playbooks/monitoring.yml")
    return books


def _method(value: str | None, site: Site) -> Literal["image", "autoinstall"]:
    m = value or site.settings.deploy_method
    if m not in ("image", "autoinstall"):
        raise InputError(f"unknown deploy method {m!r}", hint="use --method image or autoinstall")
    return "image" if m == "image" else "autoinstall"


def register(app: typer.Typer) -> None:
    """Add the deploy commands."""
    app.command("rack")(rack)
    app.command("reimage")(reimage)
