"""What the HTTP policy refuses, as typed errors a client maps to its own."""

from __future__ import annotations

from provisioner.exceptions import ProvisionerError


class HttpRefused(ProvisionerError):
    """The policy stopped an exchange; ``url`` is loggable (no user info), ``status`` the
    HTTP status of the answer that led to it, when there was one."""

    reason = "refused"

    def __init__(self, message: str, *, url: str, method: str = "", status: int | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.url = url
        self.method = method
        self.status = status


class ForeignURL(HttpRefused):
    """A request would go to another origin than the one the client is bound to (or names
    user info): not sent."""

    reason = "foreign link"


class RedirectRefused(HttpRefused):
    """The peer redirected to another origin (or downgraded to plain http): not followed,
    so nothing (credentials, a body) went there."""

    reason = "unsafe redirect"

    def __init__(self, message: str, *, url: str, target: str, method: str = "",
                 status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, url=url, method=method, status=status, hint=hint)
        self.target = target


class AnswerTooLarge(HttpRefused):
    """The answer is larger than the cap for its kind: not read further."""

    reason = "limit exceeded"


class BrokenAnswer(HttpRefused):
    """The answer broke off or does not decode: its connection closed before the length it
    announced, a chunk or its compression is malformed."""

    reason = "bad response"

    def __init__(self, message: str, *, url: str, received: int, method: str = "",
                 status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, url=url, method=method, status=status, hint=hint)
        self.received = received


class AnswerTooSlow(HttpRefused):
    """The answer did not complete within its wall time, or stopped arriving (half a body,
    then silence): a timeout, whatever the bytes that came."""

    reason = "timeout"

    def __init__(self, message: str, *, url: str, received: int, method: str = "",
                 status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, url=url, method=method, status=status, hint=hint)
        self.received = received


class DeadlineExceeded(HttpRefused):
    """The deadline of the context (all of a host's requests) has passed."""

    reason = "deadline exceeded"

    def __init__(self, message: str, *, url: str, allowed_s: float, method: str = "",
                 hint: str | None = None) -> None:
        super().__init__(message, url=url, method=method, hint=hint)
        self.allowed_s = allowed_s
