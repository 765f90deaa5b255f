"""The global ``--debug`` option: log what the project does (each BMC request) to stderr."""

from __future__ import annotations

import logging
import sys

from provisioner.http_policy.logsafe import RedactingFilter
from provisioner.safetext import terminal


class _StderrHandler(logging.Handler):
    """Writes each redacted record to whatever sys.stderr is now (test runners swap it)."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(RedactingFilter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # a BMC's or host's words in a log line act on no terminal
            sys.stderr.write(terminal(self.format(record), newlines=True) + "\n")
        except Exception:
            self.handleError(record)


def enable_debug(value: bool) -> None:
    """Typer callback of ``--debug/-v``: debug logs of the project's own loggers, redacted."""
    root = logging.getLogger("provisioner")
    ours = [h for h in root.handlers if isinstance(h, _StderrHandler)]
    for old in ours:
        root.removeHandler(old)
    if not value:
        if ours:  # one process may run several commands (tests, embedding): undo ours only
            root.setLevel(logging.NOTSET)
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
