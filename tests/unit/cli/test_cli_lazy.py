"""The lazy CLI shell: what a command imports, and that its listing says what the commands say.

Start-up time itself is measured by benchmarks/startup.py; here only the import sets, which is
what makes it fast, are asserted (in a fresh interpreter, as a user runs the command).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.cli.main import COMMANDS, load_commands

REPO = Path(__file__).resolve().parents[3]
# help_style: --help shows metavars (SITE, N) for whichever command is loaded.
SHELL = {"provisioner", "provisioner.cli", "provisioner.cli.main", "provisioner.cli.help_style"}

PROBE = """
import json, os, sys
def _exit(code):  # a cabling command ends the process itself: come back to report instead
    raise SystemExit(code)
os._exit = _exit
from provisioner.cli.main import main
sys.argv = ["provision", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
mods = sorted(m for m in sys.modules
              if m.split(".")[0] in ("provisioner", "cabling", "requests"))
sys.stderr.write("\\nMODULES " + json.dumps(mods) + "\\n")
"""


def imported_by(*argv: str) -> set[str]:
    """The provisioner and cabling modules a fresh interpreter holds after ``provision argv``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    res = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=120)
    line = next(x for x in res.stderr.splitlines() if x.startswith("MODULES "))
    assert res.stdout, res.stderr  # the command really printed its help
    return set(json.loads(line.removeprefix("MODULES ")))


def test_root_help_loads_only_the_shell() -> None:
    assert imported_by("--help") == SHELL


def test_cabling_loads_cabling_and_no_provisioner_module_but_the_shell() -> None:
    mods = imported_by("cabling", "--help")
    assert "cabling.cli" in mods
    assert {m for m in mods if m.startswith("provisioner")} == SHELL


# Verbs whose --help loads neither workflow nor requests (issue #28: every verb's, in the end;
# benchmarks/startup.py names what each of the others still loads). pydantic is not asserted:
# typer 0.29 builds a pydantic TypeAdapter for every parameter when it renders help.
LIGHT_HELP = ("status", "history", "maintenance", "state", "inventory", "ironic", "lab")


@pytest.mark.parametrize("verb", LIGHT_HELP)
def test_help_loads_no_workflow_or_requests(verb: str) -> None:
    heavy = {m for m in imported_by(verb, "--help")
             if m.startswith(("provisioner.workflow", "requests"))}
    assert not heavy, f"provision {verb} --help loads {sorted(heavy)[:5]}"


def test_a_command_loads_its_own_module_only() -> None:
    mods = imported_by("status", "--help")
    assert "provisioner.cli.state_cmds" in mods
    others = {lazy.module for lazy in COMMANDS.values()} - {"provisioner.cli.state_cmds"}
    assert not mods & others
    assert not any(m.startswith(("provisioner.deploy", "provisioner.health", "cabling"))
                   for m in mods)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_listed_help_is_the_commands_own(name: str) -> None:
    real = load_commands(name)[name]
    first = inspect.cleandoc(real.help or "").split("\n\n")[0].replace("\n", " ").strip()
    assert COMMANDS[name].help == first


def test_every_registered_command_is_listed() -> None:
    for name in COMMANDS:
        assert set(load_commands(name)) <= set(COMMANDS), name


def test_a_mistyped_command_still_gets_a_suggestion() -> None:
    from typer.testing import CliRunner

    from provisioner.cli.main import app

    res = CliRunner().invoke(app, ["stauts"])
    assert res.exit_code == 2
    assert "Did you mean" in res.output and "'status'" in res.output


def test_provision_cabling_ends_the_process_with_the_commands_exit_code(tmp_path: Path) -> None:
    # `provision cabling` skips the interpreter's teardown (os._exit): output and code must
    # still be the command's own.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-c", "from provisioner.cli.main import main; main()"]
    res = subprocess.run([*run, "cabling", "lint", str(tmp_path / "none.yaml")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and "manifest not found" in res.stderr
    plan = tmp_path / "plan.yaml"
    res = subprocess.run([*run, "cabling", "plan", "--hosts", "2", "-o", str(plan)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and plan.stat().st_size > 0, res.stderr
    res = subprocess.run([*run, "cabling", "lint", str(plan)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0 and "clean" in res.stdout, res.stdout + res.stderr
