"""One host's BIOS against its baseline: raw attribute entries and vendor-neutral intents
(expanded for the host's vendor), each value typed by the registry, the read-only ones
judged by the registry's Dependencies (writable once another entry is applied, or not), and
pending values that are not the baseline's."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from provisioner.bmc.bios_dependencies import StagePlan, plan_stages, read_only
from provisioner.bmc.bios_intents import IntentError, is_intent, resolve
from provisioner.bmc.bios_state import BiosState
from provisioner.bmc.bios_values import Value, same_value, text_value, type_value
from provisioner.inventory.model import BiosSetting
from provisioner.workflow.baseline_items import Item, Status


@dataclass(frozen=True)
class NotApplied:
    """Values an earlier `bios apply` staged that the BIOS did not take at its reset."""

    values: Mapping[str, str]  # attribute: the value (as printed) that did not apply
    reset_at: str  # when that reset was (UTC, ISO 8601)
    said: str = ""  # what the BMC said of that attempt, if anything


@dataclass(frozen=True)
class Want:
    """One attribute a baseline entry wants on this host."""

    attribute: str
    entry: str  # the baseline key: the attribute itself, or an intent
    setting: BiosSetting
    value: Value
    written: str | None


def suggest(name: str, names: Sequence[str]) -> str:
    """A did-you-mean hint for an attribute name the firmware does not know."""
    # Supermicro suffixes attribute names with a code that changes between BIOS releases
    # (Above4GDecoding_0041): a prefix match is the likeliest intent.
    prefixed = [n for n in names if n.lower().startswith(name.lower() + "_")]
    close = prefixed or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else \
        "the BMC's attribute registry lists the names this firmware accepts"


def _at(setting: BiosSetting, text: str) -> str:
    return f"{setting.where}: {text}" if setting.where else text


def _written(setting: BiosSetting) -> str:
    return setting.written if setting.written is not None else text_value(setting.value)


def expand(baseline: Mapping[str, BiosSetting], vendor: str, state: BiosState
           ) -> tuple[list[Want], list[Item]]:
    """The attributes the baseline wants on this host, and the entries that cannot be
    expanded (an intent this vendor has no mapping for, two entries that want one attribute
    two ways) as items."""
    wants: list[Want] = []
    items: list[Item] = []
    for entry, setting in baseline.items():
        if not is_intent(entry):
            wants.append(Want(entry, entry, setting, setting.value, setting.written))
            continue
        try:
            resolved = resolve(entry, setting.value, vendor, state.attributes, state.registry)
        except IntentError as exc:
            status = Status.UNMAPPED if "no mapping" in str(exc) else Status.UNKNOWN
            items.append(Item("bios", entry, "-", _written(setting), status,
                              _at(setting, str(exc)), entry=entry))
            continue
        wants += [Want(r.attribute, entry, setting, r.value, None) for r in resolved]
    by_attribute: dict[str, list[Want]] = {}
    for want in wants:
        by_attribute.setdefault(want.attribute, []).append(want)
    kept = []
    for attribute, group in by_attribute.items():
        if len({text_value(w.value) for w in group}) == 1:
            kept.append(group[-1])  # one value however many entries ask for it
            continue
        says = ", ".join(f"{w.entry} wants {text_value(w.value)}" for w in group)
        for w in group:
            items.append(Item("bios", attribute, text_value(state.attributes.get(attribute)),
                              text_value(w.value), Status.CONFLICT,
                              _at(w.setting, f"entries disagree: {says}"), entry=w.entry))
    return kept, items


def bios_items(baseline: Mapping[str, BiosSetting], state: BiosState, vendor: str = "generic",
               not_applied: NotApplied | None = None) -> list[Item]:
    """One item per attribute the baseline wants (and per pending value that is not the
    baseline's), judged against the current and pending values and the registry."""
    wants, items = expand(baseline, vendor, state)
    typed: dict[str, Value] = {}
    names = state.names()
    for want in wants:
        have = state.attributes.get(want.attribute)
        if not state.known(want.attribute):
            items.append(Item("bios", want.attribute, "-", _written(want.setting),
                              Status.UNKNOWN, _at(want.setting, suggest(want.attribute, names)),
                              entry=want.entry))
            continue
        info = state.registry.get(want.attribute) if state.registry else None
        result = type_value(want.value, want.written, info, have)
        if not result.ok or result.value is None:
            items.append(Item("bios", want.attribute, text_value(have),
                              want.written or text_value(want.value), Status.INVALID,
                              _at(want.setting, str(result.problem)), entry=want.entry))
            continue
        typed[want.attribute] = result.value
    changes = {n: v for n, v in typed.items() if not same_value(v, state.attributes.get(n))}
    plan = plan_stages(changes, state.attributes, typed, state.registry)
    entries = {w.attribute: w for w in wants}
    for name, value in typed.items():
        items.append(_judge(name, value, entries[name], state, plan, not_applied))
    items += foreign_pending(state, typed)
    return items


def _judge(name: str, value: Value, want: Want, state: BiosState, plan: StagePlan,
           not_applied: NotApplied | None) -> Item:
    have = state.attributes.get(name)

    def item(status: Status, hint: str = "") -> Item:
        return Item("bios", name, text_value(have), text_value(value), status, hint, value,
                    want.entry)

    if same_value(value, have):
        return item(Status.OK)
    if name in plan.conflicts:
        return item(Status.CONFLICT, _at(want.setting, plan.conflicts[name]))
    if name in plan.locked:
        return item(Status.READ_ONLY, f"{plan.locked[name]}: set it in the BIOS setup or with "
                    "the vendor's tool, or add the entry that unlocks it")
    pending = name in state.pending and same_value(value, state.pending[name])
    if not_applied is not None and not_applied.values.get(name) == text_value(value):
        # Staged and reset once already (whether the BMC still holds it pending or dropped
        # it): another reset alone is not expected to help.
        said = f"; {not_applied.said}" if not_applied.said else ""
        return item(Status.NOT_APPLIED, f"not applied after the reset at {not_applied.reset_at}"
                    f"{said}; `bios apply --retry-reset` resets once more")
    if pending:
        return item(Status.PENDING, "set; applied at the host's next reset")
    if name in plan.implied:
        return item(Status.DRIFT, f"{plan.implied[name]}: provision bios apply sets that")
    stage = next((i for i, s in enumerate(plan.stages) if name in s), 0)
    if stage:
        locked = read_only(name, state.attributes, state.registry)[1]
        unlockers = ", ".join(plan.unlocked_by.get(name, [])) or "an earlier stage"
        return item(Status.DRIFT, f"{locked} now; writable once {unlockers} is applied "
                    f"(bios apply does it in {stage + 1} stages, one reset each)")
    return item(Status.DRIFT, "provision bios apply sets it (one reset)")


def foreign_pending(state: BiosState, wanted: Mapping[str, Value]) -> list[Item]:
    """Pending values the baseline did not ask for: someone else staged them, and the
    next reset (ours too) applies them."""
    out = []
    for name, value in sorted(state.pending.items()):
        if name in wanted and same_value(wanted[name], value):
            continue
        out.append(Item("bios", name, text_value(state.attributes.get(name)),
                        text_value(value), Status.FOREIGN,
                        "pending, not in the baseline: the next reset applies it; `bios "
                        "apply --clear-pending` discards it, --include-pending applies it too",
                        value, ""))
    return out
