"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from provisioner.cli import help_style
from provisioner.cli.consoles import TerminalConsole

if TYPE_CHECKING:
    from provisioner.inventory import Host, Site
    from provisioner.state import StateStore

DEFAULT_SITE = "lab"
help_style.install()

# emoji off: ":ab:" in a MAC address is not an emoji code
console = TerminalConsole(highlight=False, soft_wrap=True, emoji=False)

SiteOption = typer.Option(
    None,
    "--site",
    "-s",
    help="Site name (inventory/<site>/), directory or site file. "
    f"Default: $PROVISIONER_SITE or '{DEFAULT_SITE}' (the virtual lab).",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Print JSON instead of a table.")


def site_name(value: str | None) -> str:
    """The site to use: the option, else $PROVISIONER_SITE, else the lab."""
    return value or os.environ.get("PROVISIONER_SITE") or DEFAULT_SITE


def load_site(name: str, **kwargs: Any) -> Site:
    """The site ``name``, loaded and checked. The inventory (and pydantic with it) is imported
    only here, when a command runs: no command's ``--help`` needs it."""
    from provisioner.inventory import load_site as load

    return load(name, **kwargs)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


@contextmanager
def holding(store: StateStore, command: str, hosts: Sequence[Host]) -> Iterator[list[Host]]:
    """Lock ``hosts`` for a per-host command; yield those held, and say on stderr which hosts
    another run holds (they are left out; SiteLocked, exit 4, when all are)."""
    from provisioner.cli.errors import err_console

    with store.hold(command, [h.name for h in hosts]) as lease:
        for name, holder in lease.busy.items():
            line = Text("skipped", style="yellow")
            line.append(f" {name}: in use by {holder}")
            err_console.print(line)
        yield [h for h in hosts if h.name not in lease.busy]
