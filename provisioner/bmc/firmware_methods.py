"""What a BMC's UpdateService offers, and which way an image goes to it: SimpleUpdate (the
BMC fetches it from us), a multipart push, or a raw HttpPushUri push. Pure: it reads the
service's JSON (DMTF UpdateService, ActionInfo) and a vendor's quirks, sends nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from provisioner.bmc import redfish_parse as rp
from provisioner.redfish.errors import BMCUnsupported


class Method(StrEnum):
    """How the image reaches the BMC."""

    SIMPLE = "SimpleUpdate"
    MULTIPART = "MultipartHttpPushUri"
    HTTP_PUSH = "HttpPushUri"


@dataclass(frozen=True)
class FirmwareQuirks:
    """What a vendor's UpdateService does beyond (or instead of) the DMTF schema; set on the
    vendor's BMC class in provisioner/bmc/vendors/."""

    # The package names the component it is for (Dell DUP, HPE fwpkg/bin, Lenovo UXSP):
    # Targets are sent only where the BMC lists that very target as allowed.
    targets_in_image: bool = False
    # The HttpPushUri is the DMTF raw-octet-stream push (HPE's /cgi-bin/uploadFile is not).
    standard_http_push: bool = True
    # Oem job states that mean "image staged, runs at the next host reset" (Dell: Scheduled).
    staged_job_states: frozenset[str] = frozenset()
    # Where an update that has no task shows its progress: ``Oem.<key>.State`` of the
    # UpdateService (iLO), the states that mean "still at it", and those that mean failed.
    progress_oem: str | None = None
    progress_busy: frozenset[str] = frozenset()
    progress_failed: frozenset[str] = frozenset()
    # Push before SimpleUpdate: the push carries options SimpleUpdate cannot (Supermicro:
    # keep the BMC's configuration and the BIOS's NVRAM across the flash).
    prefer_push: bool = False
    # Apply times its multipart push takes although the service does not list them.
    multipart_apply_times: tuple[str, ...] = ()
    # What its multipart UpdateParameters carry besides Targets and the apply time, by kind of
    # component ("bmc", "bios", "device", "nic"; "*": every kind).
    multipart_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The Targets its multipart push names for a kind of component instead of the
    # FirmwareInventory member.
    multipart_targets: dict[str, str] = field(default_factory=dict)


GENERIC = FirmwareQuirks()


@dataclass(frozen=True)
class UpdateService:
    """What a BMC's UpdateService offers."""

    path: str
    simple_update: str | None = None  # the SimpleUpdate action target
    protocols: tuple[str, ...] = ()  # TransferProtocol allowable values ((): not stated)
    # Targets SimpleUpdate takes: None not stated (any), () not a parameter, else these
    # (entries may be patterns such as Supermicro's ``CPLD_Backplane_(\d+)``).
    simple_targets: tuple[str, ...] | None = None
    simple_apply_times: tuple[str, ...] = ()
    multipart_uri: str | None = None
    multipart_apply_times: tuple[str, ...] = ()
    push_uri: str | None = None  # HttpPushUri
    push_targets: bool = False  # HttpPushUriTargets can be set
    push_apply_times: tuple[str, ...] = ()
    max_image_bytes: int | None = None


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _uri(value: Any) -> str | None:
    """A URI of the service as a path on the BMC: an absolute URL keeps only its path, so a
    push never goes anywhere but the BMC the credentials belong to."""
    if not isinstance(value, str) or not value.strip():
        return None
    parts = urlsplit(value.strip())
    path = "/" + parts.path.lstrip("/")
    return path + (f"?{parts.query}" if parts.query else "")


def _supported(annotation: Any) -> tuple[str, ...]:
    return _strings(rp.obj(annotation).get("SupportedValues"))


def parse_update_service(path: str, body: dict[str, Any],
                         action_info: dict[str, Any] | None = None) -> UpdateService:
    """The UpdateService resource (and its SimpleUpdate ActionInfo, when the BMC has one)."""
    action = rp.action(body, "#UpdateService.SimpleUpdate")
    target = _uri(action.get("target"))
    protocols = _strings(action.get("TransferProtocol@Redfish.AllowableValues"))
    targets: tuple[str, ...] | None = None
    if isinstance(action.get("Targets@Redfish.AllowableValues"), list):
        targets = _strings(action["Targets@Redfish.AllowableValues"])
    if action_info is not None:
        params = {str(p.get("Name")): p for p in rp.items(action_info.get("Parameters"))
                  if isinstance(p, dict)}
        info_protocols = _strings(rp.obj(params.get("TransferProtocol")).get("AllowableValues"))
        protocols = protocols or info_protocols
        if "Targets" not in params:
            targets = ()
        elif isinstance(params["Targets"].get("AllowableValues"), list):
            targets = _strings(params["Targets"]["AllowableValues"])
    options = rp.obj(body.get("HttpPushUriOptions"))
    apply = rp.obj(options.get("HttpPushUriApplyTime"))
    size = body.get("MaxImageSizeBytes")
    return UpdateService(
        path=path,
        simple_update=target,
        protocols=tuple(p.upper() for p in protocols),
        simple_targets=targets,
        simple_apply_times=_supported(action.get("@Redfish.OperationApplyTimeSupport")),
        multipart_uri=_uri(body.get("MultipartHttpPushUri")),
        multipart_apply_times=_supported(
            body.get("MultipartHttpPushUri@Redfish.OperationApplyTimeSupport")),
        push_uri=_uri(body.get("HttpPushUri")),
        push_targets="HttpPushUriTargets" in body,
        push_apply_times=_strings(apply.get("ApplyTime@Redfish.AllowableValues")),
        max_image_bytes=size if type(size) is int and size > 0 else None,
    )


@dataclass(frozen=True)
class UpdateRequest:
    """One image to one BMC: the way, the URI it goes to, and what it carries."""

    method: Method
    uri: str
    targets: tuple[str, ...] = ()
    apply_time: str | None = None  # @Redfish.OperationApplyTime / HttpPushUriApplyTime
    protocol: str | None = None  # SimpleUpdate's TransferProtocol
    untargeted: bool = False  # a target was wanted and the BMC takes none: the image decides
    parameters: dict[str, Any] = field(default_factory=dict)  # more UpdateParameters (Oem)

    def describe(self) -> str:
        """How events and the plan name it."""
        bits = [self.method.value]
        if self.targets:
            bits.append(f"Targets {', '.join(self.targets)}")
        if self.apply_time:
            bits.append(f"apply {self.apply_time}")
        if self.untargeted:
            bits.append("no Targets (the image names its component)")
        return ", ".join(bits)


class NoUpdateMethod(ValueError):
    """No way the service offers can take this image; the message says why, per way."""


class NoUpdateWay(BMCUnsupported):
    """A BMC's update service cannot take an image; ``why`` says why, per way."""

    def __init__(self, why: str, *, bmc: str, path: str, hint: str) -> None:
        super().__init__(f"the UpdateService cannot take this image: {why}", bmc=bmc,
                         path=path, hint=hint)
        self.why = why


def _allowed(target: str, allowed: tuple[str, ...]) -> bool:
    for entry in allowed:
        if entry.lstrip("/") == target.lstrip("/"):
            return True
        try:
            if re.fullmatch(entry.lstrip("/"), target.lstrip("/")):
                return True
        except re.error:
            continue
    return False


def _apply_time(supported: tuple[str, ...], at_reset: bool) -> str | None:
    # A component that runs only after a host reset is staged for the reset the update
    # does at the end; anything else is applied now. Sent only where the BMC lists it.
    wanted = "OnReset" if at_reset else "Immediate"
    return wanted if wanted in supported else None


def choose(service: UpdateService, *, image_url: str, image_size: int | None = None,
           target: str | None = None, at_reset: bool = False, kind: str = "device",
           quirks: FirmwareQuirks = GENERIC) -> UpdateRequest:
    """The way this image goes to this BMC: SimpleUpdate where it can fetch our URL and take
    the target, else a multipart push, else a raw HttpPushUri push (a vendor may prefer the
    push). A way that cannot name the target is used only when no way can (the image then
    names its component). ``kind`` is the component's kind for the vendor's push options."""
    scheme = urlsplit(image_url).scheme.upper()
    needs_target = bool(target) and not quirks.targets_in_image
    why: list[str] = []
    untargeted: list[UpdateRequest] = []
    too_big = (service.max_image_bytes is not None and image_size is not None
               and image_size > service.max_image_bytes)

    def offer(req: UpdateRequest | None, can_target: bool) -> UpdateRequest | None:
        if req is None or not needs_target or can_target:
            return req
        untargeted.append(UpdateRequest(req.method, req.uri, (), req.apply_time, req.protocol,
                                        untargeted=True, parameters=req.parameters))
        return None

    def simple() -> UpdateRequest | None:
        if not service.simple_update:
            why.append("no SimpleUpdate action")
            return None
        allowed = service.simple_targets
        if service.protocols and scheme not in service.protocols:
            why.append(f"SimpleUpdate fetches only over {', '.join(service.protocols)}, "
                       f"not {scheme}")
            return None
        explicit = bool(target) and bool(allowed) and _allowed(str(target), allowed or ())
        can = allowed is None or explicit
        send = (str(target),) if target and (explicit or (can and needs_target)) else ()
        chosen = offer(UpdateRequest(Method.SIMPLE, service.simple_update, send,
                                     _apply_time(service.simple_apply_times, at_reset),
                                     scheme if service.protocols else None), can)
        if chosen is None and needs_target:
            why.append(f"SimpleUpdate cannot target {target}")
        return chosen

    def multipart() -> UpdateRequest | None:
        if not service.multipart_uri:
            why.append("no MultipartHttpPushUri")
            return None
        if too_big:
            why.append(f"the image ({image_size} bytes) exceeds MaxImageSizeBytes "
                       f"({service.max_image_bytes})")
            return None
        named = quirks.multipart_targets.get(kind)
        targets = (named,) if named else (str(target),) if needs_target else ()
        params = {**quirks.multipart_params.get("*", {}), **quirks.multipart_params.get(kind, {})}
        times = service.multipart_apply_times or quirks.multipart_apply_times
        return offer(UpdateRequest(Method.MULTIPART, service.multipart_uri, targets,
                                   _apply_time(times, at_reset), parameters=params), True)

    def http_push() -> UpdateRequest | None:
        if not service.push_uri:
            why.append("no HttpPushUri")
            return None
        if not quirks.standard_http_push:
            why.append(f"its HttpPushUri ({service.push_uri}) is not the DMTF push")
            return None
        if too_big:
            why.append(f"the image ({image_size} bytes) exceeds MaxImageSizeBytes "
                       f"({service.max_image_bytes})")
            return None
        return offer(UpdateRequest(
            Method.HTTP_PUSH, service.push_uri,
            (str(target),) if needs_target and service.push_targets else (),
            _apply_time(service.push_apply_times, at_reset)), service.push_targets)

    ways = (multipart, simple, http_push) if quirks.prefer_push else (
        simple, multipart, http_push)
    for way in ways:
        if chosen := way():
            return chosen
    if untargeted:
        return untargeted[0]
    raise NoUpdateMethod("; ".join(dict.fromkeys(why)))


@dataclass(frozen=True)
class TaskLook:
    """One look at an update task: ``running``, ``staged`` (waiting for a host reset),
    ``completed``, ``failed``, ``vanished`` (the BMC forgot it) or ``unknown`` (the BMC did
    not answer), and what it says of itself."""

    path: str
    state: str
    detail: str = ""

    @property
    def ended(self) -> bool:
        """Whether nothing more will happen to it."""
        return self.state in ("completed", "failed", "vanished")
