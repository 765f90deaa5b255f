"""How options read in `--help`: flags show no type, values a metavar (SITE, N, PATH)
instead of typer's `<bool>`, `<str>`, `<list[str]>`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

from typer._click.core import Command
from typer.core import TyperArgument, TyperOption

_get_help_option = Command.get_help_option


def _word(annotation: Any, name: str) -> str:
    if get_origin(annotation) is list and get_args(annotation):
        return _word(get_args(annotation)[0], name)
    if isinstance(annotation, type):
        if issubclass(annotation, Enum):
            return "|".join(str(m.value) for m in annotation)
        if issubclass(annotation, bool):
            return "yes|no"
        if issubclass(annotation, int | float):
            return "N"
        if issubclass(annotation, Path):
            return "PATH"
    return name.upper()


def metavar_of(param: TyperOption) -> str | None:
    """The word `--help` shows after an option: None for flags, else its metavar or a name."""
    if param.is_flag or param.count:
        return None
    if param.metavar:
        return str(param.metavar)
    desc = param.type_descriptor
    if desc.is_choice and desc.choices:
        word = "|".join(str(getattr(c, "value", c)) for c in desc.choices)
    else:
        long = next((o for o in param.opts if o.startswith("--")), param.name or "value")
        word = _word(desc.annotation, long.lstrip("-").replace("-", "_"))
    return word + ("..." if param.multiple or param.nargs != 1 else "")


def _option_type(self: TyperOption, ctx: Any) -> str | None:
    return metavar_of(self)


def _argument_type(self: TyperArgument, ctx: Any) -> str | None:
    return None  # the argument's name is already in the first column


def _help_option(self: Command, ctx: Any) -> TyperOption | None:
    # typer leaves the help flag's default None, and coerces a None it parses through a
    # pydantic TypeAdapter: every command line would load pydantic (~90 ms) for the help flag
    # of the groups above the command. A flag not given is False, which typer passes as is.
    option = _get_help_option(self, ctx)
    if option is not None and option.default is None:
        option.default = False
    return option


def install() -> None:
    """Use these words in every command's help, and keep pydantic out of parsing the help
    flag (idempotent)."""
    setattr(Command, "get_help_option", _help_option)  # noqa: B010 - patching the class
    setattr(TyperOption, "display_type_rich", _option_type)  # noqa: B010 - patching the class
    setattr(TyperArgument, "display_type_rich", _argument_type)  # noqa: B010
