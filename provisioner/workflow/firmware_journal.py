"""The firmware update journal in each host's history: every image is written down before it
is sent and when its task is named, and every step's end. A run killed mid-update leaves the
last step open; the next run (or `maintenance`, which refuses meanwhile) reads it, and the
update run asks the BMC what became of that task: it waits for one still running, records
how it ended, and never sends the same image again while the BMC is still at it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from provisioner.exceptions import NotReady, ProvisionerError, StateError
from provisioner.redfish.errors import BMCStateTimeout
from provisioner.state import StateStore

if TYPE_CHECKING:
    from provisioner.bmc.redfish_bmc import RedfishBMC

EVENT = "firmware"
OPEN = frozenset({"sending", "sent"})  # a step the BMC may still be working on
CLOSED = frozenset({"done", "failed", "finished", "resolved"})


class UpdateInProgress(NotReady):
    """The BMC is still working on an update an earlier run sent."""

    reason = "update in progress"


@dataclass(frozen=True)
class InFlight:
    """A step an earlier run opened and never closed."""

    host: str
    label: str
    component: str  # the FirmwareInventory member's path
    task: str | None  # the task the BMC named, if it got that far
    since: datetime

    def describe(self) -> str:
        """``BMC [Id]: sent 21:04:05 UTC, task /redfish/v1/TaskService/Tasks/3``."""
        when = self.since.strftime("%Y-%m-%d %H:%M:%S UTC")
        return (f"{self.label}: sent {when}, task {self.task}" if self.task else
                f"{self.label}: being sent at {when}, before the BMC named a task")


def journal(store: StateStore, host: str, phase: str, message: str, **data: Any) -> None:
    """One step of a host's update in its history."""
    store.record_event(host, EVENT, message, {"phase": phase, **data})


def in_flight(store: StateStore, host: str) -> InFlight | None:
    """The update step an earlier run left open on this host, if any."""
    try:
        events = store.events(host)
    except (StateError, ProvisionerError):
        return None
    for event in reversed(events):
        phase = (event.data or {}).get("phase") if event.kind == EVENT else None
        if phase in CLOSED:
            return None
        if phase in OPEN:
            data = event.data or {}
            task = data.get("task")
            return InFlight(host, str(data.get("label") or "?"),
                            str(data.get("component") or ""),
                            task if isinstance(task, str) and task else None, event.ts)
    return None


def look_at_interrupted(bmc: RedfishBMC, store: StateStore, host: str, *, wait: bool,
                        timeout_s: float, poll_s: float) -> str:
    """What became of the update an earlier run left open on this host (empty when none):
    one still running is waited for (``wait``) or reported, and nothing is sent while it
    runs; its end is written down so the open step closes."""
    flight = in_flight(store, host)
    if flight is None:
        return ""
    if flight.task is None:
        busy = bmc.firmware.running_tasks()
        if busy:
            raise UpdateInProgress(
                f"an earlier run was stopped while sending {flight.label}; the BMC runs "
                f"{', '.join(f'{t.path} ({t.detail})' for t in busy)}: not sent again",
                hint="wait for those tasks to end (the BMC's task list), then run again")
        note = f"{flight.describe()}: the BMC named no task and runs none now"
        journal(store, host, "resolved", note, component=flight.component)
        return note
    look = bmc.firmware.task_state(flight.task)
    if look.state in ("running", "unknown", "staged") and not wait:
        return f"{flight.describe()}: still {look.state} ({look.detail})"
    if look.state == "staged":
        raise UpdateInProgress(
            f"{flight.describe()} waits for a host reset ({look.detail}): not sent again",
            hint="reset the host (provision power cycle HOST) to let it apply, then run "
            "again")
    state, detail = look.state, look.detail
    if state in ("running", "unknown"):
        try:
            state = bmc.firmware.wait_update_task(flight.task, timeout_s=timeout_s,
                                                  poll_s=poll_s)
            detail = ""
        except BMCStateTimeout as exc:
            raise UpdateInProgress(f"{flight.describe()} is still running: not sent again",
                                   hint="run again once it ends") from exc
        except ProvisionerError as exc:
            state, detail = "failed", str(exc)
    note = f"{flight.describe()}: {state}" + (f" ({detail})" if detail else "") \
        + " (found after an interrupted run)"
    journal(store, host, "resolved", note, component=flight.component, task=flight.task,
            outcome=state)
    return note
