"""The one place where exceptions become messages and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console

from provisioner.exceptions import ExitCode, ProvisionerError

P = ParamSpec("P")
R = TypeVar("R")

err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def exit_with(code: ExitCode | int) -> None:
    """Stop the command with a documented exit code."""
    raise typer.Exit(int(code))


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so a ProvisionerError prints its message and exits with its code."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ProvisionerError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    return wrapper


def is_tty() -> bool:
    """Whether stdout is a terminal (progress bars only then)."""
    return sys.stdout.isatty()
