"""Typed errors of the Ironic backend: each carries Ironic's own message and the node."""

from __future__ import annotations

from provisioner.exceptions import DeployError, ExitCode


class IronicError(DeployError):
    """Ironic refused or failed a request; ``ironic_message`` is Ironic's own text."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        node: str | None = None,
        ironic_message: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.node = node
        self.ironic_message = ironic_message


class IronicAuthError(IronicError):
    """Ironic rejected the credentials (HTTP 401/403)."""

    exit_code = ExitCode.BAD_INPUT


class IronicNotFound(IronicError):
    """Ironic has no such node or port (HTTP 404)."""


class IronicConflict(IronicError):
    """Ironic refused an action in the node's current state, or a duplicate (HTTP 409)."""


class IronicNodeLocked(IronicConflict):
    """The node is locked by a conductor task in progress (HTTP 409, "is locked by host")."""


class IronicBadRequest(IronicError):
    """Ironic rejected the request's parameters (HTTP 400/406/422)."""


class IronicUnavailable(IronicError):
    """Ironic cannot be reached or answered 5xx after retries."""

    exit_code = ExitCode.NOT_READY


class IronicProtocolError(IronicError):
    """Ironic's answer broke the client's limits (a redirect, too big, not JSON)."""


class IronicTimeout(IronicError):
    """A node did not reach the expected state in time."""


class IronicNodeFailed(IronicError):
    """A node went to a failure state (deploy failed, clean failed, ...) or into maintenance."""
