"""Small helpers for messages a person reads: plurals and did-you-mean suggestions."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` with its noun in the right number: "1 host", "64 hosts", "2 switches"."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def suggest(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice closest to a mistyped ``word`` (difflib), or None when none is close."""
    pool = sorted(set(choices))
    exact = {c.lower(): c for c in pool}
    if word.lower() in exact:  # a case slip
        return exact[word.lower()]
    best = difflib.get_close_matches(word, pool, n=1, cutoff=cutoff)
    return best[0] if best else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ " (did you mean 'x'?)"-style tail for an error message, or "" without a close match."""
    best = suggest(word, choices)
    return f"did you mean {best!r}?" if best else ""
