"""Entry point of the ``provision`` command: a thin shell whose commands load when invoked.

Each area keeps its commands in its own module (``register(app)``, or a Typer app to mount);
this shell lists them with their one-line help and imports a module only when one of its
commands runs, so `provision --help` stays fast and `provision cabling ...` loads cabling
alone. tests/unit/cli/test_cli_lazy.py checks the import set and that the help lines below
match the commands' own.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

from provisioner import __version__
from provisioner.cli import help_style

help_style.install()  # --help shows metavars (SITE, N), not <bool>/<str>, whatever is loaded

if TYPE_CHECKING:  # only for annotations: the click typer bundles (or depends on)
    from typer import _click as click


class Lazy:
    """Where a command lives: ``module:register`` (a register(app) function) or
    ``module:attr`` (a Typer app mounted under the command's name), and its one-line help."""

    def __init__(self, target: str, help: str) -> None:
        self.module, self.attr = target.split(":")
        self.help = help


# In the order `provision --help` lists them.
COMMANDS: dict[str, Lazy] = {
    "status": Lazy("provisioner.cli.state_cmds:register",
                   "Show each host's state, its reason and last error."),
    "history": Lazy("provisioner.cli.state_cmds:register",
                    "Show a host's event log (state changes, facts, deploy and health events), "
                    "oldest first; --since and --kind narrow it, --limit keeps the last N of "
                    "what is left."),
    "maintenance": Lazy("provisioner.cli.state_cmds:register",
                        "Put hosts into maintenance (nothing touches them without --force), "
                        "or take them out."),
    "state": Lazy("provisioner.cli.state_cmds:state_app",
                  "The site's state file: check it, back it up, restore a backup, prune old "
                  "history."),
    "discover": Lazy("provisioner.cli.bmc_cmds:register",
                     "Read every BMC at once: serials, NICs and the provisioning MAC, disks, "
                     "clocks, firmware."),
    "power": Lazy("provisioner.cli.bmc_cmds:register",
                  "Power hosts on/off/cycle through their BMCs, or show their power state "
                  "(status reads every host when none is named)."),
    "boot": Lazy("provisioner.cli.bmc_cmds:register",
                 "Set (and verify) the boot device of the next boot, or of every boot with "
                 "--persistent."),
    "rack": Lazy("provisioner.cli.deploy_cmds:register",
                 "Install every (or the named) host of a rack: discover, PXE, install, boot, "
                 "SSH, site.yml."),
    "reimage": Lazy("provisioner.cli.deploy_cmds:register",
                    "Reinstall the named hosts (root disk only: data disks and ZFS pools are "
                    "kept)."),
    "configure": Lazy("provisioner.cli.deploy_cmds:register",
                      "Run site.yml on installed hosts that have not had it (a run cut short): "
                      "keys, then site.yml."),
    "health": Lazy("provisioner.cli.health_cmds:register",
                   "Check hosts over SSH, record the results, and say which need attention "
                   "(exit 3 if any)."),
    "hosts": Lazy("provisioner.cli.health_cmds:register",
                  "List hosts with their state and last health verdict (--golden: only the fit "
                  "ones)."),
    "ticket": Lazy("provisioner.cli.health_cmds:register",
                   "A repair work order for a failed host: host, serials, slot/component, "
                   "evidence."),
    "bisect": Lazy("provisioner.cli.health_cmds:register",
                   "Name the bad host(s) in a set that fails together, in two rounds of group "
                   "runs."),
    "firmware": Lazy("provisioner.cli.baseline_cmds:firmware_app",
                     "Firmware baselines: what each host must run, and who drifts."),
    "bios": Lazy("provisioner.cli.baseline_cmds:bios_app",
                 "BIOS baselines: the attributes each host must have, and who drifts."),
    "inventory": Lazy("provisioner.cli.inventory_cmds:register",
                      "Check and show the rack inventory (inventory/<site>/site.yml)."),
    "ironic": Lazy("provisioner.cli.ironic_cmds:ironic_app",
                   "A site's hosts in OpenStack Ironic: enrol them, list their nodes, undeploy "
                   "them."),
    "lab": Lazy("provisioner.cli.lab_cmds:register",
                "The virtual lab: qemu VMs with Redfish BMCs in a private network namespace "
                "(needs root). Its site is `lab`: `provision ... --site lab`."),
    # cabling/ never imports provisioner; mounting its app here keeps `provision cabling`
    # free of every provisioner module but this shell.
    "cabling": Lazy("cabling.cli:cabling_app",
                    "Wiring manifests for InfiniBand/RoCE fabrics: generate a plan, lint it in "
                    "CI, validate the built fabric against it."),
}


def load_commands(name: str) -> dict[str, click.Command]:
    """Import the module of command ``name``; return every click command it defines, by name."""
    lazy = COMMANDS[name]
    found: Any = getattr(importlib.import_module(lazy.module), lazy.attr)
    app = typer.Typer()
    if isinstance(found, typer.Typer):
        app.add_typer(found, name=name)
    else:
        found(app)
    return dict(typer.main.get_group(app).commands)


class Listed(TyperCommand):
    """A command not loaded yet: its name and help line, for listings and suggestions."""


class LazyGroup(TyperGroup):
    """Lists COMMANDS from their help lines; imports a command's module only to run it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, lazy in COMMANDS.items():
            self.commands.setdefault(name, Listed(name, help=lazy.help))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and isinstance(self.commands.get(args[0]), Listed):
            self.commands.update(load_commands(args[0]))
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="provision",
    cls=LazyGroup,
    help=(
        "Turn racks of bare-metal GPU servers into a training-ready cluster.\n\n"
        "Exit codes: 0 ok, 1 unexpected error, 2 bad input, 3 partial failure "
        "(some hosts/links failed), 4 site locked by another run, 5 prerequisite missing."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _debug(value: bool) -> None:
    # Imported only when asked for (`provision --help` loads nothing but this shell), or to
    # undo an earlier command's --debug in the same process.
    if value or "provisioner.cli.debug_logging" in sys.modules:
        from provisioner.cli.debug_logging import enable_debug

        enable_debug(value)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"provision {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", "-v", callback=_debug,
        help="Log each BMC request (method, URL, status, time; secrets redacted) to stderr.",
    ),
) -> None:
    """Turn racks of bare-metal GPU servers into a training-ready cluster."""


def main() -> None:
    """Run the CLI."""
    if not sys.stdout.isatty():
        _plain_help()
    if _first_command(sys.argv[1:]) == "cabling":
        _run_and_exit()
    app()


def _plain_help() -> None:
    """Help and usage errors as plain text when they go to a pipe or a file, not a terminal:
    typer's rich help loads rich's markdown and syntax stack (~70 ms of a `--help`'s ~180 ms)
    for boxes nobody sees there (#33 start-up; benchmarks/startup.py times the piped help)."""
    import typer.core

    typer.core.HAS_RICH = False


def _first_command(args: list[str]) -> str | None:
    return next((a for a in args if not a.startswith("-")), None)


def _run_and_exit() -> None:
    """Run a cabling command and end the process as `python -m cabling` does."""
    import gc

    gc.disable()  # before cabling's imports too (see cabling.cli.run_and_exit)
    from cabling.cli import run_and_exit

    run_and_exit(app)


if __name__ == "__main__":
    main()
