"""Errors of the health area."""

from __future__ import annotations

from provisioner.exceptions import InputError, NotReady, ProvisionerError


class HealthError(ProvisionerError):
    """A health run could not be carried out."""


class ParseError(HealthError):
    """A collector's output is not in the format its parser expects."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(
            f"{source}: {problem}",
            hint="run the command by hand on the host; a wrong tool version or a cut output "
            "(timeout, full disk) are the usual causes",
        )
        self.source = source


class HealthInputError(InputError):
    """Bad arguments to a health command (unknown host, impossible grouping)."""


class SshUnavailable(NotReady):
    """The system ``ssh`` client is missing on the machine running provision."""
