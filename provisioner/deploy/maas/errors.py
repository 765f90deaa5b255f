"""Typed errors of the MAAS backend: each carries MAAS's own message and the machine's system_id."""

from __future__ import annotations

from provisioner.exceptions import CredentialError, DeployError, ExitCode


class MAASError(DeployError):
    """MAAS refused or failed a request; ``maas_message`` is MAAS's own text."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        system_id: str | None = None,
        maas_message: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.system_id = system_id
        self.maas_message = maas_message


class MAASAuthError(MAASError):
    """MAAS rejected the API key (HTTP 401/403): the key is wrong, revoked or lacks admin rights."""

    exit_code = ExitCode.BAD_INPUT


class MAASNotFound(MAASError):
    """MAAS has no such object (HTTP 404)."""


class MAASConflict(MAASError):
    """MAAS refused an action in the machine's current state (HTTP 409)."""


class MAASValidationError(MAASError):
    """MAAS rejected the parameters of a request (HTTP 400); the message names the fields."""


class MAASUnavailable(MAASError):
    """The MAAS region cannot be reached or answered 5xx after retries."""

    exit_code = ExitCode.NOT_READY


class MAASNotReady(MAASError):
    """The region lacks something every deploy needs (an image, the provisioning subnet)."""

    exit_code = ExitCode.NOT_READY


class MAASTimeout(MAASError):
    """A machine did not reach the expected state in time."""


class MAASAPIKeyError(CredentialError):
    """The MAAS API key is missing or not of the form consumer_key:token_key:token_secret."""
