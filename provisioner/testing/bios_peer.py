"""A stand-in BMC for BIOS settings, written by the project from the DMTF Redfish schema (Bios,
Settings annotation, AttributeRegistry with Dependencies, MessageRegistryFile,
ComputerSystem.Reset) and the vendors' published behaviour.

No emulator applies BIOS settings the way firmware does, so this peer does, over real HTTP on
loopback: a PATCH of the settings object only stages values (checked against the registry:
unknown names, values outside the enumeration, bounds or type, and attributes read-only under
the registry's Dependencies are refused with the DMTF message); the staged values apply only at
a host reset, in one pass evaluated against the values before it (an attribute a Dependency
keeps read-only until another changes is not applied in the same pass), and a Dependency's
CurrentValue map is applied after. What it does at the reset is recorded in the settings'
``Time`` and ``Messages``.

Flavours (``flavour``):
- ``generic``: the settings object lists only the changes; PATCH without preconditions.
- ``hpe``: iLO-like: the settings object lists every attribute, a PATCH must carry the
  settings object's current ETag as If-Match (412 otherwise).
- ``dell``: iDRAC-like: staged values apply only through a BIOS configuration job (created by
  a PATCH with ``@Redfish.SettingsApplyTime`` OnReset, or POST to the job queue with
  ``TargetSettingsURI``), Scheduled until the reset, then Completed (CompletedWithErrors when
  a value was refused); ``DellManager.ClearPending`` on the settings object discards staged
  values; queued jobs can be deleted.

Behaviours for tests: ``pending`` preloads values someone else staged; ``never_apply`` names
attributes the firmware refuses at every reset (``drop``: removed from the settings object
with a message; ``keep``: left pending); ``registry_at`` says where the registry is advertised
(``path``, ``relative`` to its MessageRegistryFile, ``absolute`` URL of the BMC itself as Cisco
CIMC writes it, or ``dell``: only at Bios/BiosRegistry)."""

from __future__ import annotations

import base64
import json
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from provisioner.bmc.bios_dependencies import read_only
from provisioner.bmc.bios_registry import Registry, parse_registry
from provisioner.bmc.bios_values import type_value
from provisioner.testing.redfish_peers import fault_proxy, free_port, make_tls
from provisioner.testing.update_peer import running

ROOT = "/redfish/v1"
SYSTEM = f"{ROOT}/Systems/1"
BIOS = f"{SYSTEM}/Bios"
SETTINGS = f"{BIOS}/Settings"
MANAGER = f"{ROOT}/Managers/1"
JOBS = f"{MANAGER}/Jobs"
REGISTRIES = f"{ROOT}/Registries"
SESSIONS = f"{ROOT}/SessionService/Sessions"
REGISTRY_ID = "BiosAttributeRegistryStandIn.1.0.0"
CLEAR_PENDING = f"{SETTINGS}/Actions/Oem/DellManager.ClearPending"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def _message(message_id: str, text: str, attribute: str | None = None,
             severity: str = "Warning") -> dict[str, Any]:
    msg: dict[str, Any] = {"MessageId": message_id, "Message": text, "Severity": severity}
    if attribute:
        msg["RelatedProperties"] = [f"#/Attributes/{attribute}"]
    return msg


@dataclass
class Job:
    """An iDRAC-like BIOS configuration job."""

    id: str
    state: str = "Scheduled"
    message: str = "Task successfully scheduled."


@dataclass
class BiosPeer:
    """The BIOS's state, and what the BMC was sent."""

    user: str
    password: str
    attributes: dict[str, Any]
    registry_doc: dict[str, Any]
    flavour: str = "generic"
    manufacturer: str = "Contoso"
    pending: dict[str, Any] = field(default_factory=dict)
    never_apply: frozenset[str] = frozenset()
    refuse_mode: str = "drop"  # drop | keep
    registry_at: str = "path"  # path | relative | absolute | dell
    public_url: str = ""  # how clients reach it (a TLS proxy in front): for absolute links
    ignores_reset: bool = False  # its BMC never applies staged values (nothing happens)
    power: str = "On"
    resets: list[str] = field(default_factory=list)
    jobs: dict[str, Job] = field(default_factory=dict)
    settings_time: str | None = None
    settings_messages: list[dict[str, Any]] = field(default_factory=list)
    etag_serial: int = 1
    seen: list[tuple[str, str, dict[str, str], str]] = field(default_factory=list)
    server: BaseWSGIServer | None = None
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def registry(self) -> Registry:
        """The registry this BIOS enforces."""
        parsed = parse_registry(self.registry_doc)
        assert parsed is not None, "the stand-in needs a registry with RegistryEntries"
        return parsed

    @property
    def url(self) -> str:
        """Base URL of the peer."""
        return f"http://127.0.0.1:{self.port}"

    # -- HTTP ------------------------------------------------------------------------------

    def __call__(self, environ, start_response):  # type: ignore[no-untyped-def]
        request = Request(environ)
        body = request.get_data(as_text=True)
        self.seen.append((request.method, request.path, dict(request.headers), body))
        return self._handle(request, body)(environ, start_response)

    def _handle(self, request: Request, body: str) -> Response:
        path = request.path.rstrip("/") or "/"
        if path == SESSIONS and request.method == "POST":
            # Basic authentication only (SessionService disabled): a login is refused as not
            # allowed, before any credential check, and the client uses basic auth.
            return _error(405, "Base.1.8.OperationNotAllowed", "sessions are not offered; "
                          "use basic authentication")
        if path != ROOT and not self._authorised(request):
            return _error(401, "Base.1.8.NoValidSession", "authentication required")
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            return _error(400, "Base.1.8.MalformedJSON", "the body is not JSON")
        with self.lock:
            if request.method == "GET":
                return self._get(path)
            if request.method == "PATCH" and path == SETTINGS:
                return self._patch(request, data)
            if request.method == "POST" and path == f"{SYSTEM}/Actions/ComputerSystem.Reset":
                return self._reset(str(data.get("ResetType")))
            if self.flavour == "dell":
                if request.method == "POST" and path == CLEAR_PENDING:
                    self.pending.clear()
                    self._bump()
                    return Response(status=204)
                if request.method == "POST" and path == JOBS:
                    return self._create_job(str(data.get("TargetSettingsURI") or ""))
                if request.method == "DELETE" and path.startswith(f"{JOBS}/"):
                    return self._delete_job(path.rsplit("/", 1)[-1])
        return _error(405, "Base.1.8.OperationNotAllowed", f"{request.method} {path}")

    def _authorised(self, request: Request) -> bool:
        want = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return request.headers.get("Authorization") == f"Basic {want}"

    # -- resources -------------------------------------------------------------------------

    def _etag(self) -> str:
        return f'W/"{self.etag_serial}"'

    def _bump(self) -> None:
        self.etag_serial += 1

    def _docs(self) -> dict[str, dict[str, Any]]:
        system: dict[str, Any] = {
            "@odata.id": SYSTEM, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
            "Id": "1", "Name": "Stand-in host", "Manufacturer": self.manufacturer,
            "Model": "Stand-in 2U", "SerialNumber": "BIOSPEER0001", "PowerState": self.power,
            "Bios": {"@odata.id": BIOS},
            "Actions": {"#ComputerSystem.Reset": {
                "target": f"{SYSTEM}/Actions/ComputerSystem.Reset",
                "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart",
                                                      "GracefulShutdown"]}}}
        settings: dict[str, Any] = {
            "@odata.type": "#Settings.v1_3_5.Settings",
            "SettingsObject": {"@odata.id": SETTINGS},
            "SupportedApplyTimes": ["OnReset"]}
        if self.settings_time:
            settings["Time"] = self.settings_time
            settings["Messages"] = list(self.settings_messages)
        bios = {"@odata.id": BIOS, "@odata.type": "#Bios.v1_2_1.Bios", "Id": "Bios",
                "Name": "BIOS Configuration Current Settings", "AttributeRegistry": REGISTRY_ID,
                "Attributes": dict(self.attributes), "@Redfish.Settings": settings}
        staged = {**self.attributes, **self.pending} if self.flavour == "hpe" \
            else dict(self.pending)
        pending: dict[str, Any] = {
            "@odata.id": SETTINGS, "@odata.type": "#Bios.v1_2_1.Bios", "Id": "Settings",
            "Name": "BIOS Configuration Pending Settings", "AttributeRegistry": REGISTRY_ID,
            "Attributes": staged, "@odata.etag": self._etag()}
        if self.flavour == "dell":
            pending["Actions"] = {"Oem": {"DellManager.v1_0_0#DellManager.ClearPending": {
                "target": CLEAR_PENDING}}}
        docs: dict[str, dict[str, Any]] = {
            ROOT: {"@odata.id": ROOT, "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
                   "Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.15.0",
                   "Systems": {"@odata.id": f"{ROOT}/Systems"},
                   "Managers": {"@odata.id": f"{ROOT}/Managers"},
                   "Registries": {"@odata.id": REGISTRIES},
                   "SessionService": {"@odata.id": f"{ROOT}/SessionService"},
                   "Links": {"Sessions": {"@odata.id": SESSIONS}}},
            # Basic authentication only: no session is ever made (DMTF's Service Validator
            # checks this peer: tests/integration/redfish/test_redfish_standin_validators.py).
            f"{ROOT}/SessionService": {
                "@odata.id": f"{ROOT}/SessionService",
                "@odata.type": "#SessionService.v1_1_9.SessionService", "Id": "SessionService",
                "Name": "Session Service", "ServiceEnabled": False,
                "Sessions": {"@odata.id": SESSIONS}},
            SESSIONS: _collection(SESSIONS, "#SessionCollection.SessionCollection", []),
            f"{ROOT}/Systems": _collection(f"{ROOT}/Systems",
                                           "#ComputerSystemCollection.ComputerSystemCollection",
                                           [SYSTEM]),
            f"{ROOT}/Managers": _collection(f"{ROOT}/Managers",
                                            "#ManagerCollection.ManagerCollection", [MANAGER]),
            MANAGER: {"@odata.id": MANAGER, "@odata.type": "#Manager.v1_19_0.Manager",
                      "Id": "1", "Name": "Stand-in BMC", "ManagerType": "BMC"},
            SYSTEM: system, BIOS: bios, SETTINGS: pending,
        }
        docs.update(self._registry_docs())
        if self.flavour == "dell":
            docs[JOBS] = _collection(JOBS, "#DellJobCollection.DellJobCollection",
                                     [f"{JOBS}/{j}" for j in self.jobs])
            for job in self.jobs.values():
                docs[f"{JOBS}/{job.id}"] = {
                    "@odata.id": f"{JOBS}/{job.id}", "@odata.type": "#DellJob.v1_5_0.DellJob",
                    "Id": job.id, "Name": "Configure: BIOS.Setup.1-1",
                    "JobType": "BIOSConfiguration", "JobState": job.state,
                    "Message": job.message, "TargetSettingsURI": SETTINGS}
        return docs

    def _registry_docs(self) -> dict[str, dict[str, Any]]:
        document = {"@odata.type": "#AttributeRegistry.v1_3_6.AttributeRegistry",
                    "Id": REGISTRY_ID, "Name": "BIOS Attribute Registry", "Language": "en",
                    "RegistryVersion": "1.0.0", "OwningEntity": self.manufacturer,
                    **self.registry_doc}
        if self.registry_at == "dell":
            return {f"{BIOS}/BiosRegistry": {"@odata.id": f"{BIOS}/BiosRegistry", **document},
                    REGISTRIES: _collection(REGISTRIES, "#MessageRegistryFileCollection."
                                            "MessageRegistryFileCollection", [])}
        file_path = f"{REGISTRIES}/{REGISTRY_ID}"
        document_path = f"{file_path}/{REGISTRY_ID}.json"
        uri = {"path": document_path, "relative": f"{REGISTRY_ID}.json",
               "absolute": f"{self.public_url or self.url}{document_path}"}[self.registry_at]
        return {
            REGISTRIES: _collection(REGISTRIES, "#MessageRegistryFileCollection."
                                    "MessageRegistryFileCollection", [file_path]),
            file_path: {"@odata.id": file_path,
                        "@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
                        "Id": REGISTRY_ID, "Name": "BIOS Attribute Registry File",
                        "Registry": REGISTRY_ID, "Languages": ["en"],
                        "Location": [{"Language": "en", "Uri": uri}]},
            document_path: {"@odata.id": document_path, **document},
        }

    def _get(self, path: str) -> Response:
        docs = self._docs()
        if path not in docs:
            return _error(404, "Base.1.8.ResourceMissingAtURI", f"{path} not found")
        headers = {"ETag": self._etag()} if path == SETTINGS else {}
        return _json(docs[path], headers=headers)

    # -- behaviour -------------------------------------------------------------------------

    def _patch(self, request: Request, data: dict[str, Any]) -> Response:
        if self.flavour == "hpe":
            tag = request.headers.get("If-Match")
            if tag is None:
                return _error(428, "Base.1.8.PreconditionRequired",
                              "If-Match with the settings object's ETag is required")
            if tag != self._etag():
                return _error(412, "Base.1.8.PreconditionFailed",
                              f"ETag {tag} is not the current {self._etag()}")
        attributes = data.get("Attributes")
        if not isinstance(attributes, dict) or not attributes:
            return _error(400, "Base.1.8.PropertyMissing", "Attributes is required")
        registry = self.registry
        for name, value in attributes.items():
            info = registry.get(name)
            if info is None:
                return _error(400, "Base.1.8.PropertyUnknown", f"{name} is not an attribute",
                              name)
            if not _json_typed(value, info.kind) or not type_value(value, None, info).ok:
                return _error(400, "Base.1.8.PropertyValueNotInList",
                              f"{value!r} is not a valid value for {name}", name)
            locked, why = read_only(name, self.attributes, registry)
            if locked and value != self.attributes.get(name):
                return _error(400, "Base.1.8.PropertyNotWritable", f"{name}: {why}", name)
        self.pending.update(attributes)
        self._bump()
        apply = (data.get("@Redfish.SettingsApplyTime") or {}).get("ApplyTime")
        if self.flavour == "dell" and apply == "OnReset":
            job = self._new_job()
            return Response(status=202, headers={"Location": f"{JOBS}/{job.id}"})
        return Response(status=204)

    def _new_job(self) -> Job:
        for job in self.jobs.values():
            if job.state == "Scheduled":
                return job
        job = Job(f"JID_{len(self.jobs) + 100000000001}")
        self.jobs[job.id] = job
        return job

    def _create_job(self, target: str) -> Response:
        if target.rstrip("/") != SETTINGS:
            return _error(400, "Base.1.8.PropertyValueNotInList",
                          f"TargetSettingsURI {target!r} is not the BIOS settings object")
        if not self.pending:
            return _error(400, "Base.1.8.ActionNotSupported", "no pending BIOS values")
        job = self._new_job()
        return Response(status=201, headers={"Location": f"{JOBS}/{job.id}"})

    def _delete_job(self, ident: str) -> Response:
        if self.jobs.pop(ident, None) is None:
            return _error(404, "Base.1.8.ResourceMissingAtURI", f"no job {ident}")
        return Response(status=204)

    def _reset(self, reset: str) -> Response:
        self.resets.append(reset)
        if reset in ("ForceOff", "GracefulShutdown"):
            self.power = "Off"
            return Response(status=204)
        if reset not in ("On", "ForceRestart"):
            return _error(400, "Base.1.8.ActionParameterValueNotInList",
                          f"ResetType {reset} is not allowed")
        self.power = "On"
        if not self.ignores_reset:
            self._post()
        return Response(status=204)

    def _post(self) -> None:
        """What the firmware does with staged values when the host starts."""
        jobs = [j for j in self.jobs.values() if j.state == "Scheduled"]
        if self.flavour == "dell" and not jobs:
            return  # iDRAC applies nothing without a configuration job
        if not self.pending:
            return
        before = dict(self.attributes)
        registry = self.registry
        refused: list[str] = []
        for name, value in list(self.pending.items()):
            locked = read_only(name, before, registry)[0] and value != before.get(name)
            if name in self.never_apply or locked:
                refused.append(name)
                continue
            self.attributes[name] = value
            del self.pending[name]
        self._implied(registry)
        self.settings_time = _now()
        self.settings_messages = [
            _message("Base.1.8.PropertyNotWritable",
                     f"The BIOS did not apply {name}: it is not writable in this state.", name)
            for name in refused] or [_message("Base.1.8.Success", "Settings applied.",
                                              severity="OK")]
        for name in refused:
            if self.refuse_mode == "drop":
                self.pending.pop(name, None)
        for job in jobs:
            job.state = "CompletedWithErrors" if refused else "Completed"
            job.message = "Job completed with errors." if refused else \
                "Job completed successfully."
        self._bump()

    def _implied(self, registry: Registry) -> None:
        """CurrentValue maps of the registry's Dependencies, as firmware applies them."""
        for dep in registry.dependencies:
            if dep.prop == "CurrentValue" and dep.fires(self.attributes):
                self.attributes[dep.target] = dep.value

    def _start(self) -> None:
        self.server = make_server("127.0.0.1", self.port, self, threaded=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _json_typed(value: Any, kind: str | None) -> bool:
    """Whether a PATCHed value has the JSON type the attribute's registry type needs."""
    if kind == "Boolean":
        return isinstance(value, bool)
    if kind == "Integer":
        return type(value) is int
    if kind in ("Enumeration", "String"):
        return isinstance(value, str)
    return True


def _collection(path: str, odata_type: str, members: list[str]) -> dict[str, Any]:
    return {"@odata.id": path, "@odata.type": odata_type, "Name": path.rsplit("/", 1)[-1],
            "Members": [{"@odata.id": m} for m in members],
            "Members@odata.count": len(members)}


def _error(status: int, message_id: str, text: str, attribute: str | None = None) -> Response:
    info = _message(message_id, text, attribute, "Critical")
    return _json({"error": {"code": message_id, "message": text,
                            "@Message.ExtendedInfo": [info]}}, status)


def _json(doc: Mapping[str, Any], status: int = 200,
          headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(doc), status=status, mimetype="application/json",
                    headers={"OData-Version": "4.0", **(headers or {})})


@contextmanager
def bios_peer(user: str, password: str, attributes: dict[str, Any],
              registry_doc: dict[str, Any], **options: Any) -> Iterator[BiosPeer]:
    """Run a stand-in BIOS BMC on loopback for the duration; ``options`` set the peer's
    fields (flavour, manufacturer, pending, never_apply, refuse_mode, registry_at...)."""
    peer = BiosPeer(user, password, dict(attributes), registry_doc,
                    port=free_port("127.0.0.1"), **options)
    with running(peer):
        yield peer


def bios_site(stack: ExitStack, tmp: Path, site: str, user: str, password: str,
              peers: Mapping[str, BiosPeer], profile_of: Mapping[str, str],
              profiles: str) -> Path:
    """A site file whose hosts are the stand-in BIOS BMCs ``peers`` (started by the caller),
    each behind its own TLS proxy for as long as ``stack``; the password is read from
    $BIOS_BMC_PASSWORD and ``profiles`` is the site's ``profiles:`` block."""
    tls = make_tls(tmp / "tls")
    site_dir, logs = tmp / "site", tmp / "logs"
    site_dir.mkdir()
    logs.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    lines = []
    for u, (name, peer) in enumerate(peers.items(), start=1):
        (url,) = stack.enter_context(fault_proxy(peer.url, logs, tls=tls))
        peer.public_url = url
        lines.append(f"      - {{u: {u}, name: {name}, profile: {profile_of[name]}, "
                     f"bmc: {{address: 127.0.0.1, port: {urlsplit(url).port}}}}}")
    path = site_dir / "site.yml"
    path.write_text(
        f"site: {site}\nsettings:\n"
        "  redfish: {ca_bundle: bmc-ca.pem, timeout_s: 5, retries: 0}\n"
        f"credentials:\n  bmc: {{username: {user}, password: {{env: BIOS_BMC_PASSWORD}}}}\n"
        + profiles
        + "racks:\n  - name: r1\n    index: 1\n    defaults: {bmc: {credentials: bmc}}\n"
        "    hosts:\n" + "\n".join(lines) + "\n")
    return path
