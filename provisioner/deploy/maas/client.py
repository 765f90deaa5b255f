"""A small client for the MAAS 3.x REST API 2.0, signed with OAuth1 PLAINTEXT as MAAS expects.

Only the calls the deploy backend needs. Reads are retried on connection errors and 5xx
answers; actions (POST/PUT) are sent once, because MAAS may have acted on a request whose
answer was lost and repeating a deploy or release is not what the user asked for.

Every request goes through the project's HTTP policy (:mod:`provisioner.http_policy`): to the
region's own origin only (a redirect elsewhere is refused before anything is sent there, so a
form holding a BMC password never leaves for another host), through no proxy but
``settings.maas.proxy`` (the environment's HTTP(S)_PROXY is never read), and every answer read
under a size cap and a wall time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import requests
from oauthlib.oauth1 import SIGNATURE_PLAINTEXT
from oauthlib.oauth1 import Client as OAuthClient
from pydantic import BaseModel, ValidationError
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from provisioner.deploy.maas.apikey import MAASApiKey
from provisioner.deploy.maas.errors import (
    MAASAuthError,
    MAASConflict,
    MAASError,
    MAASNotFound,
    MAASUnavailable,
    MAASValidationError,
)
from provisioner.deploy.maas.models import (
    BlockDevice,
    BootResource,
    Event,
    Interface,
    Machine,
    NodeDevice,
    Subnet,
)
from provisioner.http_policy.errors import (
    AnswerTooLarge,
    AnswerTooSlow,
    BrokenAnswer,
    DeadlineExceeded,
    ForeignURL,
    HttpRefused,
    RedirectRefused,
)
from provisioner.http_policy.policy import HttpPolicy
from provisioner.http_policy.session import GuardedSession
from provisioner.secrets import Secret

log = logging.getLogger(__name__)

# The largest answer read from MAAS: a machine's JSON is some 10-20 kB, so a listing of a few
# thousand machines fits with room; anything larger is not MAAS answering this client.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# One answer may take this many times the per-request timeout in all, however it trickles in.
ANSWER_WALL_FACTOR = 4

FormValue = str | int | bool | Secret
Form = Mapping[str, FormValue | Sequence[FormValue]]


class _MAASAuth(requests.auth.AuthBase):
    """0-legged OAuth 1.0, PLAINTEXT, as MAAS expects: signature "&" + token secret.

    oauthlib signs directly rather than through requests-oauthlib, whose debug log prints the
    signed Authorization header, i.e. the token secret.
    """

    def __init__(self, key: MAASApiKey) -> None:
        self._key = key

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        client = OAuthClient(
            self._key.consumer_key,
            client_secret="",  # MAAS keys have an empty consumer secret
            resource_owner_key=self._key.token_key,
            resource_owner_secret=self._key.token_secret.reveal(),
            signature_method=SIGNATURE_PLAINTEXT,
        )
        _, headers, _ = client.sign(r.url or "", http_method=r.method or "GET")
        r.headers["Authorization"] = headers["Authorization"]
        return r


class _Retryable(Exception):
    """A read that may succeed if repeated (connection error, 502/503/504)."""

    def __init__(self, error: MAASError) -> None:
        super().__init__(str(error))
        self.error = error


def api_root(url: str) -> str:
    """``http://maas:5240/MAAS`` -> ``http://maas:5240/MAAS/api/2.0/`` (idempotent)."""
    base = url.rstrip("/")
    if base.endswith("/api/2.0"):
        return base + "/"
    return base + "/api/2.0/"


M = TypeVar("M", bound=BaseModel)


def _parse(model: type[M], data: Any, what: str, system_id: str | None = None) -> M:
    """Validate one MAAS object; a body of another shape is a typed error, not a crash."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise MAASError(
            f"MAAS answered {what} with an unexpected {model.__name__} ({field}: {first['msg']})",
            system_id=system_id,
            hint="is settings.maas.url a MAAS 3.x region? (expected API 2.0 JSON)",
        ) from None


class MAASClient:
    """Talks to one MAAS region. Thread-safe: each thread gets its own HTTP session."""

    def __init__(
        self,
        url: str,
        api_key: MAASApiKey,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        verify_tls: bool | str = True,
        proxy: str | None = None,
    ) -> None:
        self.url = url
        self.root = api_root(url)
        self._policy = HttpPolicy(max_bytes=MAX_ANSWER_BYTES,
                                  answer_wall_s=ANSWER_WALL_FACTOR * timeout_s, proxy=proxy)
        self._key = api_key
        self._timeout = timeout_s
        self._retries = max(1, retries)
        self._verify = verify_tls
        self._local = threading.local()
        # Values that must never reach a message even if MAAS echoes them back.
        self._secrets: set[str] = {api_key.token_secret.reveal()}
        self._secrets_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MAASClient({self.url!r}, consumer_key={self._key.consumer_key!r})"

    # -- plumbing -----------------------------------------------------------------------

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = GuardedSession(self.root, self._policy)
            session.headers["Accept"] = "application/json"
            self._local.session = session
        return session

    def _redact(self, text: str) -> str:
        with self._secrets_lock:
            secrets = list(self._secrets)
        for s in secrets:
            if s:
                text = text.replace(s, "***")
        return text

    def _multipart(self, form: Form) -> list[tuple[str, tuple[None, str]]]:
        # MAAS documents multipart/form-data for POST and PUT; a list repeats a parameter.
        parts: list[tuple[str, tuple[None, str]]] = []
        for key, value in form.items():
            values = value if isinstance(value, list | tuple) else [value]
            for v in values:
                if isinstance(v, Secret):
                    text = v.reveal()
                    with self._secrets_lock:
                        self._secrets.add(text)
                elif isinstance(v, bool):
                    text = "true" if v else "false"
                else:
                    text = str(v)
                parts.append((key, (None, text)))
        return parts

    def _url(self, path: str) -> str:
        return self.root + path.lstrip("/")

    def _error(
        self, resp: requests.Response, what: str, system_id: str | None
    ) -> MAASError:
        body = resp.text.strip()
        message = body
        if resp.headers.get("Content-Type", "").startswith("application/json"):
            try:
                data = json.loads(body)
            except (ValueError, RecursionError):  # also a 4,300-digit number or deep nesting
                data = None
            if isinstance(data, dict):
                # Form errors: {"field": ["message", ...], "__all__": [...]}
                message = "; ".join(
                    f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}"
                    for k, v in data.items()
                )
        message = self._redact(message)[:800]
        target = f" for machine {system_id}" if system_id else ""
        text = f"MAAS refused {what}{target}: HTTP {resp.status_code}: {message or resp.reason}"
        kwargs: dict[str, Any] = {
            "status": resp.status_code,
            "system_id": system_id,
            "maas_message": message,
        }
        if resp.status_code in (401, 403):
            hint = (
                "check settings.maas.api_key: a key of a MAAS admin, printed by "
                "`sudo maas apikey --username=<admin>`"
            )
            if "Expired timestamp" in message:
                hint = (
                    "this machine's clock and the MAAS region's differ by more than 5 minutes: "
                    "sync both with NTP"
                )
            return MAASAuthError(text, hint=hint, **kwargs)
        if resp.status_code == 404:
            return MAASNotFound(text, **kwargs)
        if resp.status_code == 409:
            return MAASConflict(text, **kwargs)
        if resp.status_code == 400:
            return MAASValidationError(text, **kwargs)
        if resp.status_code >= 500:
            return MAASUnavailable(
                text, hint="check the region and rack controllers (`maas status`)", **kwargs
            )
        return MAASError(text, **kwargs)

    def _refused(self, exc: HttpRefused, what: str, system_id: str | None) -> MAASError:
        """What the HTTP policy stopped, as the MAAS error a caller handles."""
        text = self._redact(exc.message)
        if isinstance(exc, RedirectRefused | ForeignURL):
            target = getattr(exc, "target", exc.url)
            return MAASError(
                f"MAAS at {self.url} sent {what} to {target}, another host than the region's; "
                "not followed: nothing of the request (the API key's signature, a form with a "
                "BMC password) went there",
                system_id=system_id,
                hint="set settings.maas.url to the region's own address; a proxy between this "
                     "machine and MAAS goes in settings.maas.proxy")
        if isinstance(exc, AnswerTooLarge):
            return MAASError(f"MAAS answered {what} with too much: {text}", system_id=system_id,
                             hint=f"answers above {MAX_ANSWER_BYTES >> 20} MiB are not MAAS's: "
                                  "check settings.maas.url")
        if isinstance(exc, BrokenAnswer):  # cut short in transit: a read may be tried again
            return MAASUnavailable(f"MAAS at {self.url} answered {what} with a broken answer: "
                                   f"{text}", system_id=system_id)
        if isinstance(exc, AnswerTooSlow | DeadlineExceeded):
            return MAASUnavailable(f"MAAS at {self.url} did not answer {what} in time: {text}",
                                   system_id=system_id,
                                   hint="check the region controller's load; "
                                        "settings.maas.http_timeout_s sets the wait")
        return MAASError(f"MAAS {what}: {text}", system_id=system_id)

    def _send(
        self,
        method: str,
        path: str,
        *,
        op: str | None,
        params: Sequence[tuple[str, str]] = (),
        form: Form | None = None,
        system_id: str | None = None,
    ) -> Any:
        query: list[tuple[str, str]] = [("op", op)] if op else []
        query.extend(params)
        what = f"{method} {path}" + (f"?op={op}" if op else "")
        try:
            resp = self._session().request(
                method,
                self._url(path),
                params=query or None,
                files=self._multipart(form) if form is not None else None,
                auth=_MAASAuth(self._key),
                timeout=self._timeout,
                verify=self._verify,
            )
        except requests.RequestException as exc:
            raise MAASUnavailable(
                f"cannot reach MAAS at {self.url} ({what}): {type(exc).__name__}",
                system_id=system_id,
                hint="check settings.maas.url and that the region controller is running",
            ) from None
        except HttpRefused as exc:
            raise self._refused(exc, what, system_id) from None
        log.debug("MAAS %s -> %s", what, resp.status_code)
        if resp.status_code >= 400:
            raise self._error(resp, what, system_id)
        if not resp.content:
            return None
        try:
            return resp.json()
        except (ValueError, RecursionError):  # a body nested 100,000 deep is not MAAS JSON
            return resp.text

    def _get(
        self,
        path: str,
        *,
        op: str | None = None,
        params: Sequence[tuple[str, str]] = (),
        system_id: str | None = None,
    ) -> Any:
        retrying = Retrying(
            stop=stop_after_attempt(self._retries),
            wait=wait_exponential(multiplier=0.2, max=5),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    try:
                        return self._send("GET", path, op=op, params=params, system_id=system_id)
                    except MAASUnavailable as exc:
                        if exc.status in (None, 502, 503, 504):
                            raise _Retryable(exc) from None
                        raise
        except _Retryable as exc:
            raise exc.error from None
        raise AssertionError("unreachable")  # pragma: no cover - tenacity reraises

    def _post(
        self, path: str, *, op: str | None = None, form: Form | None = None,
        system_id: str | None = None,
    ) -> Any:
        return self._send("POST", path, op=op, form=form or {}, system_id=system_id)

    # -- region -------------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        """``GET /version/``: MAAS version and capabilities (also checks the key)."""
        data = self._get("version/")
        return data if isinstance(data, dict) else {"version": str(data)}

    def whoami(self) -> str:
        """The user name the API key belongs to."""
        data = self._get("users/", op="whoami")
        return str(data.get("username", "")) if isinstance(data, dict) else ""

    def boot_resources(self) -> list[BootResource]:
        """``GET /boot-resources/``: the images the region has."""
        return [_parse(BootResource, r, "GET boot-resources/") for r in
                self._get("boot-resources/") or []]

    # -- machines -----------------------------------------------------------------------

    def machines(
        self,
        *,
        mac_addresses: Iterable[str] = (),
        hostnames: Iterable[str] = (),
        system_ids: Iterable[str] = (),
    ) -> list[Machine]:
        """``GET /machines/`` filtered by MACs, host names and/or system_ids (OR within a kind)."""
        params = [("mac_address", m.lower()) for m in mac_addresses]
        params += [("hostname", h) for h in hostnames]
        params += [("id", s) for s in system_ids]
        data = self._get("machines/", params=params)
        return [_parse(Machine, m, "GET machines/") for m in data or []]

    def machine(self, system_id: str) -> Machine:
        """One machine by system_id."""
        data = self._get(f"machines/{system_id}/", system_id=system_id)
        return _parse(Machine, data, f"GET machines/{system_id}/", system_id)

    def create_machine(
        self,
        *,
        hostname: str,
        mac_addresses: Sequence[str],
        architecture: str,
        power_type: str,
        power_parameters: Mapping[str, str | Secret],
        commission: bool = True,
        domain: str | None = None,
    ) -> Machine:
        """``POST /machines/``: enlist a machine with its power settings."""
        form: dict[str, FormValue | Sequence[FormValue]] = {
            "hostname": hostname,
            "architecture": architecture,
            "mac_addresses": list(mac_addresses),
            "power_type": power_type,
            "commission": commission,
        }
        if domain:
            form["domain"] = domain
        for key, value in power_parameters.items():
            form[f"power_parameters_{key}"] = value
        return _parse(Machine, self._post("machines/", form=form), "POST machines/")

    def update_machine(self, system_id: str, fields: Form) -> Machine:
        """``PUT /machines/{system_id}/``: hostname, power_type, power_parameters_*, ..."""
        data = self._send("PUT", f"machines/{system_id}/", op=None, form=fields,
                          system_id=system_id)
        return _parse(Machine, data, "a machine action", system_id)

    def power_parameters(self, system_id: str) -> dict[str, Any]:
        """``GET ?op=power_parameters``; the password comes back wrapped in a Secret."""
        data = self._get(f"machines/{system_id}/", op="power_parameters", system_id=system_id)
        params = dict(data or {})
        if "power_pass" in params:
            params["power_pass"] = Secret(str(params["power_pass"]))
        return params

    def commission(
        self, system_id: str, *, testing_scripts: str | None = None, enable_ssh: bool = False
    ) -> Machine:
        """``POST ?op=commission``."""
        form: dict[str, FormValue] = {"enable_ssh": int(enable_ssh)}
        if testing_scripts is not None:
            form["testing_scripts"] = testing_scripts
        data = self._post(f"machines/{system_id}/", op="commission", form=form,
                          system_id=system_id)
        return _parse(Machine, data, "a machine action", system_id)

    def deploy(
        self,
        system_id: str,
        *,
        distro_series: str | None = None,
        hwe_kernel: str | None = None,
        user_data_b64: str | None = None,
        osystem: str | None = None,
    ) -> Machine:
        """``POST ?op=deploy`` (MAAS allocates a Ready machine to the caller first)."""
        form: dict[str, FormValue] = {}
        if osystem:
            form["osystem"] = osystem
        if distro_series:
            form["distro_series"] = distro_series
        if hwe_kernel:
            form["hwe_kernel"] = hwe_kernel
        if user_data_b64:
            form["user_data"] = user_data_b64
        data = self._post(f"machines/{system_id}/", op="deploy", form=form, system_id=system_id)
        return _parse(Machine, data, "a machine action", system_id)

    def release(
        self,
        system_id: str,
        *,
        erase: bool = False,
        secure_erase: bool = False,
        quick_erase: bool = False,
        comment: str = "",
    ) -> Machine:
        """``POST ?op=release``; with ``erase`` MAAS wipes every disk of the machine."""
        form: dict[str, FormValue] = {"erase": erase}
        if erase:
            form["secure_erase"] = secure_erase
            form["quick_erase"] = quick_erase
        if comment:
            form["comment"] = comment
        data = self._post(f"machines/{system_id}/", op="release", form=form, system_id=system_id)
        return _parse(Machine, data, "a machine action", system_id)

    def abort(self, system_id: str, *, comment: str = "") -> Machine:
        """``POST ?op=abort``: stop a running commissioning, deployment, test or erase."""
        form: dict[str, FormValue] = {"comment": comment} if comment else {}
        data = self._post(f"machines/{system_id}/", op="abort", form=form, system_id=system_id)
        return _parse(Machine, data, "a machine action", system_id)

    def set_storage_layout(
        self, system_id: str, *, layout: str, root_device: int | None = None,
        boot_size: str | None = None, root_size: str | None = None,
    ) -> Machine:
        """``POST ?op=set_storage_layout`` (machine must be Ready)."""
        form: dict[str, FormValue] = {"storage_layout": layout}
        if root_device is not None:
            form["root_device"] = root_device
        if boot_size:
            form["boot_size"] = boot_size
        if root_size:
            form["root_size"] = root_size
        data = self._post(f"machines/{system_id}/", op="set_storage_layout", form=form,
                          system_id=system_id)
        return _parse(Machine, data, "a machine action", system_id)

    def events(self, system_id: str, *, limit: int = 5) -> list[Event]:
        """The machine's latest events, newest first (``GET /events/?op=query``)."""
        data = self._get("events/", op="query", system_id=system_id,
                         params=[("id", system_id), ("limit", str(limit))])
        return [_parse(Event, e, "GET events/", system_id) for e in (data or {}).get("events", [])]

    # -- storage ------------------------------------------------------------------------

    def block_devices(self, system_id: str) -> list[BlockDevice]:
        """``GET /nodes/{system_id}/blockdevices/``."""
        data = self._get(f"nodes/{system_id}/blockdevices/", system_id=system_id)
        return [_parse(BlockDevice, d, "GET blockdevices/", system_id) for d in data or []]

    def node_devices(self, system_id: str, *, hardware_type: str | None = None) -> list[NodeDevice]:
        """``GET /nodes/{system_id}/devices/`` (PCI/USB devices found by commissioning)."""
        params = [("hardware_type", hardware_type)] if hardware_type else []
        data = self._get(f"nodes/{system_id}/devices/", params=params, system_id=system_id)
        return [_parse(NodeDevice, d, "GET devices/", system_id) for d in data or []]

    def set_boot_disk(self, system_id: str, device_id: int) -> None:
        """``POST /nodes/{system_id}/blockdevices/{id}/?op=set_boot_disk``."""
        self._post(f"nodes/{system_id}/blockdevices/{device_id}/", op="set_boot_disk",
                   system_id=system_id)

    # -- network ------------------------------------------------------------------------

    def subnets(self) -> list[Subnet]:
        """``GET /subnets/``."""
        return [_parse(Subnet, s, "GET subnets/") for s in self._get("subnets/") or []]

    def unlink_subnet(self, system_id: str, interface_id: int, link_id: int) -> Interface:
        """``POST /nodes/{system_id}/interfaces/{id}/?op=unlink_subnet``."""
        data = self._post(f"nodes/{system_id}/interfaces/{interface_id}/", op="unlink_subnet",
                          form={"id": link_id}, system_id=system_id)
        return _parse(Interface, data, "an interface action", system_id)

    def link_subnet(
        self, system_id: str, interface_id: int, *, subnet_id: int, mode: str = "STATIC",
        ip_address: str | None = None,
    ) -> Interface:
        """``POST /nodes/{system_id}/interfaces/{id}/?op=link_subnet`` (STATIC pins an address)."""
        form: dict[str, FormValue] = {"mode": mode, "subnet": subnet_id}
        if ip_address:
            form["ip_address"] = ip_address
        data = self._post(f"nodes/{system_id}/interfaces/{interface_id}/", op="link_subnet",
                          form=form, system_id=system_id)
        return _parse(Interface, data, "an interface action", system_id)

    # -- tags ---------------------------------------------------------------------------

    def tags(self) -> list[str]:
        """Names of all tags."""
        return [str(t["name"]) for t in self._get("tags/") or []]

    def create_tag(self, name: str, comment: str = "") -> None:
        """``POST /tags/`` (a manual tag: no XPath definition)."""
        self._post("tags/", form={"name": name, "comment": comment})

    def tag_machines(
        self, name: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> None:
        """``POST /tags/{name}/?op=update_nodes`` adding/removing system_ids."""
        form: dict[str, FormValue | Sequence[FormValue]] = {}
        if add:
            form["add"] = list(add)
        if remove:
            form["remove"] = list(remove)
        self._post(f"tags/{name}/", op="update_nodes", form=form)
