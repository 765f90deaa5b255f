"""`provision bios apply`: bring hosts' BIOS to their baseline. Entries the firmware would not
take are refused before anything is sent; values other people staged are never committed by
our reset unless the operator says so; changes a registry Dependency holds read-only go in a
later stage (one reset each); a value the BIOS does not take at its reset is reported with
what the BMC said since our change, and is not retried with another reset unless asked."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from provisioner.bmc.base import PowerAction, PowerState
from provisioner.bmc.bios_dependencies import plan_stages
from provisioner.bmc.bios_state import BiosState
from provisioner.bmc.bios_values import Value, same_value, text_value
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import InputError, StateError
from provisioner.http_policy.deadline import deadline as host_deadline
from provisioner.inventory import Host, Site
from provisioner.redfish.errors import BMCVerifyFailed
from provisioner.state import StateStore
from provisioner.workflow.baseline_items import REFUSED, Item, Status
from provisioner.workflow.bios_baseline import NotApplied, bios_items
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.bulk import STEPWISE, ActionResult, host_deadline_s, run_per_host
from provisioner.workflow.selection import spare_serving

EVENT = "bios"


class BaselineRefused(InputError):
    """A host's baseline names attributes or values its firmware does not accept."""

    reason = "baseline refused"


class ForeignPending(InputError):
    """The host holds pending BIOS values someone else staged; a reset would commit them."""

    reason = "foreign pending"


class NotAppliedBefore(InputError):
    """Values that did not apply at an earlier reset: resetting again would not help."""

    reason = "not applied before"


class NotAppliedAfterReset(BMCVerifyFailed):
    """The BIOS did not take values at the reset that should have applied them."""

    reason = "not applied after reset"

    def __init__(self, message: str, *, record: dict[str, Any], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.record = record  # what the host's history keeps for the next check and apply


@dataclass(frozen=True)
class ApplyOptions:
    """How `bios apply` treats hosts: reset them or only stage, how long to wait, and what
    to do with pending values that are not the baseline's."""

    reboot: bool = True
    force: bool = False  # also hosts that are serving (deployed, configured, validated)
    timeout_s: float = 900.0
    poll_s: float = 10.0
    clear_pending: bool = False  # discard others' pending values (iDRAC's job queue too)
    include_pending: bool = False  # let our reset apply them as well
    retry_reset: bool = False  # reset again for values an earlier reset did not apply


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_not_applied(store: StateStore, host: str) -> NotApplied | None:
    """What the host's last `bios apply` that got as far as a reset left unapplied (None
    when the last one applied everything)."""
    try:
        events = store.events(host)
    except StateError:  # never targeted by a command yet: no history
        return None
    for event in reversed(events):
        data = event.data or {}
        if event.kind != EVENT or "outcome" not in data:
            continue
        if data["outcome"] == "applied":
            return None
        if data["outcome"] == "not-applied":
            return NotApplied({str(k): str(v) for k, v in
                               dict(data.get("not_applied") or {}).items()},
                              str(data.get("reset_at") or "?"), str(data.get("said") or ""))
    return None


def _refuse(items: Sequence[Item]) -> None:
    bad = [i for i in items if i.status in REFUSED]
    if bad:
        raise BaselineRefused(
            "nothing sent: " + "; ".join(f"{i.shown}={i.want} is {i.status.value}"
                                         + (f" ({i.hint})" if i.hint else "") for i in bad),
            hint="fix the baseline in the site file (`provision bios check` lists the names "
            "and values this firmware accepts)")


def refusals(items: Sequence[Item], opts: ApplyOptions) -> list[str]:
    """Why the real apply would refuse this host (the dry run says so too)."""
    out = [f"{i.shown}={i.want} is {i.status.value}" + (f" ({i.hint})" if i.hint else "")
           for i in items if i.status in REFUSED]
    foreign = [i for i in items if i.status is Status.FOREIGN]
    if foreign and opts.reboot and not (opts.clear_pending or opts.include_pending):
        out.append(_foreign_message(foreign))
    stale = [i for i in items if i.status is Status.NOT_APPLIED]
    if stale and opts.reboot and not opts.retry_reset:
        out.append(_stale_message(stale))
    return out


def _foreign_message(foreign: Sequence[Item]) -> str:
    return ("pending values someone else staged would be applied by the reset: "
            + ", ".join(f"{i.name}={i.want} (now {i.have})" for i in foreign)
            + "; pass --clear-pending to discard them or --include-pending to apply them")


def _stale_message(stale: Sequence[Item]) -> str:
    return ("; ".join(f"{i.name}={i.want}: {i.hint.split('; `bios apply')[0]}" for i in stale)
            + "; another reset is not sent unless --retry-reset")


def _clear_foreign(bmc: RedfishBMC, state: BiosState, foreign: Sequence[Item]) -> str:
    """Discard pending values that are not ours (and iDRAC's queued BIOS jobs), then check
    they are gone."""
    removed = bmc.bios.clear_pending(state, {i.name: state.attributes.get(i.name)
                                             for i in foreign})
    after = bmc.bios.read_bios(with_registry=False)
    left = [i.name for i in foreign if i.name in after.pending]
    if left:
        raise ForeignPending(f"pending values {', '.join(left)} could not be cleared",
                             hint="clear them in the BMC's web interface (pending BIOS "
                             "settings, job queue), then run again")
    return "cleared " + "; ".join(removed)


@dataclass
class _Outcome:
    detail: str
    data: dict[str, Any]


@dataclass
class _Prepared:
    """What one host's apply sends, read under its first deadline."""

    state: BiosState
    items: list[Item]
    changes: dict[str, Any]
    pending: dict[str, Any]
    notes: list[str]


def _prepare(bmc: RedfishBMC, host: Host, opts: ApplyOptions, store: StateStore
             ) -> _Prepared:
    state = bmc.bios.read_bios()
    bmc.warnings.extend(state.warnings)
    items = bios_items(host.bios, state, bmc.vendor, last_not_applied(store, host.name))
    _refuse(items)
    notes: list[str] = []
    foreign = [i for i in items if i.status is Status.FOREIGN]
    if foreign and opts.clear_pending:
        notes.append(_clear_foreign(bmc, state, foreign))
        state = bmc.bios.read_bios()
        items = bios_items(host.bios, state, bmc.vendor, last_not_applied(store, host.name))
    elif foreign and opts.include_pending:
        notes.append("also applies pending " + ", ".join(f"{i.name}={i.want}" for i in foreign))
    elif foreign and opts.reboot:
        raise ForeignPending("nothing sent: " + _foreign_message(foreign),
                             hint="`provision bios check` lists them")
    stale = [i for i in items if i.status is Status.NOT_APPLIED]
    if stale and opts.reboot and not opts.retry_reset:
        raise NotAppliedBefore("nothing sent: " + _stale_message(stale),
                               hint="look at the BMC's log for why the BIOS refused it; "
                               "--retry-reset resets once more")
    # A value not applied at an earlier reset (asked to retry) is written again where the
    # BMC dropped it, and only reset for where it is still pending.
    retried = {i.name for i in items if i.status is Status.NOT_APPLIED}
    changes = {i.name: i.value for i in items if i.status is Status.DRIFT
               or (i.name in retried and i.name not in state.pending)}
    pending = {i.name: i.value for i in items if i.status is Status.PENDING
               or (i.name in retried and i.name in state.pending)}
    return _Prepared(state, list(items), changes, pending, notes)


def _apply_one(bmc: RedfishBMC, host: Host, opts: ApplyOptions, store: StateStore,
               base_s: float) -> str:
    # The host's deadline is armed per step: reading and planning get ``base_s``; each
    # stage (one reset) gets it plus the waits --timeout allows (see _stages).
    with host_deadline(base_s):
        prep = _prepare(bmc, host, opts, store)
    if not prep.changes and not prep.pending:
        outcome = _Outcome("nothing to change" + _joined(prep.notes), {"outcome": "unchanged"})
    else:
        try:
            outcome = _stages(bmc, prep, opts, base_s)
        except NotAppliedAfterReset as exc:
            store.record_event(host.name, EVENT, f"bios apply: {exc}", exc.record)
            raise
    store.record_event(host.name, EVENT, outcome.detail, outcome.data)
    return outcome.detail


def _joined(notes: Sequence[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""


def stage_deadline_s(base_s: float, opts: ApplyOptions) -> float:
    """One stage's deadline: the host's, plus a reset's wait for the BIOS (and an iDRAC job
    before it), each bounded by --timeout."""
    return base_s + 2 * opts.timeout_s


def _stages(bmc: RedfishBMC, prep: _Prepared, opts: ApplyOptions, base_s: float) -> _Outcome:
    state, items, changes, notes = prep.state, prep.items, prep.changes, prep.notes
    wanted = {i.name: i.value for i in items if i.value is not None
              and i.status is not Status.FOREIGN}
    plan = plan_stages(changes, state.attributes, wanted, state.registry)
    stages = [dict(s) for s in plan.stages] or [{}]
    stages[0] = {**stages[0], **prep.pending}
    if not opts.reboot:
        with host_deadline(base_s):
            return _stage_only(bmc, state, stages, changes, notes)
    with host_deadline(base_s):
        was_off = bmc.power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    applied: dict[str, Any] = {}
    for number, stage in enumerate(stages, start=1):
        # Values a Dependency sets by itself are checked after the stage that sets them.
        implied = {n: wanted[n] for n in plan.implied if n in wanted} if number == len(stages) \
            else {}
        with host_deadline(stage_deadline_s(base_s, opts)):
            _run_stage(bmc, state, {k: v for k, v in stage.items() if k in changes},
                       {**stage, **implied}, opts)
            applied.update(stage)
            applied.update(implied)
            if number < len(stages):
                state = bmc.bios.read_bios()
    if was_off:
        with host_deadline(base_s):
            bmc.power(PowerAction.OFF)  # leave it as it was found
    staged_in = f" in {len(stages)} stages" if len(stages) > 1 else ""
    return _Outcome(f"applied {', '.join(f'{k}={text_value(v)}' for k, v in applied.items())}"
                    f"{staged_in}" + _joined(notes),
                    {"outcome": "applied", "applied": _texts(applied), "stages": len(stages)})


def _stage_only(bmc: RedfishBMC, state: BiosState, stages: list[dict[str, Any]],
                changes: dict[str, Any], notes: list[str]) -> _Outcome:
    first = {k: v for k, v in stages[0].items() if k in changes}
    job_note = bmc.bios.stage_bios(state, first) if first else None
    later = [n for s in stages[1:] for n in s]
    tail = f"; {', '.join(later)} need that reset first (run again after it)" if later \
        else ""
    return _Outcome(f"staged {', '.join(stages[0])}: applied at the host's next reset"
                    f"{tail}" + (f" (job {job_note})" if job_note else "")
                    + _joined(notes), {"outcome": "staged", "staged": _texts(stages[0])})


def _texts(values: Mapping[str, Any]) -> dict[str, str]:
    return {k: text_value(v) for k, v in values.items()}


def _run_stage(bmc: RedfishBMC, state: BiosState, send: dict[str, Value],
               verify: dict[str, Value], opts: ApplyOptions) -> None:
    """Stage ``send``, reset once, and wait until the BIOS shows ``verify``."""
    before = state.settings_time
    job = bmc.bios.stage_bios(state, send) if send else None
    if bmc.power_state() in (PowerState.OFF, PowerState.POWERING_OFF):
        reset_at = _now()
        bmc.power(PowerAction.ON)
    else:
        reset_at = _now()
        bmc.power(PowerAction.RESTART)
    if job:
        bmc.bios.wait_bios_job(job)
    _wait_applied(bmc, verify, before, reset_at, opts)


def _wait_applied(bmc: RedfishBMC, wanted: dict[str, Value], before: str | None,
                  reset_at: str, opts: ApplyOptions) -> None:
    deadline = time.monotonic() + opts.timeout_s
    while True:
        now = bmc.bios.read_bios(with_registry=False)
        still = {k: now.attributes.get(k) for k, v in wanted.items()
                 if not same_value(v, now.attributes.get(k))}
        if not still:
            return
        if time.monotonic() >= deadline:
            said = _said_since(now, before, set(still))
            shows = ", ".join(f"{k}={text_value(v)}" for k, v in still.items())
            record = {"outcome": "not-applied", "ok": False, "reset_at": reset_at,
                      "not_applied": {k: text_value(wanted[k]) for k in still}, "said": said}
            raise NotAppliedAfterReset(
                f"{', '.join(f'{k}={text_value(wanted[k])}' for k in still)} not applied "
                f"after the reset at {reset_at} (the BIOS shows {shows}); {said}",
                record=record, bmc=bmc.name, path=now.path,
                hint="not reset again: look at the BMC's job/task log for why the BIOS "
                "refused it; `bios apply --retry-reset` resets once more")
        # A short timeout (a test, an impatient operator) still gets several looks.
        time.sleep(min(opts.poll_s, max(0.1, opts.timeout_s / 10)))


def _said_since(state: BiosState, before: str | None, names: set[str]) -> str:
    """What the BMC said of applying settings since our change: only messages of an apply
    newer than our PATCH (the settings' Time moved), and of our attributes where the
    message names what it relates to."""
    if state.settings_time is None:
        return "the BMC gives no time for its last settings apply, so none of its messages " \
            "can be told to be about this change"
    if state.settings_time == before:
        return f"the BMC reports no settings apply since our change (last at {before})"
    texts = []
    for msg in state.settings_messages:
        related = [str(p) for p in msg.get("RelatedProperties") or []]
        if related and not any(p.rsplit("/", 1)[-1] in names for p in related):
            continue
        if "success" in str(msg.get("MessageId", "")).lower():
            continue
        texts.append(str(msg.get("Message") or msg.get("MessageId")))
    return ("the BMC says: " + "; ".join(texts)) if texts else \
        f"the BMC applied settings at {state.settings_time} and said nothing of these"


def apply_bios(site: Site, hosts: Sequence[Host], store: StateStore, *,
               opts: ApplyOptions = ApplyOptions(), max_parallel: int | None = None,
               opener: Callable[[Site, Host], RedfishBMC] = open_bmc) -> list[ActionResult]:
    """Bring each host's BIOS to its baseline: refuse bad entries before sending, stage,
    reset (hosts that are serving only with ``force``), read back. One host's failure stays
    its own; every outcome is recorded in the host's history."""
    store.ensure_hosts([h.name for h in hosts])
    results, eligible = spare_serving(hosts, store, force=opts.force or not opts.reboot,
                                      why="a BIOS apply resets it")
    base_s = host_deadline_s(site)
    results += run_per_host(site, eligible,
                            lambda bmc, h: _apply_one(bmc, h, opts, store, base_s),
                            max_parallel=max_parallel, opener=opener, waits_s=STEPWISE)
    for res in results:
        if not res.ok and res.reason != NotAppliedAfterReset.reason:  # that one is recorded
            store.record_event(res.host, EVENT, f"bios apply failed ({res.reason}): "
                               f"{res.error}", {"ok": False, "outcome": "failed",
                                                "warnings": list(res.warnings)})
    order = {h.name: i for i, h in enumerate(hosts)}
    return sorted(results, key=lambda r: order[r.host])
