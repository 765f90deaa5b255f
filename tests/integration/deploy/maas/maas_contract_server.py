"""A contract server for the MAAS 3.x REST API 2.0, on loopback, for the MAAS backend's tests.

MAAS cannot run on these machines (it ships only as a snap), so this server stands in for a
region controller. It is NOT MAAS: it implements only the endpoints the backend uses, with
MAAS's real paths (/MAAS/api/2.0/...), parameters (multipart form fields, ``?op=``), status
codes and names (maasserver.enum.NODE_STATUS), state transitions (New -> Commissioning ->
Ready -> Allocated -> Deploying -> Deployed, Failed commissioning/deployment, Releasing,
Disk erasing) and error forms (plain text for 401/404/409, a JSON field map for 400), as
documented in MAAS's API reference and its handlers (src/maasserver/api/machines.py,
tags.py, blockdevices.py, users.py). Response bodies are built from the samples in
tests/fixtures/maas/, written in MAAS's format.

Authentication is checked like MAAS does for 0-legged OAuth 1.0 with the PLAINTEXT method:
the Authorization header must carry the consumer key and token of the configured API key,
a nonce, a timestamp and the signature "&" + token secret (the consumer secret is empty);
anything else gets 401.

Operations take time: commissioning, deploying, releasing and erasing finish after a delay
(seconds, configurable), and hosts named in ``fail_commission`` / ``fail_deploy`` end in
Failed commissioning / Failed deployment with the status_message MAAS would show.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import string
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "maas"

STATUS_NAMES = {
    0: "New", 1: "Commissioning", 2: "Failed commissioning", 3: "Missing", 4: "Ready",
    5: "Reserved", 6: "Deployed", 7: "Retired", 8: "Broken", 9: "Deploying", 10: "Allocated",
    11: "Failed deployment", 12: "Releasing", 13: "Releasing failed", 14: "Disk erasing",
    15: "Failed disk erasing", 21: "Testing", 22: "Failed testing",
}
NEW, COMMISSIONING, FAILED_COMMISSIONING, READY = 0, 1, 2, 4
DEPLOYED, BROKEN, DEPLOYING, ALLOCATED, FAILED_DEPLOYMENT = 6, 8, 9, 10, 11
RELEASING, DISK_ERASING, FAILED_TESTING = 12, 14, 22
# maasserver.models.node.RELEASABLE_STATUSES
RELEASABLE = {ALLOCATED, 5, BROKEN, DEPLOYING, DEPLOYED, FAILED_DEPLOYMENT, 15, 13}
LAYOUTS = {"flat", "lvm", "bcache", "vmfs6", "vmfs7", "custom", "blank"}


def _load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


class HTTPError(Exception):
    """Becomes the response MAAS would send."""

    def __init__(self, status: int, body: str | dict[str, list[str]]) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body

    def response(self) -> Response:
        if isinstance(self.body, dict):
            return Response(json.dumps(self.body), self.status, mimetype="application/json")
        return Response(self.body, self.status, content_type="text/plain; charset=utf-8")


class Raw(Exception):
    """A test's hostile region: this exact response, whatever MAAS would answer."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


@dataclass
class Action:
    """One state-changing request the server accepted (for the tests' assertions)."""

    op: str
    system_id: str | None
    hostname: str | None
    params: dict[str, list[str]]


@dataclass
class MachineState:
    record: dict[str, Any]
    macs: list[str]
    power: dict[str, str] = field(default_factory=dict)
    disks: list[dict[str, Any]] = field(default_factory=list)  # revealed by commissioning
    pending: tuple[float, int, str] | None = None  # (when, next status, status_message)
    user_data: str | None = None
    layout: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)  # as of the last commissioning
    commissioning: bool = False
    before_commissioning: int = 0


class MAASContractServer:
    """A threaded werkzeug server answering like a MAAS region controller."""

    def __init__(
        self,
        api_key: str = "Wq9nM4xK2pL8vR3tYb:kTQyWpZmCw4dGe3Wqc:8sDf7GhJ2kL9mN4bV6cX1zQ3wE5rT7yU",
        *,
        user: str = "admin",
        commission_s: float = 0.3,
        deploy_s: float = 0.3,
        release_s: float = 0.1,
        erase_s: float = 0.2,
        enlist_commissions: bool = True,
    ) -> None:
        self.consumer_key, self.token_key, self.token_secret = api_key.split(":")
        self.api_key = api_key
        self.user = user
        self.commission_s = commission_s
        self.deploy_s = deploy_s
        self.release_s = release_s
        self.erase_s = erase_s
        self.enlist_commissions = enlist_commissions
        self.fail_commission: set[str] = set()  # host names
        self.fail_deploy: set[str] = set()
        self.hardware: dict[str, list[dict[str, Any]]] = {}  # MAC -> block devices
        self.gpus_missing: dict[str, int] = {}  # host name -> GPUs commissioning will not see
        self.machines: dict[str, MachineState] = {}
        self.tags: dict[str, dict[str, Any]] = {t["name"]: t for t in _load("tags.json")}
        self.tag_members: dict[str, set[str]] = {}
        self.actions: list[Action] = []
        self.auth_failures = 0
        self.list_requests = 0  # GET /machines/ (filtered reads)
        self.machine_reads = 0  # GET /machines/{system_id}/
        self.nonces: set[tuple[str, str]] = set()
        self._lock = threading.RLock()
        self._template = _load("machine.json")
        self._disks = _load("blockdevices.json")
        self._devices = _load("devices-gpu.json")
        self._next_disk_id = 100
        self._next_link_id = 5000
        self.subnets: list[dict[str, Any]] = _load("subnets.json")
        self.boot_resources: list[dict[str, Any]] = _load("boot-resources.json")
        self._map = Map(
            [
                Rule("/MAAS/api/2.0/version/", endpoint="version"),
                Rule("/MAAS/api/2.0/users/", endpoint="users"),
                Rule("/MAAS/api/2.0/machines/", endpoint="machines"),
                Rule("/MAAS/api/2.0/machines/<system_id>/", endpoint="machine"),
                Rule("/MAAS/api/2.0/nodes/<system_id>/blockdevices/", endpoint="blockdevices"),
                Rule("/MAAS/api/2.0/nodes/<system_id>/blockdevices/<int:device_id>/",
                     endpoint="blockdevice"),
                Rule("/MAAS/api/2.0/nodes/<system_id>/devices/", endpoint="devices"),
                Rule("/MAAS/api/2.0/nodes/<system_id>/interfaces/<int:interface_id>/",
                     endpoint="interface"),
                Rule("/MAAS/api/2.0/subnets/", endpoint="subnets"),
                Rule("/MAAS/api/2.0/boot-resources/", endpoint="boot_resources"),
                Rule("/MAAS/api/2.0/events/", endpoint="events"),
                Rule("/MAAS/api/2.0/tags/", endpoint="tags"),
                Rule("/MAAS/api/2.0/tags/<name>/", endpoint="tag"),
            ],
            strict_slashes=False,
        )
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What a site's settings.maas.url would hold."""
        return f"http://127.0.0.1:{self._server.server_port}/MAAS"

    def start(self) -> MAASContractServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- test set-up helpers --------------------------------------------------------------

    def add_machine(
        self, hostname: str, macs: list[str], *, status: int = READY, owner: str | None = None,
        power_type: str = "redfish", power: dict[str, str] | None = None,
    ) -> str:
        """Put a machine into MAAS as if enlisted earlier; returns its system_id."""
        with self._lock:
            sid = self._new_machine(hostname, macs, status=status, power_type=power_type)
            m = self.machines[sid]
            m.record["owner"] = owner
            m.power = dict(power or {})
            if status not in (NEW, COMMISSIONING):
                self._reveal_disks(m)
                self._reveal_devices(m)
            return sid

    def by_hostname(self, hostname: str) -> MachineState:
        with self._lock:
            for m in self.machines.values():
                if m.record["hostname"] == hostname:
                    self._advance(m)
                    return m
        raise KeyError(hostname)

    def machine_actions(self) -> list[Action]:
        """State-changing requests on machines (tag creation left out)."""
        return [a for a in self.actions if a.system_id]

    def actions_for(self, hostname: str, op: str | None = None) -> list[Action]:
        return [a for a in self.actions if a.hostname == hostname and (op is None or a.op == op)]

    # -- machine model --------------------------------------------------------------------

    def _new_machine(self, hostname: str, macs: list[str], *, status: int, power_type: str) -> str:
        sid = "".join(random.choices(string.ascii_lowercase + string.digits, k=6))
        rec = copy.deepcopy(self._template)
        rec.update(
            system_id=sid, hostname=hostname, fqdn=f"{hostname}.maas", owner=None, ip_addresses=[],
            power_type=power_type, tag_names=[], osystem="", distro_series="", hwe_kernel=None,
            resource_uri=f"/MAAS/api/2.0/machines/{sid}/",
            blockdevice_set=[], physicalblockdevice_set=[], boot_disk=None,
        )
        template_if = rec["interface_set"][0]
        ifaces = []
        for i, mac in enumerate(macs):
            iface = copy.deepcopy(template_if)
            iid = 1000 + len(self.machines) * 10 + i
            # MAAS links the boot interface to its subnet in AUTO mode: an address at deploy.
            links = []
            if i == 0:
                self._next_link_id += 1
                links = [{"id": self._next_link_id, "mode": "auto", "subnet": self.subnets[0]}]
            iface.update(id=iid, name=f"eno{i + 1}", mac_address=mac, system_id=sid,
                         links=links, resource_uri=f"/MAAS/api/2.0/nodes/{sid}/interfaces/{iid}/")
            ifaces.append(iface)
        rec["interface_set"] = ifaces
        rec["boot_interface"] = ifaces[0]
        state = MachineState(record=rec, macs=[m.lower() for m in macs])
        self.machines[sid] = state
        self._set_status(state, status, STATUS_NAMES[status])
        return sid

    def _reveal_devices(self, m: MachineState) -> None:
        devices = copy.deepcopy(self._devices)
        missing = self.gpus_missing.get(m.record["hostname"], 0)
        m.devices = devices[missing:]  # the first NVIDIA GPUs fell off the bus

    def _reveal_disks(self, m: MachineState) -> None:
        sid = m.record["system_id"]
        disks = self.hardware.get(m.macs[0], self._disks)
        out = []
        for d in disks:
            d = copy.deepcopy(d)
            self._next_disk_id += 1
            d.update(id=self._next_disk_id, system_id=sid,
                     resource_uri=f"/MAAS/api/2.0/nodes/{sid}/blockdevices/{self._next_disk_id}/")
            out.append(d)
        m.disks = out
        m.record["blockdevice_set"] = out
        m.record["physicalblockdevice_set"] = out
        m.record["boot_disk"] = out[0] if out else None

    _event_id = 0

    def _set_status(self, m: MachineState, status: int, message: str = "") -> None:
        m.record["status"] = status
        m.record["status_name"] = STATUS_NAMES[status]
        m.record["status_message"] = message
        # MAAS logs an event for each status change: type = the new status, ERROR for failures.
        MAASContractServer._event_id += 1
        failed = STATUS_NAMES[status].startswith(("Failed", "Releasing failed"))
        m.events.append({
            "username": self.user, "node": m.record["system_id"],
            "hostname": m.record["hostname"], "id": MAASContractServer._event_id,
            "level": "ERROR" if failed else "INFO",
            "created": time.strftime("%a, %d %b. %Y %H:%M:%S"),
            "type": STATUS_NAMES[status],
            "description": message if message != STATUS_NAMES[status] else "",
        })

    def _later(self, m: MachineState, after_s: float, status: int, message: str) -> None:
        m.pending = (time.monotonic() + after_s, status, message)

    def _advance(self, m: MachineState) -> None:
        """Apply the pending transition once its time has come."""
        if m.pending and time.monotonic() >= m.pending[0]:
            _, status, message = m.pending
            m.pending = None
            self._set_status(m, status, message)
            if status == READY and not m.disks:
                self._reveal_disks(m)
            if m.commissioning:
                m.commissioning = False
                if status == READY:
                    self._reveal_devices(m)  # what this commissioning found
            if status == READY:
                m.record["owner"] = None
            if status == DEPLOYED:
                m.record["power_state"] = "on"

    def _start_commissioning(self, m: MachineState) -> None:
        m.before_commissioning = m.record["status"]
        self._set_status(m, COMMISSIONING, "Commissioning")
        m.commissioning = True
        if m.record["hostname"] in self.fail_commission:
            self._later(m, self.commission_s, FAILED_COMMISSIONING,
                        "Failed commissioning: 50-maas-01-commissioning failed (exit 1)")
        else:
            self._later(m, self.commission_s, READY, "Ready")

    # -- WSGI -----------------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            self._authenticate(request)
            adapter = self._map.bind_to_environ(environ)
            endpoint, args = adapter.match()
            with self._lock:
                result = getattr(self, f"_h_{endpoint}")(request, **args)
            response = Response(json.dumps(result), 200, mimetype="application/json")
        except HTTPError as exc:
            response = exc.response()
        except Raw as exc:
            response = exc.response
        except Exception as exc:  # werkzeug routing errors
            code = getattr(exc, "code", 500)
            response = Response(str(exc), code, content_type="text/plain; charset=utf-8")
        return response(environ, start_response)

    def _authenticate(self, request: Request) -> None:
        header = request.headers.get("Authorization", "")
        if not header.startswith("OAuth "):
            self.auth_failures += 1
            raise HTTPError(401, "Authorization Error: Not authenticated")
        params: dict[str, str] = {}
        for part in header[len("OAuth "):].split(","):
            key, _, value = part.strip().partition("=")
            params[key] = unquote(value.strip('"'))
        problem = None
        if params.get("oauth_signature_method") != "PLAINTEXT":
            problem = "Unsupported signature method"
        elif params.get("oauth_consumer_key") != self.consumer_key:
            problem = f"Invalid consumer: {params.get('oauth_consumer_key')!r}"
        elif params.get("oauth_token") != self.token_key:
            problem = f"Invalid access token: {params.get('oauth_token')!r}"
        elif params.get("oauth_signature") != "&" + self.token_secret:
            problem = "Invalid signature"
        elif not params.get("oauth_nonce") or not params.get("oauth_timestamp"):
            problem = "Missing OAuth parameters: oauth_nonce, oauth_timestamp"
        elif params.get("oauth_version", "1.0") != "1.0":
            problem = "Unsupported OAuth version"
        elif abs(time.time() - int(params["oauth_timestamp"])) > 300:
            # python-oauth's server (MAAS's piston) allows 300 s between the two clocks
            problem = (f"Expired timestamp: given {params['oauth_timestamp']} and now "
                       f"{int(time.time())} has a greater difference than threshold 300")
        elif (params["oauth_nonce"], params["oauth_timestamp"]) in self.nonces:
            problem = "Nonce already used"
        if problem:
            self.auth_failures += 1
            raise HTTPError(401, f"Authorization Error: '{problem}'")
        with self._lock:
            self.nonces.add((params["oauth_nonce"], params["oauth_timestamp"]))

    @staticmethod
    def _op(request: Request) -> str | None:
        return request.args.get("op")

    @staticmethod
    def _form(request: Request) -> dict[str, list[str]]:
        return {k: request.form.getlist(k) for k in request.form}

    def _record(self, op: str, m: MachineState | None, request: Request) -> None:
        params = {k: v for k, v in self._form(request).items() if "pass" not in k}
        self.actions.append(
            Action(op, m.record["system_id"] if m else None, m.record["hostname"] if m else None,
                   params)
        )

    def _machine(self, system_id: str) -> MachineState:
        m = self.machines.get(system_id)
        if m is None:
            raise HTTPError(404, "No Machine matches the given query.")
        self._advance(m)
        return m

    @staticmethod
    def _unrecognised(request: Request) -> HTTPError:
        return HTTPError(400, f"Unrecognised signature: method={request.method} "
                              f"op={request.args.get('op')}")

    # -- handlers -------------------------------------------------------------------------

    def _h_version(self, request: Request) -> Any:
        return _load("version.json")

    def _h_users(self, request: Request) -> Any:
        if request.method == "GET" and self._op(request) == "whoami":
            me = _load("whoami.json")
            me.update(username=self.user, resource_uri=f"/MAAS/api/2.0/users/{self.user}/")
            return me
        raise self._unrecognised(request)

    def _h_machines(self, request: Request) -> Any:
        op = self._op(request)
        if request.method == "GET" and op is None:
            macs = [m.lower() for m in request.args.getlist("mac_address")]
            names = request.args.getlist("hostname")
            ids = request.args.getlist("id")
            self.list_requests += 1
            out = []
            for m in self.machines.values():
                self._advance(m)
                if macs and not set(macs) & set(m.macs):
                    continue
                if names and m.record["hostname"] not in names:
                    continue
                if ids and m.record["system_id"] not in ids:
                    continue
                out.append(m.record)
            return out
        if request.method == "POST" and op is None:
            return self._create(request)
        raise self._unrecognised(request)

    def _create(self, request: Request) -> Any:
        f = request.form
        errors: dict[str, list[str]] = {}
        macs = [m.lower() for m in f.getlist("mac_addresses")]
        if not f.get("architecture"):
            errors["architecture"] = ["This field is required."]
        if not macs:
            errors["mac_addresses"] = ["This field is required."]
        for mac in macs:
            for other in self.machines.values():
                if mac in other.macs:
                    errors["mac_addresses"] = [
                        "One or more MAC addresses is invalid. ('MAC address "
                        f"{mac} already in use on {other.record['hostname']}.')"
                    ]
        hostname = f.get("hostname", "")
        if any(m.record["hostname"] == hostname for m in self.machines.values()):
            errors["hostname"] = [f"Node with hostname \"{hostname}\" already exists"]
        power_type = f.get("power_type", "")
        if power_type == "redfish" and not f.get("power_parameters_power_address"):
            errors["power_parameters"] = ["power_address: This field is required."]
        if errors:
            raise HTTPError(400, errors)
        sid = self._new_machine(hostname, macs, status=NEW, power_type=power_type)
        m = self.machines[sid]
        m.power = {k.removeprefix("power_parameters_"): v for k, v in f.items()
                   if k.startswith("power_parameters_")}
        m.record["architecture"] = f["architecture"]
        self._record("create", m, request)
        if f.get("commission", "false").lower() == "true" and self.enlist_commissions:
            self._start_commissioning(m)
        return m.record

    def _h_machine(self, request: Request, system_id: str) -> Any:
        m = self._machine(system_id)
        op = self._op(request)
        status = m.record["status"]
        if request.method == "GET":
            if op is None:
                self.machine_reads += 1
                return m.record
            if op == "power_parameters":
                return dict(m.power)
            raise self._unrecognised(request)
        if request.method == "PUT" and op is None:
            f = request.form
            if "hostname" in f:
                m.record["hostname"] = f["hostname"]
                m.record["fqdn"] = f"{f['hostname']}.maas"
            if "power_type" in f:
                m.record["power_type"] = f["power_type"]
                m.power = {}
            for k, v in f.items():
                if k.startswith("power_parameters_"):
                    m.power[k.removeprefix("power_parameters_")] = v
            self._record("update", m, request)
            return m.record
        if request.method != "POST":
            raise self._unrecognised(request)
        if op == "commission":
            if status not in (NEW, READY, FAILED_COMMISSIONING, FAILED_TESTING, BROKEN):
                raise HTTPError(400, {"__all__": [
                    "Commission is not available because of the current state of the node."]})
            self._record("commission", m, request)
            self._start_commissioning(m)
            return m.record
        if op == "set_storage_layout":
            if status != READY:
                raise HTTPError(409, "Cannot change the storage layout on a machine that is "
                                     "not Ready.")
            layout = request.form.get("storage_layout", "")
            if layout not in LAYOUTS:
                raise HTTPError(400, {"storage_layout": [
                    f"Select a valid choice. {layout} is not one of the available choices."]})
            root = request.form.get("root_device")
            ids = [str(d["id"]) for d in m.disks]
            if root is not None and root not in ids:
                raise HTTPError(400, {"root_device": [
                    f"'{root}' is not a valid root_device.  It should be one of: "
                    + ", ".join(f"'{i}'" for i in ids) + "."]})
            m.layout = {"storage_layout": layout, "root_device": root or ""}
            self._record("set_storage_layout", m, request)
            return m.record
        if op == "deploy":
            if status == READY:
                m.record["owner"] = self.user  # MAAS allocates a Ready machine to the caller
                self._set_status(m, ALLOCATED, "")
                status = ALLOCATED
            if status not in (ALLOCATED, FAILED_DEPLOYMENT):
                raise HTTPError(409, "Can't deploy a machine that is in the "
                                     f"'{STATUS_NAMES[status]}' state")
            ud = request.form.get("user_data")
            m.user_data = base64.b64decode(ud).decode() if ud else None
            m.record["osystem"] = request.form.get("osystem", "ubuntu")
            m.record["distro_series"] = request.form.get("distro_series", "jammy")
            m.record["hwe_kernel"] = request.form.get("hwe_kernel") or "ga-22.04"
            self._record("deploy", m, request)
            self._set_status(m, DEPLOYING, "Deploying")
            m.record["power_state"] = "on"
            if m.record["hostname"] in self.fail_deploy:
                self._later(m, self.deploy_s, FAILED_DEPLOYMENT,
                            "Installation failed (refer to the installation log for more "
                            "information).")
            else:
                self._later(m, self.deploy_s, DEPLOYED, "Deployed")
            return m.record
        if op == "abort":
            # Node.abort_operation: commissioning/testing go back to the state before them,
            # a deployment back to Allocated, an erase fails.
            back = {COMMISSIONING: m.before_commissioning, DEPLOYING: ALLOCATED,
                    DISK_ERASING: 15, 21: READY}
            if status not in back:
                raise HTTPError(409, "Cannot abort in current state: "
                                     f"'{STATUS_NAMES[status]}'.")
            self._record("abort", m, request)
            m.pending = None
            m.commissioning = False
            self._set_status(m, back[status], "")
            return m.record
        if op == "release":
            if status in (RELEASING, READY):
                return m.record
            if status not in RELEASABLE:
                raise HTTPError(409, "Machine cannot be released in its current state "
                                     f"('{STATUS_NAMES[status]}').")
            self._record("release", m, request)
            if request.form.get("erase", "false").lower() == "true":
                self._set_status(m, DISK_ERASING, "Disk erasing")
                self._later(m, self.erase_s, READY, "Ready")
            else:
                self._set_status(m, RELEASING, "Releasing")
                self._later(m, self.release_s, READY, "Ready")
            return m.record
        raise self._unrecognised(request)

    def _h_blockdevices(self, request: Request, system_id: str) -> Any:
        m = self._machine(system_id)
        if request.method != "GET":
            raise self._unrecognised(request)
        return m.disks

    def _h_devices(self, request: Request, system_id: str) -> Any:
        m = self._machine(system_id)
        if request.method != "GET" or self._op(request) is not None:
            raise self._unrecognised(request)
        devices = copy.deepcopy(m.devices)  # empty before the first commissioning
        kind = request.args.get("hardware_type")
        if kind is not None:
            if kind.lower() not in ("node", "cpu", "memory", "storage", "network", "gpu"):
                raise HTTPError(400, {"hardware_type": [f"Unknown hardware type {kind!r}"]})
            devices = [d for d in devices if d["hardware_type_name"].lower() == kind.lower()]
        for d in devices:
            d["system_id"] = system_id
        return devices

    def _h_blockdevice(self, request: Request, system_id: str, device_id: int) -> Any:
        m = self._machine(system_id)
        dev = next((d for d in m.disks if d["id"] == device_id), None)
        if dev is None:
            raise HTTPError(404, "No BlockDevice matches the given query.")
        if request.method == "POST" and self._op(request) == "set_boot_disk":
            if m.record["status"] not in (READY, ALLOCATED):
                raise HTTPError(409, "Cannot set boot disk because the machine is not Ready.")
            m.record["boot_disk"] = dev
            self._record("set_boot_disk", m, request)
            return "OK"
        if request.method == "GET":
            return dev
        raise self._unrecognised(request)

    def _h_events(self, request: Request) -> Any:
        if request.method != "GET" or self._op(request) != "query":
            raise self._unrecognised(request)
        ids = request.args.getlist("id")
        limit = int(request.args.get("limit", "100"))
        events = [e for m in self.machines.values() if not ids or m.record["system_id"] in ids
                  for e in m.events]
        events.sort(key=lambda e: e["id"], reverse=True)
        shown = events[:limit]
        uri = "/MAAS/api/2.0/events/?op=query"
        return {"count": len(shown), "events": shown, "next_uri": uri, "prev_uri": uri}

    def _h_boot_resources(self, request: Request) -> Any:
        if request.method == "GET" and self._op(request) is None:
            return self.boot_resources
        raise self._unrecognised(request)

    def _h_subnets(self, request: Request) -> Any:
        if request.method == "GET" and self._op(request) is None:
            return self.subnets
        raise self._unrecognised(request)

    def _h_interface(self, request: Request, system_id: str, interface_id: int) -> Any:
        m = self._machine(system_id)
        iface = next((i for i in m.record["interface_set"] if i["id"] == interface_id), None)
        if iface is None:
            raise HTTPError(404, "No Interface matches the given query.")
        op = self._op(request)
        if request.method == "GET" and op is None:
            return iface
        if request.method != "POST" or op not in ("link_subnet", "unlink_subnet"):
            raise self._unrecognised(request)
        if m.record["status"] not in (READY, ALLOCATED, BROKEN):
            raise HTTPError(409, "Cannot change the network configuration of a machine in "
                                 f"state '{m.record['status_name']}'.")
        f = request.form
        if op == "unlink_subnet":
            link_id = f.get("id", "")
            if not any(str(link["id"]) == link_id for link in iface["links"]):
                raise HTTPError(400, {"id": [f"Link {link_id} is not on this interface."]})
            iface["links"] = [link for link in iface["links"] if str(link["id"]) != link_id]
        else:
            mode = f.get("mode", "").lower()
            if mode not in ("auto", "dhcp", "static", "link_up"):
                raise HTTPError(400, {"mode": [f"Select a valid choice. {mode} is not one of "
                                               "the available choices."]})
            subnet = next((s for s in self.subnets if f.get("subnet") in (str(s["id"]),
                                                                          s["cidr"])), None)
            if subnet is None:
                raise HTTPError(400, {"subnet": ["Select a valid choice. That choice is not one "
                                                 "of the available choices."]})
            ip = f.get("ip_address")
            if ip:
                import ipaddress

                if ipaddress.ip_address(ip) not in ipaddress.ip_network(subnet["cidr"]):
                    raise HTTPError(400, {"ip_address": [
                        f"IP address is not in the given subnet '{subnet['cidr']}'."]})
                for other in self.machines.values():
                    if other is not m and ip in other.record["ip_addresses"]:
                        raise HTTPError(400, {"ip_address": [f"IP address {ip} already in use."]})
                m.record["ip_addresses"] = [*m.record["ip_addresses"], ip]
            self._next_link_id += 1
            link = {"id": self._next_link_id, "mode": mode, "subnet": subnet}
            if ip:
                link["ip_address"] = ip
            iface["links"].append(link)
        self._record(op, m, request)
        return iface

    def _h_tags(self, request: Request) -> Any:
        if request.method == "GET":
            return list(self.tags.values())
        if request.method == "POST" and self._op(request) is None:
            name = request.form.get("name", "")
            if name in self.tags:
                raise HTTPError(400, {"name": ["Tag with this Name already exists."]})
            tag = {"name": name, "definition": request.form.get("definition", ""),
                   "comment": request.form.get("comment", ""), "kernel_opts": "",
                   "resource_uri": f"/MAAS/api/2.0/tags/{name}/"}
            self.tags[name] = tag
            self._record("create_tag", None, request)
            return tag
        raise self._unrecognised(request)

    def _h_tag(self, request: Request, name: str) -> Any:
        if name not in self.tags:
            raise HTTPError(404, "No Tag matches the given query.")
        if request.method == "GET":
            return self.tags[name]
        if request.method == "POST" and self._op(request) == "update_nodes":
            members = self.tag_members.setdefault(name, set())
            added = removed = 0
            for sid in request.form.getlist("add"):
                m = self._machine(sid)
                if name not in m.record["tag_names"]:
                    m.record["tag_names"].append(name)
                    members.add(sid)
                    added += 1
            for sid in request.form.getlist("remove"):
                m = self._machine(sid)
                if name in m.record["tag_names"]:
                    m.record["tag_names"].remove(name)
                    members.discard(sid)
                    removed += 1
            return {"added": added, "removed": removed}
        raise self._unrecognised(request)
