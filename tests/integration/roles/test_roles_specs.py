"""Every role's meta/argument_specs.yml documents exactly the variables of its defaults/main.yml,
with the same default values, and every variable carries the role's name as prefix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLES = sorted(p.parents[1] for p in (REPO / "roles").glob("*/defaults/main.yml"))


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) or {}


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def spec_mismatches(role: Path) -> list[str]:
    """Differences between a role's defaults and its argument spec, one line each."""
    defaults: dict[str, Any] = _load(role / "defaults" / "main.yml")
    spec_file = role / "meta" / "argument_specs.yml"
    if not spec_file.is_file():
        return [f"{spec_file} is missing"]
    options: dict[str, Any] = _load(spec_file)["argument_specs"]["main"].get("options") or {}
    problems = [f"{k}: in defaults/main.yml but not in meta/argument_specs.yml"
                for k in sorted(set(defaults) - set(options))]
    problems += [f"{k}: in meta/argument_specs.yml but not in defaults/main.yml"
                 for k in sorted(set(options) - set(defaults))]
    for name in sorted(set(defaults) & set(options)):
        opt, value = options[name], defaults[name]
        if not opt.get("description"):
            problems.append(f"{name}: no description")
        if "type" not in opt:
            problems.append(f"{name}: no type")
        if _templated(value):
            if "default" in opt:
                problems.append(f"{name}: templated in defaults, so the spec must not repeat it")
        elif opt.get("default") != value:
            problems.append(f"{name}: default {opt.get('default')!r} in the spec, "
                            f"{value!r} in defaults/main.yml")
    prefix = role.name + "_"
    problems += [f"{k}: variable does not start with {prefix}" for k in defaults
                 if not k.startswith(prefix)]
    return problems


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_specs_match_defaults(role: Path) -> None:
    assert spec_mismatches(role) == []


def test_all_roles_of_the_stack_are_present() -> None:
    names = {r.name for r in ROLES}
    mine = {"common", "docker", "node_exporter", "dcgm", "nvidia_driver"}
    assert mine <= names


def test_a_drifted_spec_is_reported(tmp_path: Path) -> None:
    role = tmp_path / "demo"
    (role / "defaults").mkdir(parents=True)
    (role / "meta").mkdir()
    (role / "defaults" / "main.yml").write_text(
        "demo_a: 1\ndemo_b: '{{ x }}'\nother: 2\ndemo_c: x\n")
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"main": {
        "options": {
            "demo_a": {"type": "int", "default": 2, "description": "a"},
            "demo_b": {"type": "str", "default": "y", "description": "b"},
            "demo_c": {"type": "str"},
            "other": {"type": "int", "default": 2, "description": "o"},
            "demo_gone": {"type": "str", "description": "g"},
        }}}}))
    assert spec_mismatches(role) == [
        "demo_gone: in meta/argument_specs.yml but not in defaults/main.yml",
        "demo_a: default 2 in the spec, 1 in defaults/main.yml",
        "demo_b: templated in defaults, so the spec must not repeat it",
        "demo_c: no description",
        "demo_c: default None in the spec, 'x' in defaults/main.yml",
        "other: variable does not start with demo_",
    ]
