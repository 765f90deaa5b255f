"""The one place where exceptions become messages and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import typer
from rich.markup import escape
from rich.text import Text

from provisioner.cli.consoles import TerminalConsole
from provisioner.exceptions import ExitCode, ProvisionerError
from provisioner.safetext import terminal

P = ParamSpec("P")
R = TypeVar("R")

# Messages carry file names, keys and whatever a BMC or host sent: never read them as Rich markup
# or emoji codes (`[settings.x]` would vanish, `[/]` would crash, `site.yml:100:` would be an emoji).
err_console = TerminalConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def plain(text: object) -> str:
    """``text`` made safe to embed in a Rich markup string: controls, bidi and invisible
    characters written as escapes (provisioner/safetext.py), brackets escaped."""
    return escape(terminal(text))


def print_error(exc: BaseException | str, *, label: str = "error") -> None:
    """Print ``label: message`` on stderr; the message is printed as text, never as markup."""
    line = Text(f"{label}:", style="bold red")
    line.append(" ")
    line.append(terminal(exc, newlines=True))
    err_console.print(line)


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
            print_error(exc)
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    return wrapper


def is_tty() -> bool:
    """Whether stdout is a terminal (progress bars only then)."""
    return sys.stdout.isatty()
