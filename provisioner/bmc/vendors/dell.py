"""Dell iDRAC 9: UEFI network boot per port via BIOS attributes and the iDRAC job queue."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, ClassVar

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import BootTarget, PowerAction, PowerState
from provisioner.bmc.firmware_methods import FirmwareQuirks
from provisioner.bmc.redfish_bmc import NETWORK_TARGETS, RedfishBMC
from provisioner.redfish.errors import (
    BMCJobFailed,
    BMCNotFound,
    BMCStateTimeout,
    BMCVerifyFailed,
    RedfishError,
)

log = logging.getLogger(__name__)

PENDING_JOB_STATES = frozenset(
    {"New", "Scheduled", "Running", "Starting", "Waiting", "ScheduledWithErrors", "Downloaded"}
)
FAILED_JOB_STATES = frozenset({"Failed", "CompletedWithErrors", "Killed", "Cancelled",
                               "Exception"})
DONE_JOB_STATES = frozenset({"Completed"})


def _is_already_committed(exc: RedfishError) -> bool:
    """iDRAC's SYS011 'Pending configuration values are already committed'."""
    text = str(exc).lower()
    return any(mid.endswith("SYS011") for mid in exc.message_ids()) or "already committed" in text


def _is_job_running(exc: RedfishError) -> bool:
    text = str(exc).lower()
    return "job" in text and ("in progress" in text or "already running" in text
                              or "already exists" in text)


class DellBMC(RedfishBMC):
    """iDRAC network-boots only from the port named in PxeDev1/HttpDev1 BIOS attributes.

    Before a network boot the attributes are set for the provisioning port, a BIOS
    configuration job is created (or an already scheduled one reused), the host is rebooted to
    run it, the job is polled, the attributes are read back and the host is left off, so the
    override is used by the caller's next power on rather than by the boot after the job.
    """

    vendor: ClassVar[str] = "dell"
    # A DUP names the component it updates: iDRAC takes no Targets for it. A BIOS or NIC
    # update sent OnReset becomes a job in state Scheduled, run at the next host reset.
    # Its multipart push takes Immediate and OnReset without listing them, and wants an
    # (empty) Oem object in UpdateParameters.
    firmware_quirks: ClassVar[FirmwareQuirks] = FirmwareQuirks(
        targets_in_image=True, staged_job_states=frozenset({"Scheduled"}),
        multipart_apply_times=("Immediate", "OnReset"), multipart_params={"*": {"Oem": {}}})
    bios_needs_job: ClassVar[bool] = True
    job_timeout_s: float = 900.0

    def prepare_boot(self, target: BootTarget) -> None:
        if target not in NETWORK_TARGETS:
            return
        bios_link = rp.odata_id(self.system().get("Bios"))
        if not bios_link:
            self.warnings.append("no Bios resource: network boot port left as configured")
            return
        bios = self.client.get(bios_link)
        attrs = rp.obj(bios.get("Attributes"))
        if attrs.get("BootMode") not in (None, "Uefi"):
            self.warnings.append(
                f"BIOS BootMode is {attrs.get('BootMode')}: PxeDev/HttpDev attributes only "
                "apply in UEFI mode; the NIC's legacy boot setting decides"
            )
            return
        try:
            # The caller's choice failing (no port, several) fails the boot: it is no
            # RedfishError, so it passes through; a BMC that cannot list its ports only warns.
            port = self.provisioning_port()
        except RedfishError as exc:
            self.warnings.append(f"network boot port not set: {exc}")
            return
        prefix = "PxeDev1" if target == BootTarget.PXE else "HttpDev1"
        wanted = {f"{prefix}EnDis": "Enabled", f"{prefix}Interface": port.id}
        missing = [key for key in wanted if key not in attrs]
        if missing:
            self.warnings.append(f"BIOS lacks {', '.join(missing)}: network boot port not set")
            return
        diff = {key: value for key, value in wanted.items() if attrs.get(key) != value}
        if not diff:
            return
        settings = rp.odata_id(
            rp.obj(bios.get("@Redfish.Settings")).get("SettingsObject")
        ) or bios_link.rstrip("/") + "/Settings"
        job = self._apply_bios(settings, diff)
        # The job runs during POST: power on, or restart a running host.
        self.warnings.append(
            f"rebooted to apply BIOS network-boot settings {diff} (once; later boots skip it)")
        if self.power_state() in (PowerState.OFF, PowerState.POWERING_OFF):
            self.power(PowerAction.ON)
        else:
            self.power(PowerAction.RESTART)
        if job:
            self._wait_job(job)
        now = (self.client.get(bios_link).get("Attributes") or {})
        still = {k: now.get(k) for k, v in diff.items() if now.get(k) != v}
        if still:
            raise BMCVerifyFailed(
                f"BIOS attributes not applied after the configuration job: wanted {diff}, "
                f"BIOS shows {still}",
                bmc=self.name,
                path=bios_link,
                hint="look at the iDRAC job queue (Maintenance > Job Queue) for a failed "
                "BIOS job, clear it, and retry",
            )
        # The host goes on booting after the job; an override set now could be used up by
        # that boot. Leave it off: the caller's power on/cycle then boots the override.
        self.power(PowerAction.OFF)
        self.wait_power(PowerState.OFF, self.graceful_timeout_s)

    def stage_bios_job(self, settings: str, changes: dict[str, Any]) -> str | None:
        """Stage BIOS values behind a configuration job (iDRAC applies nothing without one);
        returns the job to wait for after the reset."""
        return self._apply_bios(settings, changes)

    def wait_bios_job(self, job: str) -> None:
        """Wait for a staged BIOS job to end; raises with iDRAC's message if it failed."""
        self._wait_job(job)

    # -- job queue ----------------------------------------------------------------------

    def _jobs_collections(self) -> list[str]:
        out = [f"{m.rstrip('/')}/Jobs" for m in self._manager_paths()[:1]]
        out.append("/redfish/v1/JobService/Jobs")
        return out

    def _apply_bios(self, settings: str, diff: dict[str, Any]) -> str | None:
        """PATCH pending BIOS values and make sure a config job will apply them."""
        body = {"Attributes": diff, "@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}}
        for attempt in range(2):
            try:
                reply = self.client.patch(settings, body)
            except RedfishError as exc:
                if not (_is_already_committed(exc) or _is_job_running(exc)) or attempt:
                    raise
                existing = self._pending_bios_job()
                pending = rp.obj(self.client.get(settings).get("Attributes"))
                if existing and all(pending.get(k) == v for k, v in diff.items()):
                    log.info("%s: reusing scheduled BIOS job %s", self.name, existing)
                    return existing
                if existing:
                    self._delete_job(existing)
                continue
            job = reply.header("Location")
            if job and "JID_" in job:
                return job
            return self._create_job(settings)
        return None

    def _create_job(self, settings: str) -> str | None:
        managers = self._manager_paths()
        if not managers:
            return None
        try:
            reply = self.client.post(f"{managers[0].rstrip('/')}/Jobs",
                                     {"TargetSettingsURI": settings})
        except RedfishError as exc:
            # The PATCH with an apply time already scheduled the job on newer firmware.
            if _is_already_committed(exc) or _is_job_running(exc):
                return self._pending_bios_job()
            raise
        return reply.header("Location") or self._pending_bios_job()

    def _pending_bios_job(self) -> str | None:
        jobs = self._pending_bios_jobs()
        return jobs[0] if jobs else None

    def _pending_bios_jobs(self) -> list[str]:
        out: list[str] = []
        for collection in self._jobs_collections():
            try:
                jobs = self.client.members(collection)
            except BMCNotFound:
                continue
            for job in jobs:
                kind = f"{job.get('JobType') or ''} {job.get('Name') or ''}".lower()
                path = str(job.get("@odata.id"))
                if "bios" in kind and job.get("JobState") in PENDING_JOB_STATES \
                        and path not in out:
                    out.append(path)
            if out:
                break  # the manager's queue and JobService list the same jobs
        return out

    def clear_bios_jobs(self, settings: str) -> list[str]:
        """Delete the BIOS configuration jobs waiting in the job queue: each would apply
        pending values at the next reset."""
        removed = []
        for job in self._pending_bios_jobs():
            self._delete_job(job)
            removed.append(job.rstrip("/").rsplit("/", 1)[-1])
        return removed

    def _delete_job(self, job: str) -> None:
        log.info("%s: deleting stale BIOS job %s", self.name, job)
        with contextlib.suppress(BMCNotFound):  # it finished or vanished meanwhile
            self.client.delete(job)

    def _wait_job(self, job: str) -> None:
        """Poll a job until it ends; a job id that vanishes is judged by the attributes."""
        job_id = job.rstrip("/").rsplit("/", 1)[-1]
        paths = [job] + [f"{c}/{job_id}" for c in self._jobs_collections() if c not in job]
        deadline = self._clock() + self.job_timeout_s
        while True:
            state: dict[str, Any] | None = None
            for path in paths:
                try:
                    state = self.client.get(path)
                    break
                except BMCNotFound:
                    continue
            if state is None:
                log.info("%s: job %s vanished; checking the attributes", self.name, job_id)
                return
            job_state = str(state.get("JobState") or state.get("TaskState") or "")
            if job_state in DONE_JOB_STATES:
                return
            if job_state in FAILED_JOB_STATES:
                messages = "; ".join(
                    str(m.get("Message")) for m in state.get("Messages") or [] if m
                ) or str(state.get("Message") or "")
                raise BMCJobFailed(f"BIOS job {job_id} ended {job_state}: {messages}",
                                   bmc=self.name, path=job)
            if self._clock() >= deadline:
                raise BMCStateTimeout(
                    f"BIOS job {job_id} still {job_state or 'unknown'} after "
                    f"{self.job_timeout_s:g}s",
                    bmc=self.name,
                    path=job,
                )
            self._sleep(self.poll_interval_s)
