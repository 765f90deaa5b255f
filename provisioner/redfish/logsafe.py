"""Keep session tokens and passwords out of every log record the Redfish stack writes."""

from __future__ import annotations

import logging
import re

_PATTERNS = (
    # Header dumps: "X-Auth-Token: abc", "Authorization: Basic ...", also in dict reprs.
    (re.compile(r"(?i)(x-auth-token['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"), r"\1<redacted>"),
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(basic|bearer)?\s*[^\s'\",}]+"),
     r"\1<redacted>"),
    (re.compile(r'(?i)("password"\s*:\s*)"(?:[^"\\]|\\.)*"'), r'\1"<redacted>"'),
)


def redact(text: str) -> str:
    """Replace tokens, basic-auth values and JSON passwords in ``text``."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that rewrites each record's message through :func:`redact`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep the library's own behaviour
            return True
        record.msg = redact(message)
        record.args = None
        return True


_INSTALLED: set[str] = set()


def install(
    logger_names: tuple[str, ...] = ("redfish", "redfish.rest.v1", "provisioner.redfish.client"),
) -> None:
    """Attach the redacting filter to the Redfish library's and our loggers (idempotent).

    Filters on a logger see only records logged on that very logger, hence the exact names.
    """
    for name in logger_names:
        if name in _INSTALLED:
            continue
        logging.getLogger(name).addFilter(RedactingFilter())
        _INSTALLED.add(name)
