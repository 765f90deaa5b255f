"""`--help` reads well: every option says what it does, values show metavars, not `<str>`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from typer.main import get_command
from typer.testing import CliRunner

from provisioner.cli.main import COMMANDS as LAZY
from provisioner.cli.main import app, load_commands

runner = CliRunner()


def _commands(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _commands(sub, [*path, name])
    else:
        yield path, cmd


def _loaded() -> Any:
    """The whole command tree: the CLI loads a command's module only when it runs."""
    group = get_command(app)
    for name in LAZY:
        group.commands.update(load_commands(name))  # type: ignore[attr-defined]
    return group


COMMANDS = list(_commands(_loaded(), []))


def test_every_option_has_a_description() -> None:
    missing = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, cmd in COMMANDS
        for param in cmd.params
        if getattr(param, "param_type_name", "") == "option" and not param.help
    ]
    assert missing == []


def test_help_shows_metavars_not_python_types() -> None:
    assert len(COMMANDS) > 20
    for path in [[], ["lab"], ["cabling"], *(p for p, _ in COMMANDS)]:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        assert res.exit_code == 0, (path, res.output)
        assert not re.search(r"<(bool|str|int|float|list\[\w+\]|path)>", res.output), (path, res.output)
    out = runner.invoke(app, ["rack", "--help"], env={"COLUMNS": "100"}).output
    assert re.search(r"--max-parallel\s+-k\s+N\b.*Hosts installing at once", out)
    assert re.search(r"--skip-configure\s+Do not run site.yml", out)  # a flag: no type word
    assert re.search(r"--events\s+FILE\|-", out) and "SITE" in out
