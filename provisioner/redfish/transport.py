"""The HTTP transport of the Redfish client: the project's HTTP policy (provisioner.http_policy)
with a BMC's limits, and its refusals as typed Redfish errors.

A BMC is a peer that can be broken or hostile. Whatever it answers, the client must neither
send credentials to anyone but that BMC, nor hold more than a bounded amount of its answer,
nor spend more than a bounded time on it. Everything here raises typed Redfish errors.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import requests

from provisioner.http_policy import deadline as _deadline
from provisioner.http_policy import jsonlimits, logsafe
from provisioner.http_policy.errors import (
    AnswerTooLarge,
    AnswerTooSlow,
    DeadlineExceeded,
    ForeignURL,
    HttpRefused,
    RedirectRefused,
)
from provisioner.http_policy.policy import DEFAULT_ANSWER_WALL_S, HttpPolicy
from provisioner.http_policy.session import GuardedSession
from provisioner.http_policy.urls import loggable_url, origin, redirect_allowed
from provisioner.redfish.errors import (
    BMCDeadline,
    BMCForeignLink,
    BMCLimitExceeded,
    BMCRedirectRefused,
    BMCTimeout,
    RedfishError,
)

log = logging.getLogger(__name__)
logsafe.install(("provisioner.redfish.transport",))

# The largest real answers are BIOS attribute registries (a few MB) and $expand-ed collections.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# An 8-GPU server lists well under a hundred chassis, NICs or PCIe devices.
DEFAULT_MAX_MEMBERS = 2000
MAX_JSON_DEPTH = jsonlimits.MAX_DEPTH
ANSWER_WALL_S = DEFAULT_ANSWER_WALL_S
DEADLINE_HINT = ("a healthy BMC answers within this time: check it (its web UI, a BMC reset); "
                 "raise settings.redfish.discovery_deadline_s only for genuinely slow BMCs")

# The host deadline is the HTTP policy's context deadline: one for all of a host's traffic.
host_deadline = _deadline.deadline
remaining_s = _deadline.remaining_s
__all__ = ["BMCTransport", "check_deadline", "deadline_error", "host_deadline", "loggable_url",
           "origin", "parse_json", "remaining_s"]


def check_deadline(bmc: str, path: str | None) -> float | None:
    """Raise :class:`BMCDeadline` when the host's deadline has passed; else seconds left."""
    try:
        return _deadline.check(path or "")
    except DeadlineExceeded as exc:
        raise _bmc_deadline(exc.allowed_s, bmc, path) from None


def deadline_error(bmc: str, path: str | None) -> BMCDeadline:
    """The host's deadline as the reason a request's wait (cut to what was left) ended."""
    return _bmc_deadline(_deadline.allowed_s() or 0.0, bmc, path)


def _bmc_deadline(allowed_s: float, bmc: str, path: str | None) -> BMCDeadline:
    return BMCDeadline(f"gave up: the BMC's answers took longer than the {allowed_s:g}s "
                       "allowed for this host", bmc=bmc, path=path, hint=DEADLINE_HINT)


def parse_json(raw: bytes, *, bmc: str, path: str) -> Any:
    """The JSON in ``raw`` ({} when empty), ``None`` when it is not JSON (an HTML error page).

    Raises :class:`BMCLimitExceeded` for JSON that no BMC sends: nested deeper than
    MAX_JSON_DEPTH, numbers that overflow or run to hundreds of digits, NaN/Infinity.
    """
    if not raw.strip():
        return {}
    try:
        return jsonlimits.loads(raw)
    except jsonlimits.JSONLimit as exc:
        raise BMCLimitExceeded(f"answered {exc}", bmc=bmc, path=path) from None
    except jsonlimits.NotJSON:
        return None


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


def _same_host_https(base: str, target: str) -> bool:
    """Where a BMC may redirect: its own origin, or its host's https."""
    return redirect_allowed(base, target, upgrade_to_https=True)


def foreign_link(bmc: str, url: str) -> BMCForeignLink:
    """The refusal of a link in a BMC's answers that leads off the BMC."""
    return BMCForeignLink(
        f"refused to request {loggable_url(url)}: a link in the BMC's answers leads off the "
        "BMC; nothing was sent",
        bmc=bmc, path=urlsplit(url).path,
        hint="the BMC's Redfish service is broken or tampered with: check its firmware",
    )


def as_redfish_error(exc: HttpRefused, bmc: str) -> RedfishError:
    """The HTTP policy's refusal as the Redfish error a BMC conversation reports."""
    path = urlsplit(exc.url).path
    if isinstance(exc, DeadlineExceeded):
        return _bmc_deadline(exc.allowed_s, bmc, path)
    if isinstance(exc, RedirectRefused):
        return BMCRedirectRefused(
            f"{exc.message.replace(' (the peer this client talks to)', '')}, so no "
            "credentials or session token went there",
            bmc=bmc, path=path, status=exc.status,
            hint="check the BMC address in the site file (use the BMC's own https URL) "
            "and that nothing between here and the BMC rewrites its traffic")
    if isinstance(exc, ForeignURL):
        return foreign_link(bmc, exc.url)
    if isinstance(exc, AnswerTooLarge):
        return BMCLimitExceeded(exc.message.replace("allowed", "a Redfish answer may have"),
                                bmc=bmc, path=path, status=exc.status)
    if isinstance(exc, AnswerTooSlow):
        return BMCTimeout(exc.message, bmc=bmc, path=path,
                          hint="check the BMC's health (reset it if it keeps dripping or "
                          "stalling answers)")
    return RedfishError(exc.message, bmc=bmc, path=path, status=exc.status)


class BMCTransport(GuardedSession):
    """A requests Session for one BMC under the project's HTTP policy.

    Beyond the policy's rules (same-origin redirects, also to the host's https; no
    environment proxies or .netrc; capped, timed answers) it maps each refusal to the typed
    Redfish error, naming the BMC.
    """

    def __init__(self, *, bmc: str, base_url: str, max_bytes: int,
                 answer_wall_s: float = ANSWER_WALL_S, pool_maxsize: int = 4) -> None:
        super().__init__(base_url, HttpPolicy(max_bytes=max_bytes, answer_wall_s=answer_wall_s,
                                              upgrade_to_https=True),
                         pool_maxsize=pool_maxsize)
        self.bmc = bmc
        self.base_url = base_url

    def request(self, method: str, url: str, *args: Any,  # type: ignore[override]
                **kwargs: Any) -> requests.Response:
        try:
            return super().request(method, url, *args, **kwargs)
        except HttpRefused as exc:
            raise as_redfish_error(exc, self.bmc) from None
