"""The firmware-update capability over Redfish: the installed components
(UpdateService.FirmwareInventory), the way an image goes to the BMC (SimpleUpdate or a push),
sending it, and the task it starts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.firmware_inventory import FirmwareComponent, parse_component
from provisioner.bmc.firmware_methods import (
    FirmwareQuirks,
    Method,
    NoUpdateMethod,
    NoUpdateWay,
    TaskLook,
    UpdateRequest,
    UpdateService,
    choose,
    parse_update_service,
)
from provisioner.bmc.interfaces import BMC_AWAY
from provisioner.redfish.client import Reply
from provisioner.redfish.errors import (
    BMCBadResponse,
    BMCJobFailed,
    BMCNotFound,
    BMCServerError,
    BMCStateTimeout,
    BMCUnsupported,
)
from provisioner.redfish.upload import MultipartBody, UploadBody

if TYPE_CHECKING:
    from provisioner.bmc.redfish_bmc import RedfishBMC

DONE_TASK_STATES = frozenset({"Completed"})
FAILED_TASK_STATES = frozenset({"Exception", "Killed", "Cancelled", "Interrupted"})
# An OnReset update's task waits for the host reset in one of these (DMTF TaskState).
STAGED_TASK_STATES = frozenset({"Pending", "Suspended"})


class RedfishFirmwareUpdate:
    """A BMC's UpdateService: what is installed, and updating it image by image."""

    def __init__(self, bmc: RedfishBMC, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._bmc = bmc
        self._sleep = sleep
        self._clock = clock

    @property
    def quirks(self) -> FirmwareQuirks:
        """The vendor's UpdateService quirks."""
        return self._bmc.firmware_quirks

    def validate(self) -> None:
        """Whether firmware can be read and updated here (an UpdateService); one read."""
        self._service_path()

    def _service_path(self) -> str:
        path = self._bmc.client.service("UpdateService")
        if not path:
            raise BMCUnsupported("the BMC has no UpdateService: firmware cannot be updated or "
                                 "read over Redfish", bmc=self._bmc.name, path="/redfish/v1")
        return path

    def firmware_components(self) -> list[FirmwareComponent]:
        """Every installed component the BMC lists; raises when it publishes no inventory."""
        client = self._bmc.client
        update = client.service("UpdateService")
        inventory = rp.odata_id(client.get(update).get("FirmwareInventory")) if update else None
        if not inventory:
            raise BMCUnsupported("the BMC publishes no UpdateService.FirmwareInventory: "
                                 "firmware versions cannot be read over Redfish",
                                 bmc=self._bmc.name, path="/redfish/v1")
        out = []
        for item in client.members(inventory):
            component = parse_component(item, self._bmc.vendor)
            if component is not None:
                out.append(component)
        return out

    def update_service(self) -> UpdateService:
        """The UpdateService of the BMC (with its SimpleUpdate ActionInfo); raises when there
        is none."""
        client = self._bmc.client
        path = self._service_path()
        body = client.get(path)
        action = rp.action(body, "#UpdateService.SimpleUpdate")
        info_path = action.get("@Redfish.ActionInfo")
        info = None
        if isinstance(info_path, str) and info_path:
            try:
                info = client.get_optional(info_path)
            except (BMCServerError, BMCBadResponse):
                info = None  # an ActionInfo the BMC cannot serve says nothing
        return parse_update_service(path, body, info)

    def plan_update(self, service: UpdateService, *, image_url: str, image_size: int | None,
                    target: str | None, at_reset: bool, kind: str = "device") -> UpdateRequest:
        """The way this image goes to this BMC; raises :class:`NoUpdateWay`, saying why per
        way, when there is none. Sends nothing."""
        try:
            return choose(service, image_url=image_url, image_size=image_size, target=target,
                          at_reset=at_reset, kind=kind, quirks=self.quirks)
        except NoUpdateMethod as exc:
            hint = "update this BMC with the vendor's tool, or its firmware to one whose " \
                "UpdateService takes images (SimpleUpdate or MultipartHttpPushUri)"
            if "fetches only over" in str(exc):
                hint = ("serve images over a protocol its SimpleUpdate lists (settings."
                        "firmware_server.url), or " + hint)
            raise NoUpdateWay(str(exc), bmc=self._bmc.name, path=service.path,
                              hint=hint) from None

    def send_update(self, service: UpdateService, req: UpdateRequest, *, image_url: str,
                    image: Path, timeout_s: float) -> str | None:
        """Send one update the way ``req`` says; returns the task (or task monitor) to poll,
        or None when the BMC names none (then the version read back is the only verdict)."""
        client = self._bmc.client
        if req.method is Method.SIMPLE:
            body: dict[str, Any] = {"ImageURI": image_url}
            if req.protocol:
                body["TransferProtocol"] = req.protocol
            if req.targets:
                body["Targets"] = list(req.targets)
            if req.apply_time:
                body["@Redfish.OperationApplyTime"] = req.apply_time
            return _task_of(client.post(req.uri, body))
        if req.method is Method.MULTIPART:
            params: dict[str, Any] = {**req.parameters, "Targets": list(req.targets)}
            if req.apply_time:
                params["@Redfish.OperationApplyTime"] = req.apply_time
            return _task_of(client.upload(
                req.uri, MultipartBody(image, [("UpdateParameters", params)]),
                timeout_s=timeout_s))
        return self._http_push(service, req, image, timeout_s)

    def _http_push(self, service: UpdateService, req: UpdateRequest, image: Path,
                   timeout_s: float) -> str | None:
        """The legacy push: claim HttpPushUriTargets (honouring another client's claim), set
        them and the apply time, POST the raw image, release the claim."""
        client = self._bmc.client
        staging: dict[str, Any] = {}
        if req.targets:
            current = client.get(service.path)
            if current.get("HttpPushUriTargetsBusy") is True:
                raise BMCServerError(
                    "another client is staging a push update (HttpPushUriTargetsBusy)",
                    bmc=self._bmc.name, path=service.path,
                    hint="wait for the other update to finish, then run the update again")
            staging = {"HttpPushUriTargetsBusy": True, "HttpPushUriTargets": list(req.targets)}
        if req.apply_time:
            staging["HttpPushUriOptions"] = {
                "HttpPushUriApplyTime": {"ApplyTime": req.apply_time}}
        if staging:
            client.patch(service.path, staging)
        try:
            return _task_of(client.upload(req.uri, UploadBody(image), timeout_s=timeout_s))
        finally:
            if req.targets:
                # a BMC rebooting into its new image forgets the claim itself
                with contextlib.suppress(*BMC_AWAY):
                    client.patch(service.path, {"HttpPushUriTargets": [],
                                                "HttpPushUriTargetsBusy": False})

    def wait_update_task(self, task: str, *, timeout_s: float, poll_s: float,
                         until_staged: bool = False) -> str:
        """Poll a task until it ends: 'completed', or 'vanished' when the BMC forgot it (it
        rebooted into the new image), or with ``until_staged`` 'staged' once it waits for
        the host reset (an OnReset update); raises with the BMC's messages when it failed,
        and on timeout. A BMC that does not answer for a while is rebooting, not failing."""
        deadline = self._clock() + timeout_s
        last = "not started"
        while True:
            try:
                body = self._bmc.client.get(task)
            except BMCNotFound:
                return "vanished"
            except BMC_AWAY as exc:
                last = f"BMC not answering ({exc.reason})"
                body = None
            if body is not None:
                state = str(body.get("TaskState") or "")
                if not state or state in DONE_TASK_STATES:
                    # A task monitor answers with the operation's result once done.
                    return "completed"
                if until_staged and _staged(body, self.quirks):
                    return "staged"
                if state in FAILED_TASK_STATES:
                    raise BMCJobFailed(f"firmware task ended {state}: {_messages(body)}",
                                       bmc=self._bmc.name, path=task)
                last = f"{state} {body.get('PercentComplete', '')}".strip()
            if self._clock() >= deadline:
                raise BMCStateTimeout(f"firmware task still {last} after {timeout_s:.0f} s",
                                      bmc=self._bmc.name, path=task,
                                      hint="the BMC may still be flashing: check its task "
                                      "list before retrying")
            self._sleep(poll_s)

    def task_state(self, task: str) -> TaskLook:
        """One look at an update task (an earlier run's, found in its history)."""
        try:
            body = self._bmc.client.get(task)
        except BMCNotFound:
            return TaskLook(task, "vanished", "the BMC no longer lists it")
        except BMC_AWAY as exc:
            return TaskLook(task, "unknown", f"the BMC does not answer ({exc.reason})")
        return _look(task, body, self.quirks)

    def running_tasks(self) -> list[TaskLook]:
        """The tasks the BMC's TaskService lists that have not ended."""
        client = self._bmc.client
        service = client.service("TaskService")
        try:
            tasks = rp.odata_id(client.get(service).get("Tasks")) if service else None
            members = client.members(tasks) if tasks else []
        except BMCNotFound:
            return []  # a BMC without a task list runs no task we could see
        looks = [_look(rp.odata_id(t) or str(tasks), t, self.quirks) for t in members]
        return [look for look in looks if not look.ended]

    def wait_untasked_update(self, service: UpdateService, *, timeout_s: float,
                             poll_s: float) -> None:
        """For an update the BMC answered without a task: wait while the vendor's
        UpdateService progress says it is still flashing; raise when it says the flash
        failed. A BMC without such a report returns at once (the version read back is the
        verdict)."""
        quirks = self.quirks
        if quirks.progress_oem is None:
            return
        deadline = self._clock() + timeout_s
        state = "unknown"
        while True:
            try:
                oem = rp.obj(rp.obj(self._bmc.client.get(service.path).get("Oem"))
                             .get(quirks.progress_oem))
                state = str(oem.get("State") or "")
                if state in quirks.progress_failed:
                    result = rp.obj(oem.get("Result"))
                    raise BMCJobFailed(
                        f"firmware update ended {state}: "
                        f"{result.get('MessageId') or result.get('Message') or 'no message'}",
                        bmc=self._bmc.name, path=service.path)
                if state not in quirks.progress_busy:
                    return
            except BMC_AWAY:
                state = "BMC not answering"
            if self._clock() >= deadline:
                raise BMCStateTimeout(f"firmware update still {state} after {timeout_s:.0f} s",
                                      bmc=self._bmc.name, path=service.path,
                                      hint="the BMC may still be flashing: check it before "
                                      "retrying")
            self._sleep(poll_s)

    def wait_bmc_back(self, *, timeout_s: float, poll_s: float) -> None:
        """Wait for a BMC that reboots after flashing itself to answer again."""
        deadline = self._clock() + timeout_s
        while True:
            try:
                self._bmc.client.get("/redfish/v1")
                return
            except BMC_AWAY:
                if self._clock() >= deadline:
                    raise
                self._sleep(poll_s)


def _task_of(reply: Reply) -> str | None:
    # 202 Accepted names the task monitor in Location; some BMCs answer with the Task itself
    # or a TaskMonitor link. 200/204 with none: done, or the BMC keeps no task.
    monitor = reply.header("Location") or reply.body.get("TaskMonitor")
    if isinstance(monitor, str) and monitor:
        return urlsplit(monitor).path or None
    is_task = "TaskState" in reply.body or "#Task." in str(reply.body.get("@odata.type"))
    return rp.odata_id(reply.body) if is_task else None


def _look(task: str, body: dict[str, Any], quirks: FirmwareQuirks) -> TaskLook:
    state = str(body.get("TaskState") or "")
    detail = f"{state} {body.get('PercentComplete', '')}".strip() + (
        f" ({body.get('Name')})" if body.get("Name") else "")
    if not state or state in DONE_TASK_STATES:
        return TaskLook(task, "completed", detail)
    if state in FAILED_TASK_STATES:
        return TaskLook(task, "failed", f"{state}: {_messages(body)}")
    if _staged(body, quirks):
        return TaskLook(task, "staged", detail)
    return TaskLook(task, "running", detail)


def _staged(body: dict[str, Any], quirks: FirmwareQuirks) -> bool:
    if str(body.get("TaskState") or "") in STAGED_TASK_STATES:
        return True
    oem = rp.obj(body.get("Oem"))
    return any(str(rp.obj(v).get("JobState")) in quirks.staged_job_states
               for v in oem.values())


def _messages(body: dict[str, Any]) -> str:
    texts = [str(m.get("Message") or m.get("MessageId")) for m in body.get("Messages") or []
             if isinstance(m, dict)]
    return "; ".join(texts) or str(body.get("TaskStatus") or "no message")
