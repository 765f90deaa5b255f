"""Updating firmware through a BMC's UpdateService: SimpleUpdate and the task it starts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.errors import (
    BMCJobFailed,
    BMCNotFound,
    BMCServerError,
    BMCStateTimeout,
    BMCTimeout,
    BMCUnreachable,
    BMCUnsupported,
)

DONE_TASK_STATES = frozenset({"Completed"})
FAILED_TASK_STATES = frozenset({"Exception", "Killed", "Cancelled", "Interrupted"})
# While a BMC flashes itself it reboots: these answers mean "not back yet", not "failed".
BMC_AWAY = (BMCUnreachable, BMCTimeout, BMCServerError)


@dataclass(frozen=True)
class UpdateService:
    """What a BMC's UpdateService offers."""

    path: str
    simple_update: str | None  # the SimpleUpdate action target
    protocols: tuple[str, ...]  # TransferProtocol allowable values ((): the BMC does not say)
    push_uri: str | None  # MultipartHttpPushUri or HttpPushUri


def update_service(bmc: RedfishBMC) -> UpdateService:
    """The UpdateService of the BMC; raises when there is none."""
    path = rp.odata_id(bmc.client.root.get("UpdateService"))
    if not path:
        raise BMCUnsupported("the BMC has no UpdateService: firmware cannot be updated over "
                             "Redfish", bmc=bmc.name, path="/redfish/v1")
    body = bmc.client.get(path)
    action = (body.get("Actions") or {}).get("#UpdateService.SimpleUpdate") or {}
    protocols = action.get("TransferProtocol@Redfish.AllowableValues")
    push = body.get("MultipartHttpPushUri") or body.get("HttpPushUri")
    return UpdateService(
        path=path,
        simple_update=action.get("target") if isinstance(action.get("target"), str) else None,
        protocols=tuple(str(p) for p in protocols) if isinstance(protocols, list) else (),
        push_uri=push if isinstance(push, str) else None,
    )


def simple_update(bmc: RedfishBMC, service: UpdateService, image_uri: str,
                  targets: Sequence[str] = ()) -> str | None:
    """Ask the BMC to fetch and apply an image; returns the task (or task monitor) to poll,
    or None when the BMC names none (then the version read back is the only verdict)."""
    if not service.simple_update:
        raise BMCUnsupported(
            "the UpdateService offers no SimpleUpdate action (push updates through "
            f"{service.push_uri or 'an HttpPushUri'} are not supported yet)",
            bmc=bmc.name, path=service.path,
            hint="update this BMC with the vendor's tool, or serve it the image by hand")
    scheme = image_uri.split(":", 1)[0].upper()
    body: dict[str, Any] = {"ImageURI": image_uri}
    if service.protocols and scheme not in service.protocols:
        raise BMCUnsupported(f"the BMC fetches images only over {', '.join(service.protocols)}"
                             f", not {scheme}", bmc=bmc.name, path=service.simple_update)
    if service.protocols:
        body["TransferProtocol"] = scheme
    if targets:
        body["Targets"] = list(targets)
    reply = bmc.client.post(service.simple_update, body)
    return reply.header("Location") or rp.odata_id(reply.body) or None


def wait_task(bmc: RedfishBMC, task: str, *, timeout_s: float, poll_s: float,
              sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> str:
    """Poll a task until it ends: 'completed', or 'vanished' when the BMC forgot it (it
    rebooted into the new image); raises with the BMC's messages when it failed, and on
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
