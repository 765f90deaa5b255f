"""BIOS attribute registries typed from real ones (iDRAC9 R750's, with its Dependencies), and
wanted values typed, bounded and ordered by them (pure logic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.bmc.bios_dependencies import plan_stages, read_only
from provisioner.bmc.bios_registry import (
    AttributeDef,
    Condition,
    Dependency,
    Registry,
    parse_registry,
    safe_pattern,
)
from provisioner.bmc.bios_values import type_value

CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus" / "redfish"
DELL = CORPUS / ("dell-idrac9-poweredge-r750-ib-libredfish/mockup/redfish/v1/Systems/"
                 "System.Embedded.1/Bios")


@pytest.fixture(scope="module")
def dell() -> tuple[Registry, dict[str, object]]:
    registry = parse_registry(json.loads((DELL / "BiosRegistry" / "index.json").read_text()))
    assert registry is not None
    attributes = json.loads((DELL / "index.json").read_text())["Attributes"]
    return registry, attributes


def test_the_recorded_registry_keeps_types_bounds_and_dependencies(dell) -> None:
    registry, _ = dell
    delay = registry.get("AcPwrRcvryUserDelay")
    assert delay == AttributeDef("AcPwrRcvryUserDelay", "Integer", lower=120, upper=600)
    tag = registry.get("AssetTag")
    assert tag is not None and (tag.max_length, tag.pattern) == (63, "^[ -~]{0,63}$")
    model = registry.get("SystemModelName")
    assert model is not None and model.immutable and model.read_only
    assert len(registry.dependencies) == 588
    rule = registry.rules_for("ProcCStates", "ReadOnly")[0]
    assert rule.describe() == "SysProfile != Custom" and rule.value is True


@pytest.mark.parametrize(("value", "written", "problem"), [
    ("abc", None, "'abc' is not an integer; an integer from 120 to 600"),
    (30, None, "30 is out of range; an integer from 120 to 600"),
    (601, None, "601 is out of range"),
    (True, "On", "'On' is not an integer"),
])
def test_an_integer_is_refused_outside_the_registry_bounds(dell, value, written,
                                                           problem) -> None:
    # Finding 4: "abc" and 30 were "drift", and "abc" would have been sent as a string.
    registry, _ = dell
    typed = type_value(value, written, registry.get("AcPwrRcvryUserDelay"))
    assert not typed.ok and problem in str(typed.problem)


def test_integers_within_bounds_and_steps_are_sent_as_integers(dell) -> None:
    registry, _ = dell
    assert type_value(300, None, registry.get("AcPwrRcvryUserDelay")).value == 300
    assert type_value("300", None, registry.get("AcPwrRcvryUserDelay")).value == 300
    stepped = AttributeDef("Fan", "Integer", lower=10, upper=100, increment=5)
    assert type_value(25, None, stepped).ok
    assert "not a step" in str(type_value(27, None, stepped).problem)
    assert "in steps of 5" in str(type_value(27, None, stepped).problem)


def test_strings_are_bounded_by_length_and_pattern(dell) -> None:
    registry, _ = dell
    tag = registry.get("AssetTag")
    assert type_value("rack-7", None, tag).value == "rack-7"
    assert "64 characters" in str(type_value("x" * 64, None, tag).problem)
    assert "does not match" in str(type_value("caf\u00e9", None, tag).problem)
    # A YAML number where the attribute is text is the text as written.
    assert type_value(1e3 if False else 1000, "0x3E8", tag).value == "0x3E8"


def test_enumerations_are_case_sensitive_and_suggest_the_spelling(dell) -> None:
    registry, _ = dell
    typed = type_value("enabled", None, registry.get("SriovGlobalEnable"))
    assert "did you mean 'Enabled'" in str(typed.problem)
    assert "allowed: Enabled, Disabled" in str(typed.problem)


def test_without_a_registry_the_current_value_decides_the_type() -> None:
    assert type_value(True, "On", None, current="On").value == "On"
    assert type_value(True, "On", None, current=False).value is True
    assert type_value("true", None, None, current=False).value is True
    assert type_value("120", None, None, current=60).value == 120
    assert not type_value("fast", None, None, current=60).ok
    assert not type_value("Enabled", None, None, current=True).ok


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)*b", "([a-z]{1,3})*x", "(?:\\w+\\s?)+$"])
def test_a_bmc_pattern_that_could_take_exponential_time_is_not_run(pattern) -> None:
    assert safe_pattern(pattern) is None
    typed = type_value("a" * 40 + "!", None, AttributeDef("X", "String", pattern=pattern))
    assert typed.ok and "not checked" in str(typed.note)


def test_dependencies_unlock_c_states_once_the_profile_is_custom(dell) -> None:
    # Finding 6: ProcCStates is read-only while SysProfile != Custom; a baseline that sets
    # SysProfile to Custom applies it first and ProcCStates in a second stage.
    registry, current = dell
    assert read_only("ProcCStates", current, registry) == (
        True, "read-only while SysProfile != Custom")
    wanted = {"SysProfile": "Custom", "ProcCStates": "Enabled", "ProcTurboMode": "Disabled"}
    plan = plan_stages(wanted, current, wanted, registry)
    assert plan.stages == [{"SysProfile": "Custom"},
                           {"ProcCStates": "Enabled", "ProcTurboMode": "Disabled"}]
    assert plan.unlocked_by == {"ProcCStates": ["SysProfile"], "ProcTurboMode": ["SysProfile"]}
    assert plan.refused == {}


def test_a_value_the_profile_sets_itself_is_implied_or_in_conflict(dell) -> None:
    registry, current = dell
    current = {**current, "SysProfile": "Custom", "ProcCStates": "Enabled"}
    wanted = {"SysProfile": "PerfOptimized", "ProcCStates": "Disabled"}
    plan = plan_stages(wanted, current, wanted, registry)
    assert plan.stages == [{"SysProfile": "PerfOptimized"}]
    assert plan.implied == {"ProcCStates": "set by SysProfile = PerfOptimized"}
    clash = {"SysProfile": "PerfOptimized", "ProcCStates": "Enabled"}
    plan = plan_stages(clash, current, clash, registry)
    assert plan.conflicts == {"ProcCStates": "SysProfile = PerfOptimized sets it to Disabled"}


def test_read_only_without_a_baseline_entry_to_unlock_it_stays_refused(dell) -> None:
    registry, current = dell
    os_profile = {**current, "SysProfile": "PerfPerWattOptimizedOs"}
    plan = plan_stages({"ProcC1E": "Disabled"}, os_profile, {"ProcC1E": "Disabled"}, registry)
    assert plan.stages == [] and plan.conflicts == {
        "ProcC1E": "SysProfile = PerfPerWattOptimizedOs sets it to Enabled"}
    plan = plan_stages({"SystemModelName": "x"}, current, {"SystemModelName": "x"}, registry)
    assert plan.locked == {"SystemModelName": "the firmware marks it immutable"}
    lock = Dependency("Knob", "ReadOnly", True, (Condition("Mode", "CurrentValue", "NEQ", "Open"),))
    small = Registry({"Knob": AttributeDef("Knob", "String", read_only=True),
                      "Mode": AttributeDef("Mode", "Enumeration", values=("Open", "Shut"))},
                     (lock,))
    plan = plan_stages({"Knob": "x"}, {"Mode": "Shut"}, {"Knob": "x"}, small)
    assert plan.locked == {"Knob": "read-only while Mode != Open"}


def test_map_terms_and_unknown_properties_are_conservative() -> None:
    both = Dependency("B", "ReadOnly", True, (
        Condition("A", "CurrentValue", "EQU", "x"),
        Condition("C", "CurrentValue", "GTR", 5, "AND")))
    assert both.fires({"A": "x", "C": 6}) is True
    assert both.fires({"A": "x", "C": 5}) is False
    odd = Dependency("B", "ReadOnly", True, (Condition("A", "GrayOut", "EQU", True),))
    registry = Registry({"B": AttributeDef("B", "String")}, (odd,))
    assert read_only("B", {}, registry)[0]  # cannot be told: counted as holding
