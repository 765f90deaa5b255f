"""A ``requests.Session`` bound to one origin under the policy: what a project client uses."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urljoin

import requests

from provisioner.http_policy.adapter import GuardedAdapter
from provisioner.http_policy.errors import RedirectRefused
from provisioner.http_policy.policy import HttpPolicy
from provisioner.http_policy.urls import loggable_url

log = logging.getLogger(__name__)


class GuardedSession(requests.Session):
    """Talks to ``origin`` only, under ``policy``.

    It reads nothing from the environment (no HTTP(S)_PROXY, no .netrc, no CA bundle
    variables: a site's proxy is ``policy.proxy``), follows a redirect only where the policy
    allows it (refusing, with the target named, before anything is sent there), and mounts
    a :class:`GuardedAdapter` for http and https, so every answer is capped and timed.
    ``pool_maxsize``: connections kept to the origin.
    """

    def __init__(self, origin: str, policy: HttpPolicy | None = None, *,
                 pool_maxsize: int = 10) -> None:
        super().__init__()
        self.trust_env = False
        self.origin = origin
        self.policy = policy or HttpPolicy()
        self.max_redirects = self.policy.max_redirects
        for prefix in ("https://", "http://"):
            self.mount(prefix, GuardedAdapter(origin, self.policy, pool_connections=1,
                                              pool_maxsize=pool_maxsize))

    def request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        params: Any = None,
        data: Any = None,
        headers: Any = None,
        cookies: Any = None,
        files: Any = None,
        auth: Any = None,
        timeout: Any = None,
        allow_redirects: bool = True,
        proxies: Any = None,
        hooks: Any = None,
        stream: bool | None = None,
        verify: Any = None,
        cert: Any = None,
        json: Any = None,
    ) -> requests.Response:
        """As ``requests.Session.request``; ``proxies`` is ignored (the policy decides)."""
        req = requests.Request(method=method.upper(), url=url, headers=headers, files=files,
                               data=data or {}, json=json, params=params or {}, auth=auth,
                               cookies=cookies, hooks=hooks)
        prep = self.prepare_request(req)
        send = {"timeout": timeout, "verify": self.verify if verify is None else verify,
                "cert": cert or self.cert, "stream": bool(stream)}
        for _hop in range(self.max_redirects + 1):
            resp = self.get_adapter(prep.url or "").send(prep, **send)
            resp.request = prep
            if not (allow_redirects and resp.is_redirect):
                return resp
            prep = self._follow(prep, resp)
        raise RedirectRefused(
            f"{method} redirected more than {self.max_redirects} times; not followed further",
            url=loggable_url(url), target=loggable_url(prep.url or ""), method=method)

    def _follow(self, prep: requests.PreparedRequest,
                resp: requests.Response) -> requests.PreparedRequest:
        target = urljoin(prep.url or "", resp.headers["Location"])
        adapter = self.get_adapter(target)
        allowed = adapter.allows(target) if isinstance(adapter, GuardedAdapter) else False
        if not allowed:
            resp.close()
            raise RedirectRefused(
                f"{prep.method} was redirected ({resp.status_code}) to {loggable_url(target)}, "
                f"which is not {loggable_url(self.origin)} (the peer this client talks to); "
                "not followed, so nothing was sent there",
                url=loggable_url(prep.url or ""), target=loggable_url(target),
                method=prep.method or "", status=resp.status_code)
        log.debug("following %d redirect to %s", resp.status_code, loggable_url(target))
        resp.close()
        nxt = prep.copy()
        nxt.prepare_url(target, None)
        if resp.status_code == 303 or (resp.status_code in (301, 302)
                                       and prep.method not in ("GET", "HEAD")):
            # What browsers and requests do: the redirected request becomes a bodiless GET.
            nxt.method = "GET"
            nxt.body = None
            for name in ("Content-Type", "Content-Length", "Transfer-Encoding"):
                nxt.headers.pop(name, None)
        return nxt
