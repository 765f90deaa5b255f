"""The policy as a requests transport adapter: mount it on any session (or hand it to a
library's adapter hook) and nothing leaves the origin, no environment proxy is used, and
every answer is read under the size cap, the answer's wall time and the context deadline."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import requests
import requests.adapters
import urllib3.exceptions

from provisioner.http_policy import deadline, logsafe
from provisioner.http_policy.errors import AnswerTooLarge, AnswerTooSlow, BrokenAnswer, ForeignURL
from provisioner.http_policy.policy import HttpPolicy
from provisioner.http_policy.urls import loggable_url, redirect_allowed, same_origin

log = logging.getLogger(__name__)
logsafe.install(("provisioner.http_policy.adapter",))

CHUNK = 64 * 1024
# What a socket raises when the peer stops sending in the middle of an answer.
_STALLED = (urllib3.exceptions.ReadTimeoutError, socket.timeout, TimeoutError)


class GuardedAdapter(requests.adapters.HTTPAdapter):
    """An HTTPAdapter bound to ``origin`` that enforces ``policy`` on every exchange.

    With ``stream=False`` (what most clients and libraries use) the body is read here, under
    the policy; with ``stream=True`` the caller reads it through :func:`iter_body`.
    """

    def __init__(self, origin: str, policy: HttpPolicy | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("max_retries", 0)
        super().__init__(**kwargs)
        self.origin = origin
        self.policy = policy or HttpPolicy()

    def allows(self, url: str) -> bool:
        """Whether a request to ``url`` may be sent: the origin itself, or its https
        upgrade where the policy allows it."""
        return same_origin(self.origin, url) or redirect_allowed(
            self.origin, url, upgrade_to_https=self.policy.upgrade_to_https)

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        url = request.url or ""
        method = request.method or ""
        if not self.allows(url):
            raise ForeignURL(
                f"refused to send {method} to {loggable_url(url)}: not "
                f"{loggable_url(self.origin)}, the peer this client talks to; nothing was sent",
                url=loggable_url(url), method=method)
        timeout = deadline.clip_timeout(timeout, loggable_url(url), method)
        started = time.monotonic()
        try:
            resp = super().send(request, stream=True, timeout=timeout, verify=verify,
                                cert=cert, proxies=self.policy.proxies())
        except Exception as exc:
            log.debug("%s %s -> %s after %.0f ms", method, loggable_url(url),
                      type(exc).__name__, (time.monotonic() - started) * 1000)
            raise
        if stream:
            return resp
        try:
            size = read_body(resp, self.policy, started=started)
        finally:
            resp.close()
        log.debug("%s %s -> %d in %.0f ms, %d bytes", method, loggable_url(url),
                  resp.status_code, (time.monotonic() - started) * 1000, size)
        return resp


def iter_body(resp: requests.Response, policy: HttpPolicy, *, max_bytes: int | None = None,
              started: float | None = None) -> Iterator[bytes]:
    """The answer's body in chunks as they arrive, under the policy: at most ``max_bytes``
    (default the policy's), within the answer's wall time and the context deadline. A body
    that stops arriving is :class:`AnswerTooSlow`, not a broken answer."""
    url = loggable_url(resp.url or (resp.request.url if resp.request else "") or "")
    method = (resp.request.method if resp.request else "") or ""
    cap = policy.max_bytes if max_bytes is None else max_bytes

    def too_large(size: str) -> AnswerTooLarge:
        return AnswerTooLarge(f"answered {size}, more than the {_size(cap)} allowed; not read",
                              url=url, method=method, status=resp.status_code)

    declared = resp.headers.get("Content-Length", "").strip()
    if declared.isdigit() and (len(declared) > 20 or int(declared) > cap):  # int() stops at 4300
        raise too_large(f"{declared if len(declared) <= 20 else 'a ' + str(len(declared)) + '-digit'} bytes")
    size = 0
    give_up = (time.monotonic() if started is None else started) + policy.answer_wall_s
    while True:
        deadline.check(url, method)
        if time.monotonic() > give_up:
            raise AnswerTooSlow(
                f"answer still arriving after {policy.answer_wall_s:g}s ({size} bytes); "
                "given up", url=url, method=method, status=resp.status_code, received=size)
        try:
            # read1 returns what has arrived, so a peer dripping bytes still meets the walls.
            chunk = resp.raw.read1(CHUNK, decode_content=True)
        except _STALLED:
            raise AnswerTooSlow(
                f"the answer stopped after {size} bytes and nothing more came (HTTP "
                f"{resp.status_code}): the peer went silent mid-answer", url=url,
                method=method, status=resp.status_code, received=size) from None
        except urllib3.exceptions.HTTPError as exc:  # cut short, a bad chunk, bad compression
            raise BrokenAnswer(
                f"the answer broke off after {size} bytes (HTTP {resp.status_code}): "
                f"{type(exc).__name__}", url=url, method=method, status=resp.status_code,
                received=size) from None
        if not chunk:
            return
        size += len(chunk)
        if size > cap:
            raise too_large(f"more than {size} bytes")
        yield chunk


def read_body(resp: requests.Response, policy: HttpPolicy, *,
              started: float | None = None) -> int:
    """Read the whole body under the policy into ``resp`` (``resp.content`` is then set);
    returns its size."""
    chunks = list(iter_body(resp, policy, started=started))
    resp._content = b"".join(chunks)
    resp._content_consumed = True  # type: ignore[attr-defined]
    return len(resp._content)


def _size(count: int) -> str:
    if count >= 1024 * 1024 and count % (1024 * 1024) == 0:
        return f"{count // (1024 * 1024)} MiB"
    return f"{count} bytes"
