"""Updating firmware through a BMC's UpdateService: SimpleUpdate or a push of the image, and
the task it starts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.firmware_methods import (
    GENERIC,
    FirmwareQuirks,
    Method,
    NoUpdateMethod,
    UpdateRequest,
    UpdateService,
    choose,
    parse_update_service,
)
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.client import Reply
from provisioner.redfish.errors import (
    BMCBadResponse,
    BMCJobFailed,
    BMCNotFound,
    BMCServerError,
    BMCStateTimeout,
    BMCTimeout,
    BMCUnreachable,
    BMCUnsupported,
)
from provisioner.redfish.upload import MultipartBody, UploadBody

DONE_TASK_STATES = frozenset({"Completed"})
FAILED_TASK_STATES = frozenset({"Exception", "Killed", "Cancelled", "Interrupted"})
# An OnReset update's task waits for the host reset in one of these (DMTF TaskState).
STAGED_TASK_STATES = frozenset({"Pending", "Suspended"})
# While a BMC flashes itself it reboots: these answers mean "not back yet", not "failed".
BMC_AWAY = (BMCUnreachable, BMCTimeout, BMCServerError)


def update_service(bmc: RedfishBMC) -> UpdateService:
    """The UpdateService of the BMC (with its SimpleUpdate ActionInfo); raises when there is
    none."""
    path = bmc.client.service("UpdateService")
    if not path:
        raise BMCUnsupported("the BMC has no UpdateService: firmware cannot be updated over "
                             "Redfish", bmc=bmc.name, path="/redfish/v1")
    body = bmc.client.get(path)
    action = rp.action(body, "#UpdateService.SimpleUpdate")
    info_path = action.get("@Redfish.ActionInfo")
    info = None
    if isinstance(info_path, str) and info_path:
        try:
            info = bmc.client.get_optional(info_path)
        except (BMCServerError, BMCBadResponse):
            info = None  # an ActionInfo the BMC cannot serve says nothing
    return parse_update_service(path, body, info)


def quirks_of(bmc: RedfishBMC) -> FirmwareQuirks:
    """The vendor's UpdateService quirks (its BMC class's ``firmware_quirks``)."""
    quirks = getattr(bmc, "firmware_quirks", GENERIC)
    return quirks if isinstance(quirks, FirmwareQuirks) else GENERIC


def plan_request(bmc: RedfishBMC, service: UpdateService, *, image_url: str,
                 image_size: int | None, target: str | None, at_reset: bool,
                 kind: str = "device") -> UpdateRequest:
    """The way this image goes to this BMC; raises, saying why per way, when there is none."""
    try:
        return choose(service, image_url=image_url, image_size=image_size, target=target,
                      at_reset=at_reset, kind=kind, quirks=quirks_of(bmc))
    except NoUpdateMethod as exc:
        hint = "update this BMC with the vendor's tool, or its firmware to one whose " \
            "UpdateService takes images (SimpleUpdate or MultipartHttpPushUri)"
        if "fetches only over" in str(exc):
            hint = ("serve images over a protocol its SimpleUpdate lists (settings."
                    "firmware_server.url), or " + hint)
        raise BMCUnsupported(f"the UpdateService cannot take this image: {exc}",
                             bmc=bmc.name, path=service.path, hint=hint) from None


def send_update(bmc: RedfishBMC, service: UpdateService, req: UpdateRequest, *,
                image_url: str, image: Path, timeout_s: float) -> str | None:
    """Send one update the way ``req`` says; returns the task (or task monitor) to poll, or
    None when the BMC names none (then the version read back is the only verdict)."""
    if req.method is Method.SIMPLE:
        body: dict[str, Any] = {"ImageURI": image_url}
        if req.protocol:
            body["TransferProtocol"] = req.protocol
        if req.targets:
            body["Targets"] = list(req.targets)
        if req.apply_time:
            body["@Redfish.OperationApplyTime"] = req.apply_time
        return _task_of(bmc.client.post(req.uri, body))
    if req.method is Method.MULTIPART:
        params: dict[str, Any] = {**req.parameters, "Targets": list(req.targets)}
        if req.apply_time:
            params["@Redfish.OperationApplyTime"] = req.apply_time
        return _task_of(bmc.client.upload(
            req.uri, MultipartBody(image, [("UpdateParameters", params)]), timeout_s=timeout_s))
    return _http_push(bmc, service, req, image, timeout_s)


def _http_push(bmc: RedfishBMC, service: UpdateService, req: UpdateRequest, image: Path,
               timeout_s: float) -> str | None:
    """The legacy push: claim HttpPushUriTargets (honouring another client's claim), set
    them and the apply time, POST the raw image, release the claim."""
    staging: dict[str, Any] = {}
    if req.targets:
        current = bmc.client.get(service.path)
        if current.get("HttpPushUriTargetsBusy") is True:
            raise BMCServerError(
                "another client is staging a push update (HttpPushUriTargetsBusy)",
                bmc=bmc.name, path=service.path,
                hint="wait for the other update to finish, then run the update again")
        staging = {"HttpPushUriTargetsBusy": True, "HttpPushUriTargets": list(req.targets)}
    if req.apply_time:
        staging["HttpPushUriOptions"] = {"HttpPushUriApplyTime": {"ApplyTime": req.apply_time}}
    if staging:
        bmc.client.patch(service.path, staging)
    try:
        return _task_of(bmc.client.upload(req.uri, UploadBody(image), timeout_s=timeout_s))
    finally:
        if req.targets:
            # a BMC rebooting into its new image forgets the claim itself
            with contextlib.suppress(*BMC_AWAY):
                bmc.client.patch(service.path, {"HttpPushUriTargets": [],
                                                "HttpPushUriTargetsBusy": False})


def _task_of(reply: Reply) -> str | None:
    # 202 Accepted names the task monitor in Location; some BMCs answer with the Task itself
    # or a TaskMonitor link. 200/204 with none: done, or the BMC keeps no task.
    monitor = reply.header("Location") or reply.body.get("TaskMonitor")
    if isinstance(monitor, str) and monitor:
        return urlsplit(monitor).path or None
    is_task = "TaskState" in reply.body or "#Task." in str(reply.body.get("@odata.type"))
    return rp.odata_id(reply.body) if is_task else None


def wait_task(bmc: RedfishBMC, task: str, *, timeout_s: float, poll_s: float,
              until_staged: bool = False,
              sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> str:
    """Poll a task until it ends: 'completed', or 'vanished' when the BMC forgot it (it
    rebooted into the new image), or with ``until_staged`` 'staged' once it waits for the
    host reset (an OnReset update); raises with the BMC's messages when it failed, and on
    timeout. A BMC that does not answer for a while is rebooting, not failing."""
    deadline = clock() + timeout_s
    last = "not started"
    while True:
        try:
            body = bmc.client.get(task)
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
            if until_staged and _staged(body, quirks_of(bmc)):
                return "staged"
            if state in FAILED_TASK_STATES:
                raise BMCJobFailed(f"firmware task ended {state}: {_messages(body)}",
                                   bmc=bmc.name, path=task)
            last = f"{state} {body.get('PercentComplete', '')}".strip()
        if clock() >= deadline:
            raise BMCStateTimeout(f"firmware task still {last} after {timeout_s:.0f} s",
                                  bmc=bmc.name, path=task,
                                  hint="the BMC may still be flashing: check its task list "
                                  "before retrying")
        sleep(poll_s)


def wait_untasked(bmc: RedfishBMC, service: UpdateService, *, timeout_s: float,
                  poll_s: float, sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> None:
    """For an update the BMC answered without a task: wait while the vendor's UpdateService
    progress says it is still flashing; raise when it says the flash failed. A BMC without
    such a report returns at once (the version read back is the verdict)."""
    quirks = quirks_of(bmc)
    if quirks.progress_oem is None:
        return
    deadline = clock() + timeout_s
    state = "unknown"
    while True:
        try:
            oem = rp.obj(rp.obj(bmc.client.get(service.path).get("Oem")).get(quirks.progress_oem))
            state = str(oem.get("State") or "")
            if state in quirks.progress_failed:
                result = rp.obj(oem.get("Result"))
                raise BMCJobFailed(
                    f"firmware update ended {state}: "
                    f"{result.get('MessageId') or result.get('Message') or 'no message'}",
                    bmc=bmc.name, path=service.path)
            if state not in quirks.progress_busy:
                return
        except BMC_AWAY:
            state = "BMC not answering"
        if clock() >= deadline:
            raise BMCStateTimeout(f"firmware update still {state} after {timeout_s:.0f} s",
                                  bmc=bmc.name, path=service.path,
                                  hint="the BMC may still be flashing: check it before "
                                  "retrying")
        sleep(poll_s)


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


def wait_until_back(bmc: RedfishBMC, *, timeout_s: float, poll_s: float,
                    sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> None:
    """Wait for a BMC that reboots after flashing itself to answer again."""
    deadline = clock() + timeout_s
    while True:
        try:
            bmc.client.get("/redfish/v1")
            return
        except BMC_AWAY:
            if clock() >= deadline:
                raise
            sleep(poll_s)
