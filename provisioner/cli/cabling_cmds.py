"""Mounts the cabling package's commands under ``provision cabling``."""

from __future__ import annotations

import typer

from cabling.cli import cabling_app


def register(app: typer.Typer) -> None:
    """Add ``provision cabling ...`` to the root app."""
    app.add_typer(cabling_app, name="cabling")
