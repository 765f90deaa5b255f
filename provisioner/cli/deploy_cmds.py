"""`provision rack` and `provision reimage`: the main job."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import IO, TYPE_CHECKING, Literal

import typer
from rich.table import Table
from rich.text import Text

from provisioner import events
from provisioner.cli.common import SiteOption, console, print_json, site_name
from provisioner.cli.errors import err_console, exit_with, handle_errors, plain
from provisioner.events import JsonLinesSink
from provisioner.exceptions import ExitCode, InputError
from provisioner.safetext import terminal
from provisioner.wording import plural

if TYPE_CHECKING:  # annotations only: `--help` must not load these (test_cli_lazy)
    from provisioner.cli.progress_view import LiveView, PlainView
    from provisioner.inventory import Host, Site
    from provisioner.state import Lease
    from provisioner.workflow.rack import HostResult, RackOptions, RackResult, RackRunner


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
                        "result": _outcome(r),  # configured, deployed, failed or skipped
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
    console.print(summary_table(result))
    console.print(summary_line(result))
    if result.configure_log:
        console.print(f"site.yml log: {result.configure_log}")


def _outcome(r: HostResult) -> str:
    """The state a host reached, in the words `provision status` uses."""
    if r.status == "ok":
        return "configured" if r.reason == "configured" else "deployed"
    return r.status


def summary_table(result: RackResult) -> Table:
    """One row per host: the state it reached, why, and how long it took."""
    from provisioner.cli.progress_view import duration

    table = Table(title="summary")
    table.add_column("host", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=1)
    table.add_column("tries", justify="right")
    table.add_column("time", justify="right", no_wrap=True)
    colours = {"configured": "green", "deployed": "green", "failed": "red", "skipped": "dim"}
    for r in result.results:
        outcome = _outcome(r)
        reason = "" if r.reason in ("configured", "deployed") else r.reason
        total = sum(r.phases.values())
        table.add_row(
            r.host,
            f"[{colours.get(outcome, 'cyan')}]{outcome}[/]",
            plain(reason),
            str(r.attempts or ""),
            duration(total) if total else "",
        )
    return table


def summary_line(result: RackResult) -> str:
    """e.g. "done: 2 hosts configured, 1 failed, 1 skipped (wave: ...)"."""
    counts: dict[str, int] = {}
    for r in result.results:
        counts[_outcome(r)] = counts.get(_outcome(r), 0) + 1
    order = ("configured", "deployed", "failed", "skipped")
    parts = [f"{counts[k]} {k}" for k in order if counts.get(k)]
    if parts:
        first, _, word = parts[0].partition(" ")
        parts[0] = f"{plural(int(first), 'host')} {word}"
    verb = "failed" if result.failed else "done"
    return f"{verb}: {', '.join(parts) or 'no hosts'} (wave: {result.wave.summary})"


def _dry_run(site: Site, hosts: list[Host], options: RackOptions, as_json: bool) -> None:
    """Say what a run would do, changing nothing (the backend's own plan when it has one)."""
    from provisioner.workflow.rack_plan import plan_rack

    plan = plan_rack(site, hosts, options, _QuietReporter())
    hp, wave, backend_plan = plan.hosts, plan.wave, plan.backend_plan
    if as_json:
        print_json(
            {
                "deploy": [h.name for h in hp.install],
                "configure": [h.name for h in hp.configure],
                "skip": hp.skipped,
                "needs_consent": hp.consent,
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
    console.print(f"dry run: would {verb} {plural(len(hp.install), 'host')}, {wave.summary}")
    for h in hp.install:
        console.print(f"  {verb}: {h.name}")
    for h in hp.configure:
        console.print(f"  configure only: {h.name} ({plain(hp.resumed[h.name])})")
    for name, why in hp.skipped.items():
        console.print(f"  skip: {name} ({plain(why)})")
    if backend_plan is not None:  # plain text holding what MAAS says: never read as markup
        console.print(Text(terminal(backend_plan.render(), newlines=True)))


def _run(
    site: Site,
    hosts: list[Host],
    options: RackOptions,
    command: str,
    as_json: bool,
    dry_run: bool = False,
    events_to: str | None = None,
    lease: Lease | None = None,
) -> None:
    """Run ``hosts`` through the rack runner; ``lease`` holds them when the caller locked them
    already (reimage asks first), else they are locked here (busy ones are left out)."""
    from provisioner.cli.progress_view import EventReporter
    from provisioner.deploy.base import backend_class
    from provisioner.state import StateStore
    from provisioner.workflow.bmc_access import open_bmc
    from provisioner.workflow.rack import RackRunner

    if dry_run:
        _dry_run(site, hosts, options, as_json)
        return
    backend_cls = backend_class(site.settings.deploy_backend)
    backend = backend_cls()
    store = StateStore.for_site(site)
    with ExitStack() as stack:
        if lease is None:
            lease = stack.enter_context(store.hold(command, [h.name for h in hosts]))
        runner = RackRunner(site, store, backend, open_bmc=open_bmc, reporter=EventReporter(),
                            options=options, lease=lease)  # fmt: skip
        if not options.reinstall and not options.reimage:
            _ask_to_reinstall(runner, hosts)
        view = _view([h.name for h in hosts if h.name not in lease.busy], as_json)
        extra = [JsonLinesSink(_events_stream(events_to, as_json, stack))] if events_to else []
        stack.enter_context(events.sinks(view, *extra))
        with view:
            result = runner.run(hosts)
    _summary(result, as_json)
    if result.failed:
        exit_with(ExitCode.PARTIAL_FAILURE)


def _ask_to_reinstall(runner: RackRunner, hosts: list[Host]) -> None:
    """Hosts that were configured are reinstalled only with consent: asked on a terminal; left
    out (with --reinstall named in their reason) otherwise."""
    consent = runner.plan(hosts).consent
    if not consent or not _can_ask():
        return
    err_console.print(
        f"{plural(len(consent), 'host')} would be reinstalled (root disk wiped) although "
        f"{'it was' if len(consent) == 1 else 'they were'} configured:"
    )
    for name, why in consent.items():
        err_console.print(f"  {name}  ({plain(why)})")
    if _confirm("Reinstall them?"):
        runner.options.reinstall = True
    else:
        err_console.print("left as they are; the other hosts go on")


def _events_stream(target: str, as_json: bool, stack: ExitStack) -> IO[str]:
    """Where `--events` goes: a file (appended), or stdout for '-'."""
    if target == "-":
        if as_json:
            raise InputError(
                "--events - and --json would both write to stdout",
                hint="give --events a file name, e.g. --events run.jsonl",
            )
        return sys.stdout
    try:
        return stack.enter_context(open(target, "a", encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot write events to {target}: {exc.strerror}") from exc


def _view(hosts: list[str], as_json: bool) -> LiveView | PlainView:
    """The live view on a terminal; plain lines otherwise (on stderr with --json)."""
    from provisioner.cli.progress_view import LiveView, PlainView

    if as_json:
        return PlainView(err_console)
    if console.is_terminal:
        return LiveView(hosts, console)
    return PlainView(console)


class _QuietReporter:
    def phase(self, host: str, phase: str, message: str) -> None:
        print(terminal(f"{host}: {phase}: {message}"), file=sys.stderr)

    def finished(self, result: HostResult) -> None:
        pass


PlaybookOption = typer.Option(
    None,
    "--playbook",
    "-p",
    help="Playbook to run after the install instead of playbooks/site.yml (repeatable, in order), "
    "e.g. one stage: playbooks/monitoring.yml.",
)


EventsOption = typer.Option(
    None,
    "--events",
    metavar="FILE|-",
    help="Also write progress as JSON lines (one event per line) to FILE, or stdout for '-'.",
)
MaxParallelOption = typer.Option(
    None,
    "--max-parallel",
    "-k",
    min=1,
    metavar="N",
    help="Hosts installing at once (default: sized to the uplink and image streams).",
)


MethodOption = typer.Option(
    None, "--method", "-m", metavar="image|autoinstall", help="image (write a disk image) or autoinstall (Ubuntu installer)."
)


@handle_errors
def rack(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: every host)."),
    site: str | None = SiteOption,
    rack_name: str | None = typer.Option(None, "--rack", help="Only this rack."),
    max_parallel: int | None = MaxParallelOption,
    method: str | None = MethodOption,
    skip_configure: bool = typer.Option(False, "--skip-configure", help="Do not run site.yml."),
    playbook: list[str] = PlaybookOption,
    no_ssh_wait: bool = typer.Option(
        False, "--no-ssh-wait", help="Do not wait for SSH after the install (e.g. no route to hosts)."
    ),
    force: bool = typer.Option(False, "--force", help="Also deploy hosts in maintenance."),
    reinstall: bool = typer.Option(
        False, "--reinstall",
        help="Also reinstall hosts that were configured before they failed (asked on a terminal)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing."),
    events_to: str | None = EventsOption,
) -> None:
    """Install every (or the named) host of a rack: discover, PXE, install, boot, SSH, site.yml.

    Each host continues from the step it finished: configured hosts are skipped, installed ones
    only configured. Exit code 3 if any host failed.
    """
    from provisioner.inventory import load_site
    from provisioner.workflow.rack import RackOptions

    s = load_site(site_name(site))
    selected = s.select(hosts or None, rack_name)
    options = RackOptions(
        method=_method(method, s),
        max_parallel=max_parallel,
        configure=not skip_configure,
        wait_ssh=not no_ssh_wait,
        force=force,
        reinstall=reinstall,
        playbooks=_playbooks(playbook),
    )
    _run(s, selected, options, f"provision rack --site {s.name}", as_json, dry_run, events_to)


@handle_errors
def reimage(
    hosts: list[str] = typer.Argument(None, help="Host names or globs to wipe and reinstall."),
    site: str | None = SiteOption,
    failed: bool = typer.Option(False, "--failed", help="Target every host in the failed state."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    max_parallel: int | None = MaxParallelOption,
    method: str | None = MethodOption,
    skip_configure: bool = typer.Option(False, "--skip-configure", help="Do not run site.yml."),
    playbook: list[str] = PlaybookOption,
    no_ssh_wait: bool = typer.Option(False, "--no-ssh-wait", help="Do not wait for SSH."),
    force: bool = typer.Option(False, "--force", help="Also hosts in maintenance."),
    restart: bool = typer.Option(
        False, "--restart",
        help="Install again also hosts whose interrupted re-image got past the install "
        "(by default they only get site.yml)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing."),
    events_to: str | None = EventsOption,
) -> None:
    """Reinstall the named hosts (root disk only: data disks and ZFS pools are kept)."""
    from provisioner.deploy.base import backend_class
    from provisioner.inventory import load_site
    from provisioner.state import StateStore
    from provisioner.workflow.rack import RackOptions, RackRunner
    from provisioner.workflow.reimage import reimage_targets

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
    options = RackOptions(
        method=_method(method, s),
        max_parallel=max_parallel,
        configure=not skip_configure,
        wait_ssh=not no_ssh_wait,
        reimage=True,
        restart=restart,
        force=force,
        playbooks=_playbooks(playbook),
    )
    command = f"provision reimage --site {s.name}"
    if dry_run:
        _run(s, selected, options, command, as_json, dry_run=True)
        return
    store = StateStore.for_site(s)
    # the hosts' locks first: a host in use is refused before anything is announced or asked
    with store.hold(command, [h.name for h in selected]) as lease:
        for name, holder in lease.busy.items():
            err_console.print(f"not re-imaging {name}: in use by {plain(holder)}")
        runner = RackRunner(s, store, backend_class(s.settings.deploy_backend)(), open_bmc=None,
                            reporter=_QuietReporter(), options=options, lease=lease)  # fmt: skip
        plan = runner.plan(selected)
        wipe = [h for h in selected if h in plan.install]
        if wipe and not yes and not _can_ask():
            # without a terminal (CI, cron) nobody can answer: say how to confirm, wipe nothing
            raise InputError(
                f"re-imaging {plural(len(wipe), 'host')} wipes their root disks and needs "
                "confirmation, but there is no terminal to ask on; nothing was done",
                hint="pass --yes (-y) to confirm without a prompt",
            )
        # on stderr, so that --json keeps stdout machine-readable
        if wipe:
            err_console.print(
                f"{plural(len(wipe), 'host')} will have the root disk wiped and reinstalled "
                "(data disks are kept):"
            )
        for h in wipe:
            err_console.print(f"  {h.name}  (rack {h.rack} U{h.u}, BMC {h.bmc.address})")
        for h in plan.configure:
            err_console.print(f"  {h.name}: {plain(plan.resumed[h.name])} (--restart installs it again)")
        if wipe and not yes and not _confirm("Proceed?"):
            err_console.print("nothing done: no host was touched")
            return
        _run(s, selected, options, command, as_json, events_to=events_to, lease=lease)


@handle_errors
def configure(
    hosts: list[str] = typer.Argument(None, help="Host names or globs (default: every host)."),
    site: str | None = SiteOption,
    rack_name: str | None = typer.Option(None, "--rack", help="Only this rack."),
    playbook: list[str] = PlaybookOption,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be done; change nothing."),
    events_to: str | None = EventsOption,
) -> None:
    """Run site.yml on installed hosts that have not had it (a run cut short): keys, then site.yml."""
    from provisioner.inventory import load_site
    from provisioner.workflow.rack import RackOptions

    s = load_site(site_name(site))
    selected = s.select(hosts or None, rack_name)
    options = RackOptions(configure_only=True, playbooks=_playbooks(playbook))
    _run(s, selected, options, f"provision configure --site {s.name}", as_json, dry_run, events_to)


def _can_ask() -> bool:
    """Whether a person can answer a prompt (stdin is a terminal)."""
    return sys.stdin.isatty()


def _confirm(question: str) -> bool:
    """Ask on the terminal; no, end of input and Ctrl-C at the prompt (click aborts) mean no."""
    try:
        return bool(typer.confirm(question, default=False))
    except (typer.Abort, EOFError):
        return False


def _playbooks(given: list[str] | None) -> tuple[str, ...]:
    from provisioner.workflow.configure import repo_root

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
    app.command("configure")(configure)
