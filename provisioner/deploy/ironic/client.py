"""A small client for OpenStack Ironic's bare-metal REST API, every request pinned to one
microversion (X-OpenStack-Ironic-API-Version).

Only the calls the backend needs. Ironic is a peer on the network: requests go through the
project's HTTP policy (provisioner/http_policy: no redirect off the API's origin, so a
credential never reaches another host; no proxy or .netrc from the environment; each answer
capped in size and time), and the secrets the client sends are scrubbed from every message and
log record. Reads are retried on connection errors and 5xx; actions are sent once, except when
Ironic says the node is locked by a task in progress (it did not act: the request is repeated
after a pause).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import requests

from provisioner.deploy.ironic.errors import (
    IronicAuthError,
    IronicBadRequest,
    IronicConflict,
    IronicError,
    IronicNodeLocked,
    IronicNotFound,
    IronicProtocolError,
    IronicUnavailable,
)
from provisioner.http_policy import logsafe
from provisioner.http_policy.errors import HttpRefused
from provisioner.http_policy.jsonlimits import JSONLimit, NotJSON, loads
from provisioner.http_policy.policy import HttpPolicy
from provisioner.http_policy.session import GuardedSession
from provisioner.secrets import Secret

log = logging.getLogger(__name__)
logsafe.install(("provisioner.deploy.ironic", "urllib3"))

# A page of 1,000 nodes with the poller's dozen fields is ~0.5 MB; a node's inspection
# inventory (every disk, NIC and CPU flag) is well under 1 MB.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_PAGES = 1000  # 1,000,000 nodes at Ironic's default max_limit: a loop guard, not a limit
LOCK_RETRIES = 20  # a conductor holds a node's lock for seconds (a power sync, a state change)
LOCK_WAIT_S = 2.0
Auth = Callable[[requests.PreparedRequest], requests.PreparedRequest]


class _SecretJSON(json.JSONEncoder):
    """Serialises :class:`Secret` values as their text, remembering them for redaction."""

    def __init__(self, *args: Any, remember: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._remember = remember

    def default(self, o: object) -> object:
        if isinstance(o, Secret):
            text = o.reveal()
            self._remember(text)
            return text
        return super().default(o)


def _fault(body: str) -> str:
    """Ironic's error text: ``{"error_message": "{\\"faultstring\\": ...}"}`` (JSON in JSON)."""
    try:
        outer = loads(body)
    except (NotJSON, JSONLimit):
        return body.strip()
    inner: Any = outer.get("error_message", outer) if isinstance(outer, dict) else outer
    if isinstance(inner, str):
        try:
            inner = loads(inner)
        except (NotJSON, JSONLimit):
            return inner.strip()
    if isinstance(inner, dict):
        return str(inner.get("faultstring") or inner.get("message") or inner).strip()
    return str(inner).strip()


class IronicClient:
    """Talks to one Ironic API. Thread-safe: each thread gets its own HTTP session."""

    def __init__(
        self,
        url: str,
        *,
        microversion: str,
        auth: Auth | None = None,
        token: Secret | None = None,
        timeout_s: float = 30.0,
        retries: int = 3,
        verify_tls: bool | str = True,
        proxy: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.microversion = microversion
        self._auth = auth
        self._token = token
        self._timeout = timeout_s
        self._retries = max(1, retries)
        self._verify = verify_tls
        self._sleep = sleep
        self._policy = HttpPolicy(max_bytes=MAX_ANSWER_BYTES, answer_wall_s=2 * timeout_s,
                                  proxy=proxy)
        self._local = threading.local()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        if token is not None:
            self.remember_secret(token.reveal())
        self.calls = 0  # HTTP requests made (tests and the benchmark count them)
        self.calls_by: dict[str, int] = {}  # per "METHOD /path-kind"

    def __repr__(self) -> str:
        return f"IronicClient({self.url!r}, microversion={self.microversion!r})"

    # -- plumbing -----------------------------------------------------------------------

    def _session(self) -> GuardedSession:
        session: GuardedSession | None = getattr(self._local, "session", None)
        if session is None:
            session = GuardedSession(self.url, self._policy)
            session.headers.update({
                "Accept": "application/json",
                "X-OpenStack-Ironic-API-Version": self.microversion,
                "User-Agent": "provisioner-ironic",
            })
            self._local.session = session
        return session

    def remember_secret(self, text: str) -> None:
        """A value that must never appear in a message or log, even if Ironic echoes it."""
        with self._lock:
            if not text or text in self._secrets:
                return
            self._secrets.add(text)
        logsafe.remember([text])

    def close(self) -> None:
        """Forget the secrets this client sent (other open clients keep theirs listed)."""
        with self._lock:
            secrets, self._secrets = self._secrets, set()
        logsafe.forget(secrets)

    def redact(self, text: str) -> str:
        with self._lock:
            mine = list(self._secrets)
        return logsafe.scrub(logsafe.redact(text), mine)

    def _count(self, method: str, path: str) -> None:
        kind = path.split("?", 1)[0]
        parts = kind.strip("/").split("/")
        # /v1/nodes/<id>/states/provision -> /v1/nodes/{id}/states/provision
        if len(parts) > 2 and parts[1] in ("nodes", "ports"):
            parts[2] = "{id}"
        key = f"{method} /{'/'.join(parts)}"
        with self._lock:
            self.calls += 1
            self.calls_by[key] = self.calls_by.get(key, 0) + 1

    def _send(self, method: str, path: str, body: object | None) -> requests.Response:
        url = path if path.startswith(("http://", "https://")) else self.url + path
        headers: dict[str, str] = {}
        data: bytes | None = None
        if body is not None:
            data = json.dumps(body, cls=_SecretJSON, remember=self.remember_secret).encode()
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            headers["X-Auth-Token"] = self._token.reveal()
        self._count(method, path)
        return self._session().request(
            method, url, data=data, headers=headers, auth=self._auth,
            timeout=(min(10.0, self._timeout), self._timeout), verify=self._verify,
        )

    def _refused(self, exc: HttpRefused, what: str, node: str | None) -> IronicError:
        """The HTTP policy's refusal as the client's own error (one place)."""
        return IronicProtocolError(
            f"Ironic's answer to {what} was refused: {self.redact(exc.message)}",
            status=exc.status, node=node,
            hint="point settings.ironic.url at the API itself (what Ironic advertises as "
            "[api]public_endpoint); nothing was sent anywhere else")

    def request(
        self,
        method: str,
        path: str,
        body: object | None = None,
        *,
        what: str,
        node: str | None = None,
    ) -> Any:
        """One API call; the decoded JSON answer (None when empty); typed errors."""
        read = method == "GET"
        attempts = self._retries if read else 1
        locked = 0
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self._send(method, path, body)
                raw = resp.content
            except HttpRefused as exc:
                raise self._refused(exc, what, node) from None
            except requests.RequestException as exc:
                err: IronicError = IronicUnavailable(
                    f"cannot reach Ironic at {self.url} ({what}): "
                    f"{self.redact(type(exc).__name__ + ': ' + str(exc))[:300]}",
                    node=node,
                    hint="check settings.ironic.url and that the Ironic API runs",
                )
                if attempt < attempts:
                    self._sleep(min(8.0, 0.5 * 2**attempt))
                    continue
                raise err from None
            if resp.status_code >= 400:
                err = self._error(resp.status_code, raw, what, node)
                if isinstance(err, IronicNodeLocked) and locked < LOCK_RETRIES:
                    locked += 1
                    self._sleep(LOCK_WAIT_S)
                    attempt -= 1
                    continue
                if isinstance(err, IronicUnavailable) and attempt < attempts:
                    self._sleep(min(8.0, 0.5 * 2**attempt))
                    continue
                raise err
            if 300 <= resp.status_code < 400:
                raise IronicProtocolError(
                    f"Ironic answered {what} with HTTP {resp.status_code}", node=node,
                    status=resp.status_code, hint="point settings.ironic.url at the API itself")
            if not raw.strip():
                return None
            try:
                return loads(raw)
            except (NotJSON, JSONLimit):
                raise IronicProtocolError(
                    f"Ironic answered {what} with something that is not JSON within limits "
                    f"({raw[:80]!r})", node=node,
                    hint="is settings.ironic.url the Ironic API (port 6385)?",
                ) from None

    def _error(self, status: int, raw: bytes, what: str, node: str | None) -> IronicError:
        message = self.redact(_fault(raw.decode("utf-8", "replace")))[:800]
        target = f" for node {node}" if node else ""
        text = f"Ironic refused {what}{target}: HTTP {status}: {message}"
        kwargs: dict[str, Any] = {"status": status, "node": node, "ironic_message": message}
        if status in (401, 403):
            return IronicAuthError(text, hint="check settings.ironic.auth (the user or token "
                                   "Ironic expects)", **kwargs)
        if status == 404:
            return IronicNotFound(text, **kwargs)
        if status == 409:
            if "is locked by host" in message:
                return IronicNodeLocked(text, **kwargs)
            return IronicConflict(text, **kwargs)
        if status == 406:
            return IronicBadRequest(text, hint=f"this Ironic does not serve API "
                                    f"{self.microversion}: upgrade it, or lower "
                                    "settings.ironic.microversion", **kwargs)
        if status in (400, 422):
            return IronicBadRequest(text, **kwargs)
        if status >= 500:
            return IronicUnavailable(text, hint="read the Ironic conductor's log", **kwargs)
        return IronicError(text, **kwargs)

    # -- the API ------------------------------------------------------------------------

    def root(self) -> dict[str, Any]:
        """``GET /``: the API versions this Ironic serves."""
        data = self.request("GET", "/", what="the version list")
        if not isinstance(data, dict):
            raise IronicProtocolError(f"{self.url}/ is not an Ironic API root",
                                      hint="is settings.ironic.url the Ironic API?")
        return data

    def max_version(self) -> tuple[int, int]:
        """The newest microversion this Ironic serves."""
        default = self.root().get("default_version") or {}
        text = str(default.get("version") or "1.1")
        major, _, minor = text.partition(".")
        try:
            return int(major), int(minor or 0)
        except ValueError:
            raise IronicProtocolError(f"Ironic reports version {text!r}") from None

    def nodes(self, fields: Sequence[str] | None = None, **filters: str) -> list[dict[str, Any]]:
        """Every node (all pages), with only ``fields`` when given."""
        return self.list_nodes(fields, **filters)[0]

    def list_nodes(self, fields: Sequence[str] | None = None, **filters: str
                   ) -> tuple[list[dict[str, Any]], int]:
        """Every node (all pages) and the number of requests the pages took."""
        query: dict[str, str] = dict(filters)
        if fields:
            query["fields"] = ",".join(fields)
        path: str | None = "/v1/nodes" + (f"?{urlencode(query)}" if query else "")
        out: list[dict[str, Any]] = []
        pages = 0
        while path and pages < MAX_PAGES:
            pages += 1
            data = self.request("GET", path, what="the node list")
            page = data.get("nodes") if isinstance(data, dict) else None
            if not isinstance(page, list):
                raise IronicProtocolError("Ironic's node list has no `nodes` array")
            out += [n for n in page if isinstance(n, dict)]
            path = data.get("next") if page else None
        return out, pages

    def node(self, ident: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
        """One node by UUID or name."""
        q = f"?fields={','.join(fields)}" if fields else ""
        data = self.request("GET", f"/v1/nodes/{ident}{q}", what="a node read", node=ident)
        if not isinstance(data, dict) or "uuid" not in data:
            raise IronicProtocolError(f"Ironic's node {ident} has no uuid", node=ident)
        return data

    def find_node(self, ident: str) -> dict[str, Any] | None:
        """The node of that UUID or name, or None."""
        try:
            return self.node(ident)
        except IronicNotFound:
            return None

    def create_node(self, body: Mapping[str, Any]) -> dict[str, Any]:
        node = str(body.get("name") or "")
        data = self.request("POST", "/v1/nodes", dict(body), what="a node enrolment", node=node)
        if not isinstance(data, dict) or "uuid" not in data:
            raise IronicProtocolError("Ironic's answer to a node enrolment has no uuid")
        return data

    def patch_node(self, ident: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        data = self.request("PATCH", f"/v1/nodes/{ident}", [dict(o) for o in ops],
                            what="a node update", node=ident)
        return data if isinstance(data, dict) else {}

    def delete_node(self, ident: str) -> None:
        self.request("DELETE", f"/v1/nodes/{ident}", what="a node deletion", node=ident)

    def set_provision_state(self, ident: str, target: str,
                            configdrive: Mapping[str, Any] | None = None) -> None:
        """``PUT /v1/nodes/{id}/states/provision``; Ironic answers 202 and works on."""
        body: dict[str, Any] = {"target": target}
        if configdrive is not None:
            body["configdrive"] = dict(configdrive)
        self.request("PUT", f"/v1/nodes/{ident}/states/provision", body,
                     what=f"provision action {target!r}", node=ident)

    def set_maintenance(self, ident: str, reason: str | None) -> None:
        """Put the node in maintenance with ``reason``; ``None`` takes it out."""
        if reason is None:
            self.request("DELETE", f"/v1/nodes/{ident}/maintenance",
                         what="leaving maintenance", node=ident)
        else:
            self.request("PUT", f"/v1/nodes/{ident}/maintenance", {"reason": reason},
                         what="entering maintenance", node=ident)

    def inventory(self, ident: str) -> dict[str, Any]:
        """What the last inspection found (API 1.81): ``{"inventory": ..., "plugin_data": ...}``."""
        data = self.request("GET", f"/v1/nodes/{ident}/inventory",
                            what="the inspection inventory", node=ident)
        return data if isinstance(data, dict) else {}

    def ports(self, *, node: str | None = None, address: str | None = None
              ) -> list[dict[str, Any]]:
        """Ports of a node, or the port of a MAC address."""
        query = {"fields": "uuid,address,node_uuid,pxe_enabled"}
        if node:
            query["node"] = node
        if address:
            query["address"] = address
        data = self.request("GET", f"/v1/ports?{urlencode(query)}", what="the port list",
                            node=node)
        ports = data.get("ports") if isinstance(data, dict) else None
        if not isinstance(ports, list):
            raise IronicProtocolError("Ironic's port list has no `ports` array")
        return [p for p in ports if isinstance(p, dict)]

    def create_port(self, node_uuid: str, address: str, *, pxe_enabled: bool) -> dict[str, Any]:
        data = self.request("POST", "/v1/ports",
                            {"node_uuid": node_uuid, "address": address,
                             "pxe_enabled": pxe_enabled},
                            what=f"a port for {address}", node=node_uuid)
        return data if isinstance(data, dict) else {}

    def set_port_pxe(self, port_uuid: str, pxe_enabled: bool, *, node: str) -> None:
        self.request("PATCH", f"/v1/ports/{port_uuid}",
                     [{"op": "replace", "path": "/pxe_enabled", "value": pxe_enabled}],
                     what="a port update", node=node)

    def delete_port(self, port_uuid: str, *, node: str) -> None:
        self.request("DELETE", f"/v1/ports/{port_uuid}", what="a port deletion", node=node)
