"""Errors of the cabling package and the exit code each maps to (same meanings as provisioner's)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit statuses of ``provision cabling ...``: 0 clean, 2 bad input, 3 findings."""

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    FINDINGS = 3


class CablingError(Exception):
    """Root of every error the cabling package raises on purpose."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        # Messages quote names from input files: nothing unprintable reaches the terminal or log.
        from cabling.safetext import printable

        message = printable(self.message)
        return f"{message}\n  hint: {printable(self.hint)}" if self.hint else message


class CablingInputError(CablingError):
    """A manifest, discovery file or argument is invalid; names the file and line when known."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if file:
            where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.file = file
        self.line = line


class DiscoveryUnavailable(CablingError):
    """A live source (UFM REST API) could not be reached or refused the request."""

    exit_code = ExitCode.BAD_INPUT
