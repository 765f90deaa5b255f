"""Keep session tokens and passwords out of every log record and error message an HTTP client
writes (the Redfish stack, MAAS, Ironic, image fetches)."""

from __future__ import annotations

import collections
import logging
import re
import threading
from collections.abc import Iterable

_PATTERNS = (
    # Header dumps: "X-Auth-Token: abc", "Authorization: Basic ...", also in dict reprs.
    (re.compile(r"(?i)(x-auth-token['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"), r"\1<redacted>"),
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(basic|bearer)?\s*[^\s'\",}]+"),
     r"\1<redacted>"),
    (re.compile(r'(?i)("password"\s*:\s*)"(?:[^"\\]|\\.)*"'), r'\1"<redacted>"'),
)


# Shorter "secrets" are not replaced: a 1-2 character password would mangle every message,
# and an echo of it gives nothing away that guessing would not.
MIN_SECRET_LEN = 3
# The passwords and tokens of this process's open clients, in every form they are sent in,
# counted: clients of one site share a password, and one closing must not unlist it.
_KNOWN: collections.Counter[str] = collections.Counter()
_KNOWN_LOCK = threading.Lock()
_longest_first: list[str] = []  # _KNOWN's words, longest first: rebuilt when _KNOWN changes


def remember(secrets: Iterable[str]) -> None:
    """Redact these wherever they appear, whatever the words around them (a BMC that quotes
    the password or token it was sent in an error, a library's body dump), until forgotten."""
    global _longest_first
    with _KNOWN_LOCK:
        _KNOWN.update(s for s in secrets if len(s) >= MIN_SECRET_LEN)
        _longest_first = sorted(_KNOWN, key=len, reverse=True)


def forget(secrets: Iterable[str]) -> None:
    """Undo one :func:`remember` of these (the client that sent them is closed)."""
    global _longest_first
    with _KNOWN_LOCK:
        _KNOWN.subtract(s for s in secrets if len(s) >= MIN_SECRET_LEN)
        for word in [w for w, n in _KNOWN.items() if n <= 0]:
            del _KNOWN[word]
        _longest_first = sorted(_KNOWN, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every remembered secret, and each of ``secrets``, replaced by ``***``."""
    words = _longest_first  # a list never changed in place: no lock needed to read it
    extra = [s for s in secrets if len(s) >= MIN_SECRET_LEN]
    if extra:
        words = sorted({*words, *extra}, key=len, reverse=True)
    for word in words:
        if word in text:
            text = text.replace(word, "***")
    return text


def redact(text: str) -> str:
    """Replace tokens, basic-auth values and JSON passwords in ``text``, and every secret a
    client remembered."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return scrub(text)


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


def install(logger_names: tuple[str, ...]) -> None:
    """Attach the redacting filter to these loggers (a client's and its library's; idempotent).

    Filters on a logger see only records logged on that very logger, hence the exact names.
    """
    for name in logger_names:
        if name in _INSTALLED:
            continue
        logging.getLogger(name).addFilter(RedactingFilter())
        _INSTALLED.add(name)
