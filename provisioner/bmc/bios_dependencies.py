"""The order BIOS changes must be applied in, from the registry's ``Dependencies``: an
attribute read-only while another has some value (iDRAC's C-state settings while
``SysProfile`` is not ``Custom``) becomes writable once the baseline's entry for that other
attribute is applied, so it goes in a later stage (each stage is one host reset). Values a
dependency sets by itself need no write; one it sets to something else is a conflict. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.bmc.bios_registry import Dependency, Registry
from provisioner.bmc.bios_values import same_value, text_value


@dataclass
class StagePlan:
    """How a host's BIOS changes go: stages applied in order (one reset each), and the
    entries that cannot be applied, with why."""

    stages: list[dict[str, Any]] = field(default_factory=list)
    unlocked_by: dict[str, list[str]] = field(default_factory=dict)  # name: entries before it
    locked: dict[str, str] = field(default_factory=dict)  # name: why it stays read-only
    implied: dict[str, str] = field(default_factory=dict)  # name: the entry that sets it
    conflicts: dict[str, str] = field(default_factory=dict)  # name: what sets it otherwise

    @property
    def refused(self) -> dict[str, str]:
        """Entries that cannot reach their value, with the reason."""
        return {**self.locked, **self.conflicts}


def read_only(name: str, values: Mapping[str, Any], registry: Registry | None
              ) -> tuple[bool, str]:
    """Whether attribute ``name`` is read-only when the BIOS holds ``values``, and why.

    Dependencies that map the attribute's ReadOnly decide where there are any (one whose
    condition cannot be evaluated counts as holding); otherwise the registry entry does."""
    info = registry.get(name) if registry else None
    if info is not None and info.immutable:
        return True, "the firmware marks it immutable"
    rules = registry.rules_for(name, "ReadOnly") if registry else []
    if rules:
        locking = [r for r in rules if r.value is True and r.fires(values) is not False]
        if locking:
            return True, f"read-only while {locking[0].describe(values)}"
        return False, ""
    if info is not None and info.read_only:
        return True, "the firmware marks it read-only"
    return False, ""


def _implied(name: str, values: Mapping[str, Any], registry: Registry | None
             ) -> tuple[Any, Dependency] | None:
    for rule in registry.rules_for(name, "CurrentValue") if registry else []:
        if rule.fires(values):
            return rule.value, rule
    return None


def plan_stages(changes: Mapping[str, Any], current: Mapping[str, Any],
                wanted: Mapping[str, Any], registry: Registry | None) -> StagePlan:
    """Stages for ``changes`` (the entries that differ, typed) given the ``current`` values
    and every ``wanted`` value of the baseline (what the BIOS will hold in the end)."""
    plan = StagePlan()
    final = {**current, **wanted}
    remaining: dict[str, Any] = {}
    for name, value in changes.items():
        forced = _implied(name, final, registry)
        if forced is None:
            remaining[name] = value
        elif same_value(value, forced[0]):
            plan.implied[name] = f"set by {forced[1].describe(final)}"
        else:
            plan.conflicts[name] = (f"{forced[1].describe(final)} sets it to "
                                    f"{text_value(forced[0])}")
    values = dict(current)
    while remaining:
        now = {n: v for n, v in remaining.items() if not read_only(n, values, registry)[0]}
        if not now:
            break
        if plan.stages:
            for name in now:
                plan.unlocked_by[name] = _unlockers(name, current, values, plan, registry)
        plan.stages.append(now)
        values.update(now)
        for name in now:
            del remaining[name]
    for name in remaining:
        plan.locked[name] = read_only(name, values, registry)[1]
    return plan


def _unlockers(name: str, current: Mapping[str, Any], values: Mapping[str, Any],
               plan: StagePlan, registry: Registry | None) -> list[str]:
    """The entries of earlier stages that lifted the ReadOnly rules holding at the start."""
    staged = {n for stage in plan.stages for n in stage}
    out: list[str] = []
    for rule in registry.rules_for(name, "ReadOnly") if registry else []:
        if rule.value is True and rule.fires(current) and not rule.fires(values):
            for cond in rule.when:
                if cond.attribute in staged and cond.attribute not in out:
                    out.append(cond.attribute)
    return out
