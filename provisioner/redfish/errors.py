"""Typed Redfish failures, each with a short ``reason`` the rack summary groups hosts by.

Messages name the BMC and the resource, carry the Redfish extended message when the BMC sent one,
and never contain credentials or session tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from provisioner.exceptions import BMCError
from provisioner.http_policy import logsafe


@dataclass(frozen=True)
class ExtendedMessage:
    """One entry of a Redfish ``@Message.ExtendedInfo`` array."""

    message_id: str
    message: str
    resolution: str | None = None

    def __str__(self) -> str:
        text = f"{self.message_id}: {self.message}" if self.message_id else self.message
        if self.resolution:
            text += f" (resolution: {self.resolution})"
        return text


def parse_extended_info(body: Any) -> list[ExtendedMessage]:
    """Read the extended messages of a Redfish error (or action result) body; [] if none."""
    if not isinstance(body, dict):
        return []
    container = body.get("error", body)
    if not isinstance(container, dict):
        return []
    infos = container.get("@Message.ExtendedInfo") or body.get("@Message.ExtendedInfo") or []
    out: list[ExtendedMessage] = []
    if isinstance(infos, list):
        for info in infos:
            if isinstance(info, dict) and (info.get("Message") or info.get("MessageId")):
                out.append(
                    ExtendedMessage(
                        message_id=str(info.get("MessageId") or ""),
                        message=str(info.get("Message") or ""),
                        resolution=info.get("Resolution"),
                    )
                )
    if not out and isinstance(container.get("message"), str):
        out.append(ExtendedMessage(str(container.get("code") or ""), container["message"]))
    return out


class RedfishError(BMCError):
    """A Redfish request failed; ``reason`` is a short category for summaries."""

    reason = "redfish error"

    def __init__(
        self,
        message: str,
        *,
        bmc: str = "",
        path: str | None = None,
        status: int | None = None,
        extended: list[ExtendedMessage] | None = None,
        retry_after_s: float | None = None,
        hint: str | None = None,
    ) -> None:
        self.bmc = bmc
        self.path = path
        self.status = status
        self.extended = list(extended or [])
        self.retry_after_s = retry_after_s
        where = bmc
        if path:
            where = f"{bmc} {path}" if bmc else path
        text = f"{where}: {message}" if where else message
        if status is not None:
            text += f" (HTTP {status})"
        if self.extended:
            text += "; BMC says: " + "; ".join(str(m) for m in self.extended)
        super().__init__(text, hint=hint)

    def scrub(self, secrets: Iterable[str] = ()) -> None:
        """Replace each of ``secrets``, and every secret a client remembered, with ``***``
        wherever the BMC's own words put one (an error quoting the password or token)."""
        def clean(text: str) -> str:
            return logsafe.scrub(text, secrets)

        self.extended = [ExtendedMessage(clean(m.message_id), clean(m.message),
                                         clean(m.resolution) if m.resolution else None)
                         for m in self.extended]
        self.message = clean(self.message)
        self.args = (self.message,)
        self.hint = clean(self.hint) if self.hint else self.hint

    def message_ids(self) -> list[str]:
        """The MessageIds of the extended info (e.g. ``Base.1.8.SessionLimitExceeded``)."""
        return [m.message_id for m in self.extended]


class BMCAuthError(RedfishError):
    """The BMC rejected the credentials (401/403)."""

    reason = "auth failed"


class BMCTimeout(RedfishError):
    """The BMC did not answer within the timeout, after retries."""

    reason = "timeout"


class BMCTLSError(RedfishError):
    """The BMC's certificate did not verify against the site's CA bundle."""

    reason = "TLS"


class BMCUnreachable(RedfishError):
    """The BMC refused or reset the connection (wrong address, BMC down)."""

    reason = "unreachable"


class BMCSessionLimit(RedfishError):
    """The BMC has no free session slots and basic auth is not accepted either."""

    reason = "no sessions"


class BMCNotFound(RedfishError):
    """A resource the request needs does not exist on this BMC (404)."""

    reason = "not found"


class BMCServerError(RedfishError):
    """The BMC kept answering 5xx/429 after all retries."""

    reason = "BMC error"


class BMCBadResponse(RedfishError):
    """The BMC answered something that is not the Redfish JSON expected."""

    reason = "bad response"


class BMCUnsupported(RedfishError):
    """The BMC does not offer what was asked (a boot target, a ResetType, virtual media)."""

    reason = "unsupported"


class BMCVerifyFailed(RedfishError):
    """A setting was accepted (2xx) but reading it back shows it did not take effect."""

    reason = "not applied"


class BMCJobFailed(RedfishError):
    """A BMC job or task (e.g. a Dell BIOS configuration job) failed or never finished."""

    reason = "job failed"


class BMCStateTimeout(RedfishError):
    """The host did not reach the wanted state (power, job) in time."""

    reason = "state timeout"


class BMCRedirectRefused(RedfishError):
    """The BMC redirected a request to another host or to plain http; not followed."""

    reason = "unsafe redirect"


class BMCForeignLink(BMCBadResponse):
    """A link in the BMC's answer leads off the BMC (another host, user info); not followed."""

    reason = "foreign link"


class BMCLimitExceeded(BMCBadResponse):
    """The BMC answered more than a BMC ever should: too large, too deep, too many members."""

    reason = "limit exceeded"


class BMCDeadline(RedfishError):
    """The host's whole conversation (e.g. its discovery) took longer than its deadline."""

    reason = "deadline exceeded"
