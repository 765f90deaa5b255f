"""Entry point of the ``provision`` command; each area registers its commands from its own module."""

from __future__ import annotations

import importlib

import typer

from provisioner import __version__
from provisioner.cli.debug_logging import enable_debug

app = typer.Typer(
    name="provision",
    help=(
        "Turn racks of bare-metal GPU servers into a training-ready cluster.\n\n"
        "Exit codes: 0 ok, 1 unexpected error, 2 bad input, 3 partial failure "
        "(some hosts/links failed), 4 site locked by another run, 5 prerequisite missing."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module exposes ``register(app)``; keeping commands in per-area modules keeps this file
# free of business logic and lets the areas grow independently.
COMMAND_MODULES = (
    "provisioner.cli.inventory_cmds",
    "provisioner.cli.state_cmds",
    "provisioner.cli.lab_cmds",
    "provisioner.cli.bmc_cmds",
    "provisioner.cli.deploy_cmds",
    "provisioner.cli.health_cmds",
    "provisioner.cli.cabling_cmds",
)


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
        False, "--debug", "-v", callback=enable_debug,
        help="Log each BMC request (method, URL, status, time; secrets redacted) to stderr.",
    ),
) -> None:
    """Turn racks of bare-metal GPU servers into a training-ready cluster."""


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    """Run the CLI."""
    app()


if __name__ == "__main__":
    main()
