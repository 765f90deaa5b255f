"""The HTTP transport of the Redfish client: redirect policy, response limits, deadlines, logging.

A BMC is a peer that can be broken or hostile. Whatever it answers, the client must neither
send credentials to anyone but that BMC, nor hold more than a bounded amount of its answer,
nor spend more than a bounded time on it. Everything here raises typed Redfish errors.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import SplitResult, urljoin, urlsplit

import requests

from provisioner.redfish import logsafe
from provisioner.redfish.errors import (
    BMCDeadline,
    BMCForeignLink,
    BMCLimitExceeded,
    BMCRedirectRefused,
    BMCTimeout,
)

log = logging.getLogger(__name__)
logsafe.install(("provisioner.redfish.transport",))

MAX_REDIRECTS = 5
# The largest real answers are BIOS attribute registries (a few MB) and $expand-ed collections.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# An 8-GPU server lists well under a hundred chassis, NICs or PCIe devices.
DEFAULT_MAX_MEMBERS = 2000
# Redfish resources nest a dozen levels at most; the Python parser itself gives up near 1000.
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40
_CHUNK = 64 * 1024
# One answer, however it trickles in (the read timeout restarts with every byte): 16 MiB at
# 55 kB/s. Without it a BMC dripping a byte a second holds a power or boot verb for ever.
ANSWER_WALL_S = 300.0

_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("redfish_deadline", default=None)


@contextmanager
def host_deadline(seconds: float | None) -> Iterator[None]:
    """Bound all Redfish traffic made in this context (this thread) to ``seconds`` in total."""
    if seconds is None:
        yield
        return
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining_s() -> float | None:
    """Seconds left before the current host deadline, or ``None`` when there is none."""
    current = _DEADLINE.get()
    return None if current is None else current[0] - time.monotonic()


def check_deadline(bmc: str, path: str | None) -> float | None:
    """Raise :class:`BMCDeadline` when the host's deadline has passed; else seconds left."""
    current = _DEADLINE.get()
    if current is None:
        return None
    left = current[0] - time.monotonic()
    if left <= 0:
        raise BMCDeadline(
            f"gave up: the BMC's answers took longer than the {current[1]:g}s allowed "
            "for this host",
            bmc=bmc, path=path,
            hint="a healthy BMC answers within this time: check it (its web UI, a BMC reset); "
            "raise settings.redfish.discovery_deadline_s only for genuinely slow BMCs",
        )
    return left


def loggable_url(url: str) -> str:
    """A URL without user info, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


class _JSONLimit(ValueError):
    pass


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise _JSONLimit(f"an integer of {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _JSONLimit(f"the number {text[:40]} is out of range")
    return value


def _no_constant(text: str) -> float:
    raise _JSONLimit(f"{text} is not a JSON number")


def _too_deep(value: Any, limit: int) -> bool:
    # level by level, without recursion (the point is data too deep to recurse into)
    level = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list):
                    below.append(child)
        level = below
    return False


def parse_json(raw: bytes, *, bmc: str, path: str) -> Any:
    """The JSON in ``raw`` ({} when empty), ``None`` when it is not JSON (an HTML error page).

    Raises :class:`BMCLimitExceeded` for JSON that no BMC sends: nested deeper than
    MAX_JSON_DEPTH, numbers that overflow or run to hundreds of digits, NaN/Infinity.
    """
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw, parse_int=_bounded_int, parse_float=_finite_float,
                          parse_constant=_no_constant)
    except _JSONLimit as exc:
        raise BMCLimitExceeded(f"answered JSON with {exc}", bmc=bmc, path=path) from None
    except RecursionError:
        raise BMCLimitExceeded(f"answered JSON nested deeper than {MAX_JSON_DEPTH} levels",
                               bmc=bmc, path=path) from None
    except ValueError:
        return None
    # fewer brackets than the limit cannot nest past it: most answers skip the walk
    if (isinstance(data, dict | list) and raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH
            and _too_deep(data, MAX_JSON_DEPTH)):
        raise BMCLimitExceeded(f"answered JSON nested deeper than {MAX_JSON_DEPTH} levels",
                               bmc=bmc, path=path)
    return data


def check_members(body: dict[str, Any], max_members: int, *, bmc: str, path: str) -> None:
    """Refuse a collection listing more members than any server has (a BMC bug or an attack)."""
    members = body.get("Members")
    if isinstance(members, list) and len(members) > max_members:
        raise BMCLimitExceeded(
            f"lists {len(members)} collection members, more than the {max_members} a "
            "server can have; not read",
            bmc=bmc, path=path,
            hint="the BMC's Redfish service is broken: reset the BMC or update its firmware",
        )


def _same_host_https(origin: str, target: str) -> bool:
    src, dst = urlsplit(origin), urlsplit(target)
    if (src.hostname or "").lower() != (dst.hostname or "").lower() or not dst.hostname:
        return False
    try:
        src_port, dst_port = _port(src), _port(dst)
    except ValueError:  # a port that is no port
        return False
    if dst.scheme == "https":
        # Another port of the same address may be another BMC (a chassis manager's
        # nodes, a proxy, the lab): only the BMC's own https port, or the standard one an
        # http origin upgrades to.
        return dst_port == (src_port if src.scheme == "https" else 443)
    # The very origin the site file names (an http-only lab BMC) is not "elsewhere".
    return (dst.scheme, dst_port) == (src.scheme, src_port)


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def origin(url: str) -> tuple[str, str, int] | None:
    """Scheme, host and port of a URL (the scheme's port when none is written); None when
    its port is no port."""
    parts = urlsplit(url)
    try:
        return parts.scheme.lower(), (parts.hostname or "").lower(), _port(parts)
    except ValueError:
        return None


def foreign_link(bmc: str, url: str) -> BMCForeignLink:
    """The refusal of a link in a BMC's answers that leads off the BMC."""
    return BMCForeignLink(
        f"refused to request {loggable_url(url)}: a link in the BMC's answers leads off the "
        "BMC; nothing was sent",
        bmc=bmc, path=urlsplit(url).path,
        hint="the BMC's Redfish service is broken or tampered with: check its firmware",
    )


class BMCTransport(requests.Session):
    """A requests Session for one BMC: lean, bounded, and careful with redirects.

    It skips what BMC traffic never needs (cookies, environment proxies/.netrc, hooks: about a
    third of the client's CPU per request), follows a redirect only to the same host over https
    (so credentials and session tokens never leave the BMC), stops reading an answer past
    ``max_bytes`` or past the host deadline, and logs each exchange at debug level.
    """

    def __init__(self, *, bmc: str, base_url: str, max_bytes: int) -> None:
        super().__init__()
        self.trust_env = False
        self.bmc = bmc
        self.base_url = base_url
        self.max_bytes = max_bytes
        self.answer_wall_s = ANSWER_WALL_S

    def request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        params: Any = None,
        data: Any = None,
        headers: Any = None,
        timeout: Any = None,
        allow_redirects: bool = True,
        verify: Any = None,
        proxies: Any = None,
        **kwargs: Any,
    ) -> requests.Response:
        if kwargs:
            raise TypeError(f"unsupported request options: {sorted(kwargs)}")
        prep = requests.PreparedRequest()
        prep.prepare(method=method.upper(), url=url, headers=headers, data=data, params=params)
        self._check_origin(prep.url or url)
        for _hop in range(MAX_REDIRECTS + 1):
            resp = self._exchange(prep, timeout, True if verify is None else verify)
            if not (allow_redirects and resp.is_redirect):
                return resp
            prep = self._follow(prep, resp)
        raise BMCRedirectRefused(f"{method} redirected more than {MAX_REDIRECTS} times",
                                 bmc=self.bmc, path=urlsplit(url).path)

    def _check_origin(self, url: str) -> None:
        # Paths come from the BMC's own links: "@other-host/x" appended to the base URL would
        # turn the BMC's address into user info and send the token to other-host.
        src, dst = urlsplit(self.base_url), urlsplit(url)
        same = (dst.scheme, (dst.hostname or "").lower(), dst.port) == (
            src.scheme, (src.hostname or "").lower(), src.port)
        if not same or dst.username is not None or "@" in dst.netloc:
            raise foreign_link(self.bmc, url)

    def _exchange(self, prep: requests.PreparedRequest, timeout: Any,
                  verify: Any) -> requests.Response:
        path = urlsplit(prep.url or "").path
        left = check_deadline(self.bmc, path)
        if left is not None and timeout is not None:
            timeout = max(0.001, min(float(timeout), left))
        started = time.monotonic()
        try:
            resp = self.get_adapter(prep.url or "").send(
                prep, timeout=timeout, verify=verify, proxies={}, stream=True, cert=None)
        except Exception as exc:
            log.debug("%s %s -> %s after %.0f ms", prep.method, loggable_url(prep.url or ""),
                      type(exc).__name__, (time.monotonic() - started) * 1000)
            raise
        try:
            size = self._read_body(resp, path)
        finally:
            resp.close()
        log.debug("%s %s -> %d in %.0f ms, %d bytes", prep.method, loggable_url(prep.url or ""),
                  resp.status_code, (time.monotonic() - started) * 1000, size)
        return resp

    def _read_body(self, resp: requests.Response, path: str) -> int:
        def too_large(size: str) -> BMCLimitExceeded:
            return BMCLimitExceeded(
                f"answered {size}, more than the {self.max_bytes // (1024 * 1024)} MiB a "
                "Redfish answer may have; not read",
                bmc=self.bmc, path=path, status=resp.status_code,
            )

        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise too_large(f"{int(declared)} bytes")
        chunks: list[bytes] = []
        size = 0
        give_up = time.monotonic() + self.answer_wall_s
        while True:
            check_deadline(self.bmc, path)
            if time.monotonic() > give_up:
                raise BMCTimeout(
                    f"answer still arriving after {self.answer_wall_s:g}s ({size} bytes); "
                    "given up", bmc=self.bmc, path=path,
                    hint="check the BMC's health (reset it if it keeps dripping answers)")
            # read1 returns what has arrived, so a BMC dripping bytes still meets the deadline.
            chunk = resp.raw.read1(_CHUNK, decode_content=True)
            if not chunk:
                break
            size += len(chunk)
            if size > self.max_bytes:
                raise too_large(f"more than {size} bytes")
            chunks.append(chunk)
        resp._content = b"".join(chunks)
        resp._content_consumed = True  # type: ignore[attr-defined]
        return size

    def _follow(self, prep: requests.PreparedRequest,
                resp: requests.Response) -> requests.PreparedRequest:
        target = urljoin(prep.url or "", resp.headers["Location"])
        if not _same_host_https(self.base_url, target):
            raise BMCRedirectRefused(
                f"{prep.method} was redirected ({resp.status_code}) to {loggable_url(target)}, "
                "which is not this BMC over https; not followed, so no credentials or "
                "session token went there",
                bmc=self.bmc, path=urlsplit(prep.url or "").path, status=resp.status_code,
                hint="check the BMC address in the site file (use the BMC's own https URL) "
                "and that nothing between here and the BMC rewrites its traffic",
            )
        log.debug("following %d redirect to %s", resp.status_code, loggable_url(target))
        nxt = prep.copy()
        nxt.prepare_url(target, None)
        if resp.status_code == 303 or (resp.status_code in (301, 302)
                                       and prep.method not in ("GET", "HEAD")):
            # What browsers and requests do: the redirected request becomes a bodiless GET.
            nxt.method = "GET"
            nxt.body = None
            for name in ("Content-Type", "Content-Length"):
                nxt.headers.pop(name, None)
        return nxt
