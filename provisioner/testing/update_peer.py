"""A stand-in BMC UpdateService, written by the project from the DMTF Redfish schema
(UpdateService SimpleUpdate, MultipartHttpPushUri, HttpPushUri/HttpPushUriTargets, Task,
SoftwareInventory, ComputerSystem.Reset, OperationApplyTime).

sushy-tools 2.2 (libvirt driver) answers SimpleUpdate for a System (BIOS) target only: it bumps
the BiosVersion without fetching the image and runs no task; Manager targets, push URIs and
other components it refuses. This peer does what a BMC does for every component, over real
HTTP on loopback, and passes DMTF's Redfish Service Validator
(tests/integration/redfish/test_redfish_standin_validators.py): it fetches the ImageURI it is
given (from the updater's image server), or takes
the image pushed to it (multipart/form-data parsed with its UpdateParameters JSON, or a raw
octet stream after HttpPushUriTargets were set), reads which component and version the image
carries, runs a task that the client polls, and changes the inventory as the mode says. A
pushed image whose sha256 is not the one the test expects is refused by its task. Images are
text: ``STANDIN-FW component=<Id> version=<v>``.

Ways offered (``methods``): simple, multipart, push; none at all is a BMC without any. The
System's Manufacturer can be set so that the updater treats the peer as that vendor's BMC.
Modes per component: ok, fail (task ends in Exception with a message), reboot (the BMC goes
away for a moment mid-task and forgets the task), staged (the version shows only after a host
reset), noop (the task completes and nothing changes), hold (the task stays Running until
the test calls ``release()``: an update the BMC is still flashing when its client dies).
``systems`` lists the ComputerSystems the BMC serves (a blade's nodes: ``Node0``, ``Node1``). An update sent with
``@Redfish.OperationApplyTime: OnReset`` waits in TaskState Pending until the host reset.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import requests
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from provisioner.testing.redfish_peers import fault_proxy, free_port, make_tls

ROOT = "/redfish/v1"
FW = f"{ROOT}/UpdateService/FirmwareInventory"
IMAGE_RE = re.compile(rb"STANDIN-FW component=(\S+) version=(\S+)")
PUSH_MULTIPART = f"{ROOT}/UpdateService/upload"
PUSH_RAW = f"{ROOT}/UpdateService/push"
TASK_TYPE = "#Task.v1_7_0.Task"
SESSIONS = f"{ROOT}/SessionService/Sessions"


@dataclass
class Task:
    """One update task."""

    id: int
    target: str
    version: str | None
    error: str | None
    on_reset: bool = False
    polls: int = 0
    state: str = "Running"


@dataclass
class UpdatePeer:
    """The BMC's state, and what it was sent."""

    user: str
    password: str
    inventory: dict[str, dict[str, Any]]
    modes: dict[str, str] = field(default_factory=dict)
    power: str = "On"
    resets: list[str] = field(default_factory=list)
    reset_systems: list[str] = field(default_factory=list)  # which System each reset was of
    systems: tuple[str, ...] = ("1",)
    released: bool = False  # hold-mode tasks may finish
    tasks: dict[int, Task] = field(default_factory=dict)
    staged: dict[str, str] = field(default_factory=dict)
    fetched: list[str] = field(default_factory=list)  # image URIs the BMC fetched
    seen: list[tuple[str, str, dict[str, str], str]] = field(default_factory=list)
    methods: frozenset[str] = frozenset({"simple"})
    protocols: tuple[str, ...] = ("HTTP", "HTTPS")  # SimpleUpdate's TransferProtocol
    apply_times: tuple[str, ...] = ("Immediate", "OnReset")  # for pushes
    expect_sha256: dict[str, str] = field(default_factory=dict)  # component: pushed image
    received: list[dict[str, Any]] = field(default_factory=list)  # pushed images
    push_targets: list[str] = field(default_factory=list)  # HttpPushUriTargets
    push_busy: bool = False  # HttpPushUriTargetsBusy
    push_apply_time: str = "Immediate"
    push_without_task: bool = False  # a push answers 204 and installs at once
    manufacturer: str = "Contoso"
    simple_apply_times: tuple[str, ...] = ()  # SimpleUpdate's OperationApplyTimeSupport
    # How a task waiting for the host reset shows: "Pending" (DMTF TaskState) or "dell"
    # (TaskState Running, Oem.Dell.JobState Scheduled, as iDRAC reports a scheduled job).
    staged_as: str = "Pending"
    # iLO-like: SimpleUpdate answers 200 without a task; the flash shows in the
    # UpdateService's Oem.Hpe.State (Writing, then Idle, or Error).
    hpe_progress: bool = False
    hpe_flash: dict[str, Any] = field(default_factory=dict)
    # Targets that name a component by another resource (Supermicro: the Manager is the BMC).
    target_aliases: dict[str, str] = field(default_factory=dict)
    polls_to_finish: int = 2
    down_s: float = 1.0
    server: BaseWSGIServer | None = None
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- HTTP ------------------------------------------------------------------------------

    def __call__(self, environ, start_response):  # type: ignore[no-untyped-def]
        request = Request(environ)
        request.max_form_memory_size = 1 << 20  # the JSON part; the image goes to a file
        body = request.get_data(as_text=True)
        self.seen.append((request.method, request.path, dict(request.headers), body))
        return self._handle(request, body)(environ, start_response)

    def _handle(self, request: Request, body: str) -> Response:
        path = request.path.rstrip("/")
        if path == SESSIONS and request.method == "POST":
            # Basic authentication only (SessionService disabled): a login is refused as not
            # allowed, before any credential check, and the client uses basic auth.
            return _error(405, "sessions are not offered; use basic authentication")
        # The service root answers without credentials (Redfish spec); nothing else does.
        if path != ROOT and not self._authorised(request):
            return _json({"error": {"message": "authentication required"}}, 401)
        with self.lock:
            if request.method == "GET":
                return self._get(path)
            if (request.method == "POST" and path.endswith("UpdateService.SimpleUpdate")
                    and "simple" in self.methods):
                return self._simple_update(json.loads(body or "{}"))
            if request.method == "POST" and path == PUSH_MULTIPART and "multipart" in self.methods:
                return self._multipart(request)
            if request.method == "POST" and path == PUSH_RAW and "push" in self.methods:
                return self._raw_push(request)
            if request.method == "PATCH" and path == f"{ROOT}/UpdateService":
                return self._patch_service(json.loads(body or "{}"))
            if request.method == "POST" and path.endswith("ComputerSystem.Reset"):
                self.reset_systems.append(path.split("/Systems/", 1)[-1].split("/", 1)[0])
                return self._reset(json.loads(body or "{}"))
        return _json({"error": {"message": f"{request.method} {path} not allowed"}}, 405)

    def _authorised(self, request: Request) -> bool:
        want = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return request.headers.get("Authorization") == f"Basic {want}"

    def _get(self, path: str) -> Response:
        # Every resource as the DMTF schema has it (checked by DMTF's Redfish Service
        # Validator: tests/integration/redfish/test_redfish_standin_validators.py).
        docs: dict[str, dict[str, Any]] = {
            ROOT: {"@odata.id": ROOT, "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
                   "Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.15.0",
                   "Systems": {"@odata.id": f"{ROOT}/Systems"},
                   "UpdateService": {"@odata.id": f"{ROOT}/UpdateService"},
                   "Tasks": {"@odata.id": f"{ROOT}/TaskService"},
                   "SessionService": {"@odata.id": f"{ROOT}/SessionService"},
                   "Links": {"Sessions": {"@odata.id": SESSIONS}}},
            # Basic authentication only: no session is ever made, the collection stays empty.
            f"{ROOT}/SessionService": {
                "@odata.id": f"{ROOT}/SessionService",
                "@odata.type": "#SessionService.v1_1_9.SessionService", "Id": "SessionService",
                "Name": "Session Service", "ServiceEnabled": False,
                "Sessions": {"@odata.id": SESSIONS}},
            SESSIONS: _collection(SESSIONS, "SessionCollection", "Sessions", []),
            f"{ROOT}/Systems": _collection(f"{ROOT}/Systems", "ComputerSystemCollection",
                                           "Computer System Collection",
                                           [f"{ROOT}/Systems/{i}" for i in self.systems]),
            **{f"{ROOT}/Systems/{i}": {
                "@odata.id": f"{ROOT}/Systems/{i}",
                "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": i,
                "Name": f"Stand-in host {i}", "Manufacturer": self.manufacturer,
                "Model": "Stand-in 1U", "SerialNumber": f"STANDIN-{i}", "PowerState": self.power,
                "Actions": {"#ComputerSystem.Reset": {
                    "target": f"{ROOT}/Systems/{i}/Actions/ComputerSystem.Reset",
                    "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart",
                                                          "GracefulShutdown"]}}}
               for i in self.systems},
            f"{ROOT}/UpdateService": self._service(),
            FW: _collection(FW, "SoftwareInventoryCollection", "Firmware Inventory",
                            [f"{FW}/{i}" for i in self.inventory]),
            f"{ROOT}/TaskService": {
                "@odata.id": f"{ROOT}/TaskService", "@odata.type": "#TaskService.v1_2_0.TaskService",
                "Id": "TaskService", "Name": "Task Service", "ServiceEnabled": True,
                "Tasks": {"@odata.id": f"{ROOT}/TaskService/Tasks"}},
            f"{ROOT}/TaskService/Tasks": _collection(
                f"{ROOT}/TaskService/Tasks", "TaskCollection", "Tasks",
                [f"{ROOT}/TaskService/Tasks/{i}" for i in self.tasks]),
        }
        for ident, item in self.inventory.items():
            docs[f"{FW}/{ident}"] = {"@odata.id": f"{FW}/{ident}",
                                     "@odata.type": "#SoftwareInventory.v1_9_0.SoftwareInventory",
                                     "Id": ident, "Name": ident, **item}
        match = re.fullmatch(rf"{ROOT}/TaskService/Tasks/(\d+)", path)
        if match:
            return self._poll(int(match.group(1)))
        if path in docs:
            return _json(docs[path])
        return _json({"error": {"message": f"{path} not found"}}, 404)

    def _service(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"@odata.id": f"{ROOT}/UpdateService",
                               "@odata.type": "#UpdateService.v1_11_0.UpdateService",
                               "Id": "UpdateService", "Name": "Update Service",
                               "ServiceEnabled": True,
                               "FirmwareInventory": {"@odata.id": FW}, "Actions": {}}
        if "simple" in self.methods:
            doc["Actions"]["#UpdateService.SimpleUpdate"] = {
                "target": f"{ROOT}/UpdateService/Actions/UpdateService.SimpleUpdate",
                "TransferProtocol@Redfish.AllowableValues": list(self.protocols)}
            if self.simple_apply_times:
                doc["Actions"]["#UpdateService.SimpleUpdate"][
                    "@Redfish.OperationApplyTimeSupport"] = {
                        "SupportedValues": list(self.simple_apply_times)}
        if "multipart" in self.methods:
            doc["MultipartHttpPushUri"] = PUSH_MULTIPART
            doc["MultipartHttpPushUri@Redfish.OperationApplyTimeSupport"] = {
                "SupportedValues": list(self.apply_times)}
        if "push" in self.methods:
            doc.update({"HttpPushUri": PUSH_RAW, "HttpPushUriTargets": self.push_targets,
                        "HttpPushUriTargetsBusy": self.push_busy,
                        "HttpPushUriOptions": {"HttpPushUriApplyTime": {
                            "ApplyTime": self.push_apply_time,
                            "ApplyTime@Redfish.AllowableValues": list(self.apply_times)}}})
        if self.hpe_progress:
            doc["Oem"] = {"Hpe": self._hpe_state()}
        return doc

    def _hpe_state(self) -> dict[str, Any]:
        flash = self.hpe_flash
        if not flash:
            return {"State": "Idle"}
        flash["polls"] += 1
        if flash["polls"] < self.polls_to_finish:
            return {"State": "Writing", "FlashProgressPercent": 40}
        self.hpe_flash = {}
        if flash["error"] or self.modes.get(flash["target"]) == "fail":
            return {"State": "Error", "Result": {"MessageId": "iLO.2.14.UpdateFailed"}}
        if self.modes.get(flash["target"], "ok") == "ok":
            self.inventory[flash["target"]]["Version"] = flash["version"]
        return {"State": "Complete", "FlashProgressPercent": 100}

    # -- behaviour -------------------------------------------------------------------------

    def _simple_update(self, body: dict[str, Any]) -> Response:
        uri = str(body.get("ImageURI") or "")
        targets = body.get("Targets") or []
        target = str(targets[0]).rsplit("/", 1)[-1] if targets else ""
        self.fetched.append(uri)
        error, version = None, None
        try:
            error, version, target = _judge_image(requests.get(uri, timeout=5).content, target)
        except requests.RequestException as exc:
            error = f"image download failed: {type(exc).__name__}"
        if self.hpe_progress:
            self.hpe_flash = {"target": target, "version": version, "error": error,
                              "polls": 0}
            return _json({"error": {"code": "iLO.0.10.ExtendedInfo", "@Message.ExtendedInfo": [
                {"MessageId": "Base.1.4.Success"}]}})
        return self._task(Task(id=len(self.tasks) + 1, target=target, version=version,
                                error=error, on_reset=body.get("@Redfish.OperationApplyTime")
                                == "OnReset"))

    def _task(self, task: Task) -> Response:
        self.tasks[task.id] = task
        location = f"{ROOT}/TaskService/Tasks/{task.id}"
        return _json({"@odata.id": location, "@odata.type": TASK_TYPE, "Id": str(task.id),
                      "Name": f"Task {task.id}", "TaskState": "Running"},
                     202, {"Location": location})

    def _multipart(self, request: Request) -> Response:
        if request.mimetype != "multipart/form-data":
            return _error(415, f"expected multipart/form-data, got {request.mimetype}")
        upload = request.files.get("UpdateFile")
        raw = request.form.get("UpdateParameters")
        if upload is None or raw is None:
            return _error(400, "UpdateParameters and UpdateFile parts are required")
        try:
            params = json.loads(raw)
        except ValueError:
            return _error(400, "UpdateParameters is not JSON")
        if not isinstance(params, dict) or not isinstance(params.get("Targets", []), list):
            return _error(400, "UpdateParameters.Targets must be an array")
        apply = params.get("@Redfish.OperationApplyTime")
        if apply is not None and apply not in self.apply_times:
            return _error(400, f"@Redfish.OperationApplyTime {apply} is not supported")
        return self._install(upload.stream, "multipart", params.get("Targets", []), apply,
                             params)

    def _raw_push(self, request: Request) -> Response:
        if request.mimetype != "application/octet-stream":
            return _error(415, f"expected application/octet-stream, got {request.mimetype}")
        # the body was read (and kept) for the request log
        return self._install(_Bytes(request.get_data()), "push", list(self.push_targets),
                             self.push_apply_time, {})

    def _install(self, stream: Any, method: str, targets: list[Any], apply: Any,
                 params: dict[str, Any]) -> Response:
        targets = [self.target_aliases.get(t, t) if isinstance(t, str) else t for t in targets]
        for t in targets:
            if not isinstance(t, str) or t.rstrip("/").rsplit("/", 1)[-1] not in self.inventory:
                return _error(400, f"Targets names {t!r}, which is not in FirmwareInventory")
        digest, head, size = hashlib.sha256(), b"", 0
        while chunk := stream.read(65536):
            digest.update(chunk)
            head = head or chunk[:256]
            size += len(chunk)
        target = str(targets[0]).rstrip("/").rsplit("/", 1)[-1] if targets else ""
        self.received.append({"method": method, "targets": list(targets), "apply": apply,
                              "sha256": digest.hexdigest(), "size": size, "params": params})
        error, version, target = _judge_image(head, target)
        if error is None:
            want = self.expect_sha256.get(target)
            if want and want != digest.hexdigest():
                error, version = f"image checksum {digest.hexdigest()} is not {want}", None
        if self.push_without_task and not error:
            if self.modes.get(target, "ok") == "ok" and version:
                self.inventory[target]["Version"] = version
            return Response(status=204)
        return self._task(Task(id=len(self.tasks) + 1, target=target, version=version,
                               error=error, on_reset=apply == "OnReset"))

    def _patch_service(self, body: dict[str, Any]) -> Response:
        if "push" not in self.methods:
            return _error(405, "UpdateService is read-only")
        if body.get("HttpPushUriTargetsBusy") is True and self.push_busy:
            return _error(409, "HttpPushUriTargetsBusy: another client holds the targets")
        if "HttpPushUriTargets" in body:
            self.push_targets = list(body["HttpPushUriTargets"])
        if "HttpPushUriTargetsBusy" in body:
            self.push_busy = bool(body["HttpPushUriTargetsBusy"])
        apply = ((body.get("HttpPushUriOptions") or {}).get("HttpPushUriApplyTime") or {}
                 ).get("ApplyTime")
        if apply is not None:
            if apply not in self.apply_times:
                return _error(400, f"ApplyTime {apply} is not supported")
            self.push_apply_time = apply
        return Response(status=204)

    def _poll(self, task_id: int) -> Response:
        task = self.tasks.get(task_id)
        if task is None:
            return _json({"error": {"message": "no such task"}}, 404)
        task.polls += 1
        mode = self.modes.get(task.target, "ok")
        if task.error:
            task.state = "Exception"
        elif mode == "hold" and not self.released:
            pass  # still flashing: the test releases it
        elif task.polls >= self.polls_to_finish and task.state == "Running" and task.on_reset:
            task.state = "Pending"  # the image is staged; it runs at the host reset
        elif task.polls >= self.polls_to_finish and task.state == "Running":
            task.state = "Exception" if mode == "fail" else "Completed"
            if mode in ("ok", "reboot", "hold") and task.version:
                self.inventory[task.target]["Version"] = task.version
            elif mode == "staged" and task.version:
                self.staged[task.target] = task.version
            if mode == "reboot":
                # The BMC restarts into the new image: gone for a moment, task list empty.
                del self.tasks[task_id]
                threading.Thread(target=self._reboot, daemon=True).start()
        messages = []
        if task.state == "Exception":
            messages = [{"MessageId": "Update.1.0.ApplyFailed",
                         "Message": task.error or "Update failed: image signature invalid"}]
        doc: dict[str, Any] = {
            "@odata.id": f"{ROOT}/TaskService/Tasks/{task_id}", "@odata.type": TASK_TYPE,
            "Id": str(task_id), "Name": f"Task {task_id}", "TaskState": task.state, "PercentComplete": 50 if task.state == "Running" else 100,
            "Messages": messages}
        if task.state == "Pending" and self.staged_as == "dell":
            doc["TaskState"] = "Running"
            doc["Oem"] = {"Dell": {"JobState": "Scheduled", "JobType": "FirmwareUpdate",
                                   "Message": "Task successfully scheduled."}}
        return _json(doc)

    def _reset(self, body: dict[str, Any]) -> Response:
        reset = str(body.get("ResetType"))
        self.resets.append(reset)
        if reset in ("On", "ForceRestart"):
            self.power = "On"
            for target, version in self.staged.items():
                self.inventory[target]["Version"] = version
            self.staged.clear()
            for task in self.tasks.values():
                if task.state == "Pending":
                    failed = self.modes.get(task.target, "ok") == "fail"
                    task.state = "Exception" if failed else "Completed"
                    if not failed and task.version and self.modes.get(task.target) != "noop":
                        self.inventory[task.target]["Version"] = task.version
        elif reset in ("ForceOff", "GracefulShutdown"):
            self.power = "Off"
        return Response(status=204)

    def _reboot(self) -> None:
        time.sleep(0.05)  # let the answer that announced completion go out first
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()
        time.sleep(self.down_s)
        self._start()

    def _start(self) -> None:
        self.server = make_server("127.0.0.1", self.port, self, threaded=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """Base URL of the peer."""
        return f"http://127.0.0.1:{self.port}"

    def release(self) -> None:
        """Let tasks of components in ``hold`` mode finish."""
        with self.lock:
            self.released = True

    def updates(self) -> list[str]:
        """The images the BMC was sent, in order (SimpleUpdate fetches and pushes)."""
        return [*self.fetched, *(str(r["targets"]) for r in self.received)]


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, size: int) -> bytes:
        chunk = self.data[self.at:self.at + size]
        self.at += len(chunk)
        return chunk


def _collection(uri: str, kind: str, name: str, members: list[str]) -> dict[str, Any]:
    return {"@odata.id": uri, "@odata.type": f"#{kind}.{kind}", "Name": name,
            "Members": [{"@odata.id": m} for m in members], "Members@odata.count": len(members)}


def _error(status: int, message: str) -> Response:
    return _json({"error": {"code": "Base.1.0.GeneralError", "message": message,
                            "@Message.ExtendedInfo": [{"MessageId": "Base.1.0.GeneralError",
                                                       "Message": message}]}}, status)


def _json(doc: dict[str, Any], status: int = 200,
          headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(doc), status=status, mimetype="application/json",
                    headers=headers or {})


@contextmanager
def update_peer(user: str, password: str, inventory: dict[str, dict[str, Any]],
                modes: dict[str, str] | None = None, **options: Any) -> Iterator[UpdatePeer]:
    """Run a stand-in UpdateService BMC on loopback for the duration; ``options`` set the
    peer's fields (methods, protocols, apply_times, expect_sha256, push_without_task...)."""
    peer = UpdatePeer(user, password, {k: dict(v) for k, v in inventory.items()},
                      modes=dict(modes or {}), port=free_port("127.0.0.1"), **options)
    with running(peer):
        yield peer


class _Served(Protocol):
    server: BaseWSGIServer | None

    def _start(self) -> None: ...


@contextmanager
def running(peer: _Served) -> Iterator[None]:
    """A stand-in peer listening for the duration (its own ``_start``), then stopped."""
    peer._start()
    try:
        yield
    finally:
        if peer.server is not None:
            peer.server.shutdown()
            peer.server.server_close()


def image_bytes(component: str, version: str) -> bytes:
    """A stand-in firmware image for ``component`` at ``version``."""
    return f"STANDIN-FW component={component} version={version}\n".encode() + b"\0" * 4096


def _judge_image(data: bytes, target: str) -> tuple[str | None, str | None, str]:
    """(error, version installed, target) for an image that arrived for ``target`` ("" = any)."""
    found = IMAGE_RE.search(data)
    if not found:
        return "image is not a firmware image for this system", None, target
    if target and found.group(1).decode() != target:
        return f"image is for {found.group(1).decode()}, not {target}", None, target
    return None, found.group(2).decode(), target or found.group(1).decode()


PeerSpec = tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, Any]]


def firmware_rack_site(stack: ExitStack, tmp: Path, site: str, user: str, password: str,
                       peers: dict[str, PeerSpec], profile_of: dict[str, str],
                       profiles: Callable[[Path], str],
                       nodes: dict[str, dict[str, str]] | None = None
                       ) -> tuple[Path, dict[str, UpdatePeer]]:
    """A site file whose hosts are stand-in UpdateService BMCs behind TLS proxies (one per
    ``peers`` entry: inventory, modes, options); the site reads the password from
    $FW_BMC_PASSWORD and ``profiles(images_dir)`` writes the profiles' baselines. A peer
    named in ``nodes`` is a blade BMC: one host per entry (host name: its System Id) instead
    of one host named after the peer. The peers live as long as ``stack``."""
    tls = make_tls(tmp / "tls")
    site_dir, images, logs = tmp / "site", tmp / "images", tmp / "logs"
    for d in (site_dir, images, logs):
        d.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    started: dict[str, UpdatePeer] = {}
    lines: list[str] = []
    for name, (inventory, modes, options) in peers.items():
        peer = stack.enter_context(update_peer(user, password, inventory, modes, **options))
        (url,) = stack.enter_context(fault_proxy(peer.url, logs, tls=tls))
        started[name] = peer
        port = urlsplit(url).port
        for host, system in (nodes or {}).get(name, {name: ""}).items():
            pick = f", system: {system}" if system else ""
            lines.append(f"      - {{u: {len(lines) + 1}, name: {host}, "
                         f"profile: {profile_of[host]}, "
                         f"bmc: {{address: 127.0.0.1, port: {port}{pick}}}}}")
    path = site_dir / "site.yml"
    path.write_text(
        f"site: {site}\nsettings:\n"
        "  redfish: {ca_bundle: bmc-ca.pem, timeout_s: 2, retries: 0}\n"
        f"  firmware_server: {{url: 'http://127.0.0.1:{free_port('127.0.0.1')}', "
        "listen: 127.0.0.1}\n"
        f"credentials:\n  bmc: {{username: {user}, password: {{env: FW_BMC_PASSWORD}}}}\n"
        + profiles(images)
        + "racks:\n  - name: r1\n    index: 1\n    defaults: {bmc: {credentials: bmc}}\n"
        "    hosts:\n" + "\n".join(lines) + "\n")
    return path, started

