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
mods = sorted(sys.modules)
sys.stderr.write("\\nMODULES " + json.dumps(mods) + "\\n")
"""


def imported_by(*argv: str) -> set[str]:
    """The provisioner and cabling modules a fresh interpreter holds after ``provision argv``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    res = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=120)
    line = next(x for x in res.stderr.splitlines() if x.startswith("MODULES "))
    assert res.stdout, res.stderr  # the command really printed its help
    return {m for m in json.loads(line.removeprefix("MODULES "))
            if m.split(".")[0] in ("provisioner", "cabling")}


# What `--help` of a verb must not load (#28 item 7, #33 start-up): the use cases, the HTTP
# stack, pydantic (typer itself would, for an unparsed help flag: help_style.install), the
# site loader. One verb per command module, and each sub-app through one of its commands.
NOT_FOR_HELP = ("provisioner.workflow", "provisioner.inventory", "provisioner.deploy",
                "requests", "urllib3", "redfish", "pydantic")
VERBS = [["status"], ["history"], ["maintenance"], ["state", "prune"], ["discover"], ["power"],
         ["boot"], ["rack"], ["reimage"], ["configure"], ["health"], ["hosts"], ["ticket"],
         ["bisect"], ["firmware", "check"], ["firmware", "update"], ["bios", "apply"],
         ["inventory", "check"], ["ironic", "enroll"], ["lab", "up"], ["cabling", "validate"]]


def loaded_by(*argv: str) -> set[str]:
    """Every module (any package) a fresh interpreter holds after ``provision argv``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    res = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=120)
    line = next(x for x in res.stderr.splitlines() if x.startswith("MODULES "))
    assert "Usage:" in res.stdout, res.stderr
    return set(json.loads(line.removeprefix("MODULES ")))


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_help_of_a_verb_loads_no_use_case_http_stack_pydantic_or_site_loader(
        verb: list[str]) -> None:
    heavy = {m for m in loaded_by(*verb, "--help") if m.startswith(NOT_FOR_HELP)}
    assert not heavy, sorted(heavy)[:10]


def test_every_command_module_is_covered_by_a_help_verb() -> None:
    assert {lazy.module for lazy in COMMANDS.values()} <= {
        COMMANDS[verb[0]].module for verb in VERBS}


def test_root_help_loads_only_the_shell() -> None:
    assert imported_by("--help") == SHELL


def test_cabling_loads_cabling_and_no_provisioner_module_but_the_shell() -> None:
    mods = imported_by("cabling", "--help")
    assert "cabling.cli" in mods
    assert {m for m in mods if m.startswith("provisioner")} == SHELL


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
