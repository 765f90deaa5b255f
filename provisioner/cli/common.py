"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import typer
from rich.console import Console

DEFAULT_SITE = "lab"

console = Console(highlight=False, soft_wrap=True, emoji=False)  # `host:100:` is not an emoji

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


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")
