"""What the workflow may ask of a host's BMC, one small interface per capability.

Each capability has a cheap ``validate()`` (a read or two, nothing sent) that says whether
this BMC offers it, raising the BMC error that says why not: ``--dry-run`` uses them. The
Redfish implementation (``provisioner.bmc.redfish_bmc``) composes one object per capability
behind a facade; vendors differ only in the quirk hooks it declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from provisioner.bmc.bios_state import BiosState
from provisioner.bmc.firmware_inventory import FirmwareComponent
from provisioner.bmc.firmware_methods import (
    NoUpdateWay,
    TaskLook,
    UpdateRequest,
    UpdateService,
)
from provisioner.redfish.errors import BMCServerError, BMCTimeout, BMCUnreachable

# While a BMC flashes itself it reboots: these answers mean "not back yet", not "failed".
BMC_AWAY = (BMCUnreachable, BMCTimeout, BMCServerError)
__all__ = ["BMC_AWAY", "Bios", "FirmwareUpdate", "NoUpdateWay"]


@runtime_checkable
class Bios(Protocol):
    """The host's BIOS settings: read, stage for the next reset, check what took effect."""

    def validate(self) -> None:
        """Raise when the BMC offers no BIOS settings."""
        ...

    def read_bios(self, *, with_registry: bool = True) -> BiosState:
        """Current and pending values, where they are written, the attribute registry
        (skipped for a read-back: ``with_registry=False``)."""
        ...

    def stage_bios(self, state: BiosState, changes: dict[str, Any]) -> str | None:
        """Write ``changes`` for the next reset; the vendor job to wait for, if any."""
        ...

    def wait_bios_job(self, job: str) -> None:
        """Wait (after the reset) for a job ``stage_bios`` returned."""
        ...

    def clear_pending(self, state: BiosState, current: Mapping[str, Any]) -> list[str]:
        """Discard pending values (and the vendor's queued jobs for them); what was removed."""
        ...

    def unapplied_bios(self, wanted: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The wanted values not shown yet (name -> shown), and the BMC's own notes."""
        ...


@runtime_checkable
class FirmwareUpdate(Protocol):
    """The host's firmware: what is installed, and updating it image by image."""

    def validate(self) -> None:
        """Raise when the BMC offers no update service."""
        ...

    def firmware_components(self) -> list[FirmwareComponent]:
        """Every installed component the BMC lists."""
        ...

    def update_service(self) -> UpdateService:
        """What the BMC's update service offers."""
        ...

    def plan_update(self, service: UpdateService, *, image_url: str, image_size: int | None,
                    target: str | None, at_reset: bool, kind: str = "device") -> UpdateRequest:
        """The way this image would go to this BMC (sends nothing); raises
        :class:`NoUpdateWay` when there is none."""
        ...

    def send_update(self, service: UpdateService, req: UpdateRequest, *, image_url: str,
                    image: Path, timeout_s: float) -> str | None:
        """Send one update; the task to poll, or None when the BMC names none."""
        ...

    def wait_update_task(self, task: str, *, timeout_s: float, poll_s: float,
                         until_staged: bool = False) -> str:
        """'completed', 'vanished' or (``until_staged``) 'staged'; raises if it failed."""
        ...

    def task_state(self, task: str) -> TaskLook:
        """One look at an update task (running, staged, completed, failed, vanished)."""
        ...

    def running_tasks(self) -> list[TaskLook]:
        """The tasks the BMC lists that have not ended."""
        ...

    def wait_untasked_update(self, service: UpdateService, *, timeout_s: float,
                             poll_s: float) -> None:
        """Wait out an update the BMC answered without a task (its vendor's report)."""
        ...

    def wait_bmc_back(self, *, timeout_s: float, poll_s: float) -> None:
        """Wait for a BMC that reboots after flashing itself to answer again."""
        ...
