"""Waiting on MAAS: poll a machine (through the shared StatePoller) until it reaches a wanted
state; on a failure state pass MAAS's events on, on a timeout abort MAAS's operation."""

from __future__ import annotations

from typing import ClassVar

from provisioner.deploy.base import ProgressFn
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.errors import MAASError, MAASTimeout
from provisioner.deploy.maas.models import Machine
from provisioner.deploy.maas.poller import StatePoller
from provisioner.deploy.maas.session import MAASSession, log
from provisioner.deploy.maas.status import BUSY, NodeStatus


class MAASWaiting(MAASSession):
    """Polling a machine until it gets somewhere."""

    EVENTS_ON_FAILURE: ClassVar[int] = 5

    def _abort(
        self, client: MAASClient, system_id: str, host: str, phase: str, timeout_s: float
    ) -> None:
        """Stop MAAS's timed-out operation, so it does not go on behind the run's back and a
        retry starts from a clean state (MAAS returns the machine to its previous state)."""
        try:
            client.abort(system_id, comment=f"provisioner: {phase} of {host} timed out "
                                            f"after {timeout_s:.0f}s")
        except MAASError as exc:  # the timeout is the news; a failed abort is logged
            log.warning("%s: could not abort the %s of MAAS machine %s: %s",
                        host, phase, system_id, exc.message)

    def _report_events(
        self, client: MAASClient, system_id: str, host: str, phase: str, progress: ProgressFn
    ) -> None:
        """Pass MAAS's latest events of a failed machine on (the workflow records them)."""
        try:
            events = client.events(system_id, limit=self.EVENTS_ON_FAILURE)
        except MAASError as exc:  # the failure itself matters more than its events
            log.warning("%s: cannot read MAAS events of %s: %s", host, system_id, exc.message)
            return
        for event in reversed(events):
            progress(host, phase, f"MAAS event: {event.line()}")

    def _wait(
        self,
        client: MAASClient,
        system_id: str,
        host: str,
        *,
        phase: str,
        want: set[NodeStatus],
        timeout_s: float,
        progress: ProgressFn | None,
    ) -> Machine:
        """Poll until the machine reaches a ``want`` state; raise on a failure state or timeout."""
        assert self._settings is not None
        poller = self._poller(client)
        try:
            return self._poll(client, poller, system_id, host, phase=phase, want=want,
                              timeout_s=timeout_s, progress=progress)
        finally:
            poller.forget(system_id)

    def _poller(self, client: MAASClient) -> StatePoller:
        with self._lock:
            if self._state_poller is None:
                assert self._settings is not None
                # Slightly under the interval, so that each waiter sees a new read per round.
                self._state_poller = StatePoller(
                    client, max_age_s=self._settings.poll_interval_s * 0.9, clock=self._clock
                )
            return self._state_poller

    def _poll(
        self,
        client: MAASClient,
        poller: StatePoller,
        system_id: str,
        host: str,
        *,
        phase: str,
        want: set[NodeStatus],
        timeout_s: float,
        progress: ProgressFn | None,
    ) -> Machine:
        assert self._settings is not None
        deadline = self._clock() + timeout_s
        last: str | None = None
        fresh = True  # the first read follows an action: never a cached state
        while True:
            machine = poller.read(system_id, fresh=fresh)
            fresh = False
            status = machine.node_status
            shown = machine.status_name + (
                f": {machine.status_message}" if machine.status_message else ""
            )
            if progress is not None and shown != last:
                progress(host, phase, f"MAAS: {shown}")
            last = shown
            if status in want:
                return machine
            if status not in BUSY:
                detail = f": {machine.status_message}" if machine.status_message else ""
                if progress is not None:
                    self._report_events(client, system_id, host, phase, progress)
                raise MAASError(
                    f"{host}: MAAS machine {system_id} went to {machine.status_name!r} "
                    f"during {phase}{detail}",
                    system_id=system_id,
                    maas_message=machine.status_message,
                    hint=f"see the machine's events and logs in MAAS ({phase} log)",
                )
            if self._clock() >= deadline:
                if phase in ("commission", "deploy"):
                    self._abort(client, system_id, host, phase, timeout_s)
                raise MAASTimeout(
                    f"{host}: MAAS machine {system_id} still {machine.status_name!r} after "
                    f"{timeout_s:.0f}s of {phase}",
                    system_id=system_id,
                    hint=f"raise settings.maas.{phase}_timeout_s, or check the machine's "
                    "console in MAAS",
                )
            self._sleep(self._settings.poll_interval_s)
