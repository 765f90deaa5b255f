"""The error families of provisioner and the exit code each maps to.

Every error a user can meet derives from :class:`ProvisionerError` and carries a message
that says what went wrong and how to fix it. The CLI maps the family to an exit code in one
place (:mod:`provisioner.cli.errors`); library code never calls ``sys.exit``.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit statuses of the ``provision`` command (documented in docs/cli.md)."""

    OK = 0
    ERROR = 1  # unexpected failure (a bug, or an environment problem)
    BAD_INPUT = 2  # invalid inventory, manifest, arguments or credentials reference
    PARTIAL_FAILURE = 3  # the run completed but some hosts/links failed
    LOCKED = 4  # another orchestrator holds the site
    NOT_READY = 5  # a prerequisite is missing (lab not up, tool not installed)
    INTERRUPTED = 130


class ProvisionerError(Exception):
    """Root of every error provisioner raises on purpose."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class InputError(ProvisionerError):
    """The user gave something invalid: a file, a key, an argument."""

    exit_code = ExitCode.BAD_INPUT


class InventoryError(InputError):
    """An inventory file is invalid; names the file, line and key."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if file:
            where = file if line is None else f"{file}:{line}"
        if key:
            where = f"{where} [{key}]" if where else f"[{key}]"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.file = file
        self.line = line
        self.key = key


class CredentialError(InputError):
    """A credentials reference cannot be resolved. Never carries the secret itself."""


class StateError(ProvisionerError):
    """The node state store refused an operation (illegal transition, unknown host)."""

    exit_code = ExitCode.BAD_INPUT


class IllegalTransition(StateError):
    """A host cannot move from its current state to the requested one."""


class SiteLocked(ProvisionerError):
    """Another orchestrator already runs against this site."""

    exit_code = ExitCode.LOCKED


class NotReady(ProvisionerError):
    """A prerequisite is missing: a tool not installed, the lab not running."""

    exit_code = ExitCode.NOT_READY


class BMCError(ProvisionerError):
    """A BMC could not be reached or refused a request (see provisioner.redfish.errors)."""


class DeployError(ProvisionerError):
    """A deploy backend failed for a host."""


class PartialFailure(ProvisionerError):
    """A multi-host run finished, but some hosts failed; the summary names them."""

    exit_code = ExitCode.PARTIAL_FAILURE
