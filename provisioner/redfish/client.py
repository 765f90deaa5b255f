"""A Redfish client over the DMTF ``redfish`` library: auth, TLS, timeouts, retries, typed errors.

The library does the HTTP and header bookkeeping; this layer decides policy: session login with a
fallback to basic auth (sessions are scarce on BMCs), always logging out, verifying TLS against the
site's CA bundle, retrying only what is safe to retry, and turning every failure into a
:class:`~provisioner.redfish.errors.RedfishError` that carries the BMC's extended message.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlparse

import requests
import requests.adapters
import urllib3
from redfish.rest.v1 import HttpClient, RestResponse
from requests.utils import DEFAULT_CA_BUNDLE_PATH
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from provisioner.http_policy import logsafe
from provisioner.redfish.errors import (
    BMCAuthError,
    BMCBadResponse,
    BMCDeadline,
    BMCForeignLink,
    BMCLimitExceeded,
    BMCNotFound,
    BMCRedirectRefused,
    BMCServerError,
    BMCSessionLimit,
    BMCTimeout,
    BMCTLSError,
    BMCUnreachable,
    RedfishError,
    parse_extended_info,
)
from provisioner.redfish.expand import (
    Expanded,
    check_expanded,
    expand_query,
    member_link,
    norm_link,
)
from provisioner.redfish.fanout import Fanout, Gate
from provisioner.redfish.transport import (
    ANSWER_WALL_S,
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_RESPONSE_BYTES,
    BMCTransport,
    check_deadline,
    check_members,
    deadline_error,
    foreign_link,
    host_deadline,
    origin,
    parse_json,
    remaining_s,
)
from provisioner.redfish.upload import UploadBody
from provisioner.secrets import Secret

log = logging.getLogger(__name__)
logsafe.install(("redfish", "redfish.rest.v1", "provisioner.redfish.client"))

ROOT = "/redfish/v1/"
DEFAULT_SESSIONS = "/redfish/v1/SessionService/Sessions"
# MessageIds BMCs use when every session slot is taken (iDRAC answers 503 with RAC0218).
SESSION_LIMIT_IDS = ("SessionLimitExceeded", "RAC0218")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# A POST that times out or gets a 500 may have been applied (a reset!); only these are safe.
NON_IDEMPOTENT_RETRY_STATUSES = frozenset({429, 503})
# Precondition Failed (a stale If-Match) and Precondition Required (none sent): DSP0266 6.5.
PRECONDITION_STATUSES = frozenset({412, 428})
# Failures after which another way in (basic auth, no $expand) would not do better, or would
# hand the credentials to a peer that already misbehaved.
FATAL = (BMCAuthError, BMCTimeout, BMCTLSError, BMCUnreachable, BMCRedirectRefused,
         BMCLimitExceeded, BMCDeadline, BMCForeignLink)
# A member read failing with these ends the conversation; any other failure is that member's.
MEMBER_FATAL = (BMCAuthError, BMCTimeout, BMCTLSError, BMCUnreachable, BMCDeadline)
# An $expand-ed read that fails with anything else (a 4xx/5xx, a timeout or an answer too
# large for a heavy expansion, a reset connection) is read again member by member.
EXPAND_FATAL = (BMCAuthError, BMCTLSError, BMCRedirectRefused, BMCDeadline, BMCForeignLink)
# Answers saying the query itself is not supported: stop sending $expand to this BMC.
EXPAND_UNSUPPORTED = frozenset({400, 404, 405, 406, 501})
MAX_PAGES = 64  # Members@odata.nextLink pages followed (max_members bounds them too)
DEFAULT_CONNECTIONS = 4
T = TypeVar("T")
R = TypeVar("R")
__all__ = ["ClientOptions", "MemberRead", "RedfishClient", "Reply", "connect", "host_deadline"]


def _links(members: Any) -> list[str]:
    """The ``@odata.id`` of each reference in a Members list (a BMC may send any type)."""
    found = (member_link(m) for m in members) if isinstance(members, list) else ()
    return [link for link in found if link]


@dataclass(frozen=True)
class ClientOptions:
    """Connection policy for one BMC, normally from the site file's ``settings.redfish``."""

    verify_tls: bool = True
    ca_bundle: Path | None = None
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    prefer_session: bool = True
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    answer_wall_s: float = ANSWER_WALL_S  # one answer, however it trickles in
    max_members: int = DEFAULT_MAX_MEMBERS
    connections: int = DEFAULT_CONNECTIONS  # requests in flight to this BMC at most


@dataclass
class MemberRead:
    """A collection's members that could be read, in listed order, and those that failed."""

    bodies: list[dict[str, Any]]
    failed: list[tuple[str, RedfishError]] = field(default_factory=list)


@dataclass
class Reply:
    """A successful Redfish answer: status, JSON body (``{}`` when empty) and headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        """A response header, case-insensitively."""
        low = name.lower()
        for key, value in self.headers.items():
            if key.lower() == low:
                return value
        return None


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _root_cause(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    cur: BaseException = exc
    while id(cur) not in seen:
        seen.add(id(cur))
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            break
        cur = nxt
    return cur


class RedfishClient:
    """One authenticated conversation with one BMC; use as a context manager so it logs out."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: Secret,
        options: ClientOptions | None = None,
        *,
        name: str = "",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.name = name or urlparse(self.base_url).netloc
        self.options = options or ClientOptions()
        self._username = username
        self._password = password
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests_made = 0
        self.auth_method: str | None = None
        self.warnings: list[str] = []
        self.root: dict[str, Any] = {}
        self._standard_links: dict[str, str | None] = {}  # service(): names the root lacks
        self._tokens: set[str] = set()  # every session token given: scrubbed from errors
        self._closed = False
        logsafe.remember(self._secret_words())
        self._session_location: str | None = None
        self._expand: str | None = None  # the $expand value this BMC takes; '' for none
        self._expand_failures = 0
        self._gate = Gate(self.options.connections)
        # Twice the threads as connections: a thread waiting on nested reads (an adapter on
        # its ports) holds no connection, and the gate, not the threads, sets the pace.
        self._fanout = Fanout(2 * self.options.connections, name=self.name)
        self._login_lock = threading.Lock()
        cafile: str | None = None
        if self.options.verify_tls:
            # The library turns TLS verification off unless it is given a CA file, so the
            # default trust store is passed explicitly when the site names no bundle.
            cafile = str(self.options.ca_bundle) if self.options.ca_bundle else DEFAULT_CA_BUNDLE_PATH
            if self.options.ca_bundle and not Path(self.options.ca_bundle).is_file():
                raise BMCTLSError(
                    f"CA bundle {self.options.ca_bundle} does not exist",
                    bmc=self.name,
                    hint="fix settings.redfish.ca_bundle in the site file (a PEM file of the "
                    "CA that signed the BMC certificates)",
                )
        pool = max(4, self.options.connections)
        # BMC traffic never goes through the laptop's HTTP(S)_PROXY, and reading the proxy and
        # .netrc settings from the environment on every request costs ~1 ms of CPU each,
        # which is what limits discovery of hundreds of BMCs.
        lean = BMCTransport(bmc=self.name, base_url=self.base_url,
                            max_bytes=self.options.max_response_bytes,
                            answer_wall_s=self.options.answer_wall_s, pool_maxsize=pool)
        self._lib = HttpClient(
            self.base_url,
            username=None,
            password=None,
            cafile=cafile,
            timeout=self.options.timeout_s,
            max_retry=0,
            check_connectivity=False,
            https_adapter=lean.get_adapter("https://"),
        )
        self._lib._session.close()
        self._lib._session = lean
        if not self.options.verify_tls:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    # -- context management -------------------------------------------------------------

    def __enter__(self) -> RedfishClient:
        self.login()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedfishClient({self.base_url!r}, user={self._username!r}, auth={self.auth_method})"

    # -- auth ---------------------------------------------------------------------------

    def login(self) -> None:
        """Read the service root, then open a session, falling back to basic auth."""
        if not self.root:
            try:
                self.root = self.get(ROOT)
            except BMCAuthError:
                # Some BMCs wrongly protect the service root; carry on and authenticate.
                self.root = {}
        if self.options.prefer_session and self._try_session():
            return
        self._use_basic()

    def _try_session(self) -> bool:
        links = self.root.get("Links")
        link = links.get("Sessions") if isinstance(links, dict) else None
        sessions = link.get("@odata.id") if isinstance(link, dict) else None
        if not isinstance(sessions, str):
            sessions = None
        if not sessions and self.root and "SessionService" not in self.root:
            return False  # the service root offers no sessions (e.g. sushy-emulator)
        sessions = sessions or DEFAULT_SESSIONS
        body = {"UserName": self._username, "Password": self._password.reveal()}
        try:
            reply = self._request("POST", sessions, body=body, retry=False)
        except FATAL:
            raise  # a wrong password, a dead or hostile BMC: basic auth would not do better
        except RedfishError as exc:
            if any(mid for mid in exc.message_ids() if mid.endswith(SESSION_LIMIT_IDS)):
                self.warnings.append(
                    "BMC has no free session slots (close stale sessions); used basic auth"
                )
                log.warning("%s: session slots exhausted, falling back to basic auth", self.name)
            else:
                log.info("%s: session login not available (%s); using basic auth", self.name, exc)
            return False
        token = reply.header("X-Auth-Token")
        if not token:
            return False
        location = reply.header("Location") or reply.body.get("@odata.id")
        location = location if isinstance(location, str) else None
        with self._lock:
            self._tokens.add(token)
        logsafe.remember([token])
        self._lib.set_session_key(token)
        self._session_location = urlparse(location).path if location else None
        self.auth_method = "session"
        return True

    def _use_basic(self) -> None:
        raw = f"{self._username}:{self._password.reveal()}".encode()
        self._lib.set_authorization_key("Basic " + base64.b64encode(raw).decode())
        self.auth_method = "basic"

    def close(self) -> None:
        """Log out of the session (if any) and close connections; never raises."""
        try:
            if self._session_location:
                try:
                    self._request("DELETE", self._session_location, retry=False)
                except RedfishError as exc:
                    log.warning("%s: logout failed: %s", self.name, exc)
        finally:
            self._fanout.close()
            if not self._closed:
                self._closed = True
                logsafe.forget(self._secret_words())
            self._session_location = None
            self._lib.set_session_key(None)
            self._lib.set_authorization_key(None)
            self._lib._session.close()

    # -- requests -----------------------------------------------------------------------

    def get(self, path: str, *, query: dict[str, str | None] | None = None) -> dict[str, Any]:
        """GET a resource's JSON body (an answer that is only a Redfish error is refused)."""
        body = self._request("GET", path, query=query).body
        with self._scrubbed():
            _refuse_error_answer(body, self.name, path)
        return body

    def get_optional(self, path: str) -> dict[str, Any] | None:
        """GET a resource that a BMC may lack; ``None`` on 404."""
        try:
            return self.get(path)
        except BMCNotFound:
            return None

    def map(self, func: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[func(i) for i in items]`` with up to ``options.connections`` reads in flight."""
        return self._fanout.map(func, items)

    def get_each(self, paths: Sequence[str]) -> list[dict[str, Any] | RedfishError]:
        """GET each path, a few at a time; a failed read comes back as its error, except the
        failures that end the conversation (auth, TLS, unreachable, timeout, deadline)."""

        def one(path: str) -> dict[str, Any] | RedfishError:
            try:
                return self.get(path)
            except MEMBER_FATAL:
                raise
            except RedfishError as exc:
                return exc

        return self.map(one, paths)

    def service(self, name: str) -> str | None:
        """The service root's link to a top-level resource (``Systems``, ``Chassis``,
        ``Managers``, ``UpdateService``...), else its standard URI if that answers; None when
        neither. AMI BMCs (the DGX H100's) at times drop every root link until reset."""
        link = member_link(self.root.get(name))
        if link:
            return link
        with self._lock:
            if name in self._standard_links:
                return self._standard_links[name]
        standard = f"{ROOT.rstrip('/')}/{name}"
        found: str | None = None
        try:
            self.get(standard)
        except FATAL:
            raise
        except RedfishError:
            pass  # not offered: a chassis controller has no Systems
        else:
            found = standard
            log.warning("%s: the service root links no %s, but %s answers: using it (a BMC "
                        "that dropped its root links may need a reset)", self.name, name,
                        standard)
        with self._lock:
            self._standard_links[name] = found
        return found

    def members(self, collection: str) -> list[dict[str, Any]]:
        """Every member of a collection, in one request with ``$expand`` where the BMC offers it."""
        read = self.read_members(collection)
        if read.failed:
            raise read.failed[0][1]
        return read.bodies

    def read_members(self, collection: str) -> MemberRead:
        """Every member of a collection: from one ``$expand``-ed answer where the BMC offers it
        and the answer checks out, else (and for members it left out) one GET each, a few at a
        time. A member that fails is returned in ``failed``; the others stay."""
        body, expanded = self._read_collection(collection)
        if expanded is None:
            plain = check_expanded(body, collection)
            expanded = plain if isinstance(plain, Expanded) else Expanded(
                order=list(dict.fromkeys(self._listed(body))))
            if not isinstance(plain, Expanded):
                expanded.bare = list(expanded.order)
        bodies = dict(expanded.bodies)
        failed: list[tuple[str, RedfishError]] = []
        for link, got in zip(expanded.bare, self.get_each(expanded.bare), strict=True):
            if isinstance(got, RedfishError):
                failed.append((link, got))
            else:
                bodies[norm_link(link)] = got
        return MemberRead([bodies[norm_link(link)] for link in expanded.order
                           if norm_link(link) in bodies], failed)

    def expanded_members(self, collection: str) -> dict[str, dict[str, Any]] | None:
        """Member bodies by ``@odata.id`` from one ``$expand``-ed read of a collection (its
        first page; members it left bare are missing), or None when the BMC does not offer
        $expand or the answer does not check out. To look up resources otherwise read one by
        one; the caller reads those it needs and does not find."""
        if self._expand_query() == "":
            return None
        _body, expanded = self._read_collection(collection, plain_fallback=False,
                                                whole=False)
        return None if expanded is None else dict(expanded.bodies)

    def _expand_query(self) -> str:
        if self._expand is None:
            self._expand = expand_query(self.root)
        return self._expand

    def _listed(self, body: dict[str, Any]) -> list[str]:
        """The member links of a plain collection answer, following its next pages."""
        links = _links(body.get("Members"))
        nxt = body.get("Members@odata.nextLink")
        pages = 0
        while isinstance(nxt, str) and nxt and pages < MAX_PAGES:
            pages += 1
            page = self.get(nxt)
            links += _links(page.get("Members"))
            check_members({"Members": links}, self.options.max_members, bmc=self.name,
                          path=nxt)
            nxt = page.get("Members@odata.nextLink")
        return links

    def _read_collection(self, path: str, *, plain_fallback: bool = True, whole: bool = True
                         ) -> tuple[dict[str, Any], Expanded | None]:
        """A collection's answer, and its checked expansion when ``$expand`` worked."""
        query = self._expand_query()
        if not query:
            return self.get(path), None
        status: int | None = None
        try:
            body = self._request("GET", path, query={"$expand": query},
                                 retry_timeouts=False).body
        except EXPAND_FATAL:
            raise
        except RedfishError as exc:
            problem, status = str(exc), exc.status
        else:
            checked = check_expanded(body, path, whole=whole)
            if isinstance(checked, Expanded):
                return body, checked
            problem = checked
        if not plain_fallback:
            log.info("%s: $expand=%s of %s not usable (%s)", self.name, query, path, problem)
            return {}, None
        plain = self.get(path)  # a collection that fails plainly too is the caller's problem
        if not isinstance(plain.get("Members"), list):
            return plain, None  # not the query's fault: the BMC lists no members at all
        self._expand_failures += 1
        if status in EXPAND_UNSUPPORTED or self._expand_failures >= 2:
            self._expand = ""
        log.info("%s: $expand=%s of %s not usable (%s); read member by member%s", self.name,
                 query, path, problem, "" if self._expand else " from now on")
        return plain, None

    def post(self, path: str, body: dict[str, Any]) -> Reply:
        """POST (an action); retried only where the BMC surely did not act on it."""
        return self._request("POST", path, body=body)

    def patch(self, path: str, body: dict[str, Any], *, etag: str | None = None) -> Reply:
        """PATCH a resource, with If-Match when the caller has its ETag. A BMC that demands
        one (428) or finds it stale (412) gets the PATCH again, once, with the current ETag."""
        headers = {"If-Match": etag} if etag else None
        try:
            return self._request("PATCH", path, body=body, headers=headers)
        except RedfishError as exc:
            if exc.status not in PRECONDITION_STATUSES:
                raise
            # AMI's "strong ETag" BMCs (DGX H100 among them) refuse a PATCH without If-Match
            # and take each ETag once; some give it only as a header, not as @odata.etag.
            try:
                fresh = self._current_etag(path)
            except RedfishError:
                raise exc from None
            if fresh is None:
                raise
            status = exc.status
        log.info("%s: PATCH %s needed the resource's current ETag (HTTP %s); sent again with "
                 "If-Match", self.name, path, status)
        return self._request("PATCH", path, body=body, headers={"If-Match": fresh})

    def _current_etag(self, path: str) -> str | None:
        """The resource's ETag: the HTTP header, else ``@odata.etag`` (None if neither)."""
        reply = self._request("GET", path)
        tag = reply.header("ETag") or reply.body.get("@odata.etag")
        return tag if isinstance(tag, str) and tag.strip() else None

    def delete(self, path: str) -> Reply:
        """DELETE a resource."""
        return self._request("DELETE", path)

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, str | None] | None = None,
        headers: dict[str, str] | None = None,
        retry: bool = True,
        retry_timeouts: bool = True,
    ) -> Reply:
        with self._scrubbed():
            path = self.own_path(path)
            used = self._lib.get_session_key()
            try:
                return self._request_retrying(method, path, body=body, query=query,
                                              headers=headers, retry=retry,
                                              retry_timeouts=retry_timeouts)
            except BMCAuthError:
                # A 401 on a request made with a session that worked means the session
                # expired (a BMC reset, an idle timeout during a long BIOS job): log in
                # again, once.
                if not retry or self.auth_method != "session":
                    raise
                self._renew_session(used)
                return self._request_retrying(method, path, body=body, query=query,
                                              headers=headers, retry=retry,
                                              retry_timeouts=retry_timeouts)

    @contextmanager
    def _scrubbed(self) -> Iterator[None]:
        """Errors raised inside carry no secret this client holds, however the BMC quoted
        it (its error messages are shown, logged and stored)."""
        try:
            yield
        except RedfishError as exc:
            exc.scrub(self._secret_words())
            raise

    def _secret_words(self) -> list[str]:
        """The password (as sent in JSON, in a URL, in a basic-auth header) and every
        session token this client was given."""
        password = self._password.reveal()
        basic = base64.b64encode(f"{self._username}:{password}".encode()).decode()
        with self._lock:
            tokens = list(self._tokens)
        return [password, json.dumps(password)[1:-1], quote(password, safe=""), basic,
                *tokens]

    def own_path(self, link: str) -> str:
        """A link as a path on this BMC: an absolute URL naming the BMC itself (some write
        their links so) is cut to its path; one naming anything else is refused, unsent."""
        if not link.lower().startswith(("http://", "https://")):
            return link
        dst = urlparse(link)
        if "@" in dst.netloc or origin(link) != origin(self.base_url):
            raise foreign_link(self.name, link)
        return dst.path + (f"?{dst.query}" if dst.query else "")

    def _request_retrying(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None,
        query: dict[str, str | None] | None,
        headers: dict[str, str] | None,
        retry: bool,
        retry_timeouts: bool = True,
    ) -> Reply:
        idempotent = method in ("GET", "PATCH", "DELETE", "HEAD")

        def retryable(exc: BaseException) -> bool:
            if not retry or not isinstance(exc, RedfishError):
                return False
            if isinstance(exc, BMCUnreachable):
                return True  # the request never reached the BMC
            if isinstance(exc, BMCTimeout):
                return idempotent and retry_timeouts
            if isinstance(exc, BMCServerError) and exc.status is not None:
                allowed = RETRY_STATUSES if idempotent else NON_IDEMPOTENT_RETRY_STATUSES
                return exc.status in allowed
            return False

        # Most requests succeed first time: only a failure pays for setting up tenacity.
        try:
            return self._once(method, path, body=body, query=query, headers=headers)
        except RedfishError as exc:
            if self.options.retries < 1 or not retryable(exc):
                raise
            self._sleep(self._delay(exc, 1))
        retrying = Retrying(
            stop=stop_after_attempt(self.options.retries),
            retry=retry_if_exception(retryable),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return self._once(method, path, body=body, query=query, headers=headers)
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        # The first attempt happened before tenacity took over.
        return self._delay(exc, state.attempt_number + 1)

    def _delay(self, exc: BaseException | None, retry_number: int) -> float:
        """Seconds before retry ``retry_number``: the BMC's Retry-After, else backoff."""
        if isinstance(exc, RedfishError) and exc.retry_after_s is not None:
            delay = min(exc.retry_after_s, self.options.max_backoff_s)
        else:
            base = self.options.backoff_s * (2 ** (retry_number - 1))
            delay = float(min(self.options.max_backoff_s, base * (1 + random.random() / 4)))
        left = remaining_s()
        # Past the host deadline the next attempt fails at once with the deadline's reason.
        return delay if left is None else max(0.0, min(delay, left))

    def _once(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None,
        query: dict[str, str | None] | None,
        headers: dict[str, str] | None,
    ) -> Reply:
        with self._gate.slot(self.name, path):
            left = check_deadline(self.name, path)
            timeout = self.options.timeout_s if left is None else min(self.options.timeout_s,
                                                                      left)
            with self._lock:
                self.requests_made += 1
            try:
                resp: RestResponse = self._lib._rest_request(
                    path, method=method, args=query, body=body, headers=headers,
                    timeout=timeout
                )
            except Exception as exc:
                error = self._transport_error(exc, path)
                if isinstance(error, BMCTimeout) and left is not None and \
                        left < self.options.timeout_s:
                    # The wait was cut to what the host's deadline had left: that ran out.
                    error = deadline_error(self.name, path)
                if isinstance(error, BMCUnreachable):
                    self._gate.refused(self.name)  # some BMCs reset what they cannot serve
                raise error from None
            status = int(resp.status)
            if status in (429, 503):
                self._gate.refused(self.name)  # busy with what else is in flight: fewer
        hdrs = dict(resp._http_response.headers) if resp._http_response is not None else {}
        return self._answer(method, path, status, hdrs, resp.read or b"")

    def upload(self, path: str, body: UploadBody, *, timeout_s: float) -> Reply:
        """POST a file to the BMC (a push firmware update), streamed from disk, through the
        same transport (same-host only, bounded answer, host deadline) and credentials; never
        retried or redirected (the BMC may have taken the image), except once with a fresh
        session when the session expired."""
        with self._scrubbed():
            return self._upload(path, body, timeout_s=timeout_s)

    def _upload(self, path: str, body: UploadBody, *, timeout_s: float) -> Reply:
        for attempt in (1, 2):
            used = self._lib.get_session_key()
            headers = self._lib._get_req_headers({"Content-Type": body.content_type})
            with self._lock:
                self.requests_made += 1
            try:
                resp = self._lib._session.request(
                    "POST", self.base_url + path, data=body.reopen(), headers=headers,
                    timeout=max(self.options.timeout_s, timeout_s), allow_redirects=False,
                    verify=self._lib.cafile or False)
            except Exception as exc:
                raise self._transport_error(exc, path) from None
            finally:
                body.close()
            try:
                return self._answer("POST", path, resp.status_code, dict(resp.headers),
                                    resp.content)
            except BMCAuthError:
                if attempt == 2 or self.auth_method != "session":
                    raise
                self._renew_session(used)
        raise AssertionError("unreachable")  # pragma: no cover

    def _renew_session(self, used: str | None) -> None:
        """Log in again after a 401 on a session that worked (a BMC reset, an idle timeout):
        once, however many requests made with session ``used`` saw the 401."""
        with self._login_lock:
            if self._lib.get_session_key() != used:
                return  # another request has logged in again already
            log.info("%s: session no longer valid; logging in again", self.name)
            self._lib.set_session_key(None)
            self._session_location = None
            if not self._try_session():
                self._use_basic()

    def _answer(self, method: str, path: str, status: int, hdrs: dict[str, str],
                raw: bytes) -> Reply:
        """A Reply for a 2xx answer; the typed error for any other."""
        data = parse_json(raw, bmc=self.name, path=path)
        if 200 <= status < 300:
            if data is None and raw.strip() == b"null":
                # JSON, but no resource: say so, not "not JSON" (which sends one hunting
                # for an HTML error page).
                raise BMCBadResponse(
                    "answered with a JSON null body where a Redfish resource (a JSON object) "
                    "belongs", bmc=self.name, path=path, status=status,
                    hint="the BMC's Redfish service has nothing behind this path: reset the "
                    "BMC, or update its firmware")
            if data is None:
                raise BMCBadResponse("answered with a body that is not JSON", bmc=self.name,
                                     path=path, status=status)
            reply = Reply(status, data if isinstance(data, dict) else {"value": data}, hdrs)
            check_members(reply.body, self.options.max_members, bmc=self.name, path=path)
            return reply
        extended = parse_extended_info(data)
        kwargs: dict[str, Any] = {"bmc": self.name, "path": path, "status": status,
                                  "extended": extended}
        if status in (401, 403):
            raise BMCAuthError(
                f"{method} rejected the credentials for user {self._username!r}",
                hint="check the credentials reference of this host in the site file "
                "(and that the BMC account is not locked out)",
                **kwargs,
            )
        if status == 404:
            raise BMCNotFound(f"{method} found no such resource", **kwargs)
        if status in RETRY_STATUSES or status >= 500:
            if any(m.message_id.endswith(SESSION_LIMIT_IDS) for m in extended) and (
                method != "POST"
            ):
                raise BMCSessionLimit("the BMC has no free session slots", **kwargs)
            retry_after = _parse_retry_after(hdrs.get("Retry-After") or hdrs.get("retry-after"))
            raise BMCServerError(f"{method} failed", retry_after_s=retry_after, **kwargs)
        raise RedfishError(f"{method} was refused", **kwargs)

    def _transport_error(self, exc: Exception, path: str) -> RedfishError:
        cause = _root_cause(exc)
        chain: list[BaseException] = []
        cur: BaseException | None = exc
        while cur is not None and len(chain) < 10:
            chain.append(cur)
            cur = cur.__cause__ or cur.__context__
        for err in chain:
            if isinstance(err, RedfishError):
                return err  # the transport's own verdict (a refused redirect, a limit)
        if any(isinstance(e, requests.exceptions.SSLError) for e in chain):
            return BMCTLSError(
                f"TLS verification failed: {cause}",
                bmc=self.name,
                path=path,
                hint="give the CA that signed the BMC certificate in settings.redfish.ca_bundle, "
                "or set verify_tls: false for this host/site if you accept the risk",
            )
        if any(isinstance(e, requests.exceptions.Timeout) for e in chain):
            return BMCTimeout(
                f"no answer within {self.options.timeout_s:g}s",
                bmc=self.name,
                path=path,
                hint="check the BMC is up and reachable, or raise settings.redfish.timeout_s",
            )
        if any(isinstance(e, requests.exceptions.ConnectionError) for e in chain):
            return BMCUnreachable(
                f"cannot connect: {type(cause).__name__}",
                bmc=self.name,
                path=path,
                hint="check the BMC address/port in the site file and the BMC network route",
            )
        return BMCBadResponse(f"request failed: {type(cause).__name__}: {cause}", bmc=self.name,
                              path=path)


@contextmanager
def connect(
    base_url: str, username: str, password: Secret, options: ClientOptions | None = None,
    *, name: str = "",
) -> Iterator[RedfishClient]:
    """Open a logged-in client and always log out at the end."""
    client = RedfishClient(base_url, username, password, options, name=name)
    try:
        client.login()
        yield client
    finally:
        client.close()


def _refuse_error_answer(body: Any, bmc: str, path: str) -> None:
    """A 2xx GET answer that is only a Redfish error object is a failed read, not an empty
    resource: captures keep a failed read's answer at the resource's path, and some BMCs
    answer so. ResourceMissingAtURI reads as a 404; an error of only Success messages passes."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or "@odata.id" in body:
        return
    extended = parse_extended_info(body)
    ids = [m.message_id.rsplit(".", 1)[-1] for m in extended]
    if ids and all(i == "Success" for i in ids):
        return
    cls = BMCNotFound if {"ResourceMissingAtURI", "ResourceNotFound"} & set(ids) \
        else BMCBadResponse
    raise cls("answered with a Redfish error instead of the resource", bmc=bmc, path=path,
              extended=extended)
