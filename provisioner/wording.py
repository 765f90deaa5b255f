"""Small helpers for messages a person reads: plurals and did-you-mean suggestions."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

if TYPE_CHECKING:  # plural() is used by `--help` paths that must not load pydantic
    from pydantic import BaseModel


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` with its noun in the right number: "1 host", "64 hosts", "2 switches"."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def suggest(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice closest to a mistyped ``word`` (difflib), or None when none is close."""
    pool = sorted(set(choices))
    exact = {c.lower(): c for c in pool}
    if word.lower() in exact:  # a case slip
        return exact[word.lower()]
    scored = [(difflib.SequenceMatcher(None, word, c).ratio(), c) for c in pool]
    # the highest score wins; on a tie the first in sorted order, so the answer is stable
    best = max(scored, key=lambda sc: (sc[0], [-ord(ch) for ch in sc[1]]), default=None)
    return best[1] if best is not None and best[0] >= cutoff else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ " (did you mean 'x'?)"-style tail for an error message, or "" without a close match."""
    best = suggest(word, choices)
    return f"did you mean {best!r}?" if best else ""


# The same walk as cabling/keys.py (cabling never imports provisioner, and the reverse is kept
# to the CLI).
def _unwrap(tp: Any) -> Any:
    """The model, list or dict inside Optional[...] / Annotated[...] / a union."""
    while True:
        origin = get_origin(tp)
        if origin in (Union, types.UnionType):
            parts = [a for a in get_args(tp) if a is not type(None)]
            tp = next((a for a in parts if _is_model(a) or get_origin(a) in (list, dict)), parts[0])
        elif origin is not None and getattr(origin, "__name__", "") == "Annotated":
            tp = get_args(tp)[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _field(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info.annotation
    return None


def keys_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the object at ``loc`` (a pydantic error location, without the bad key) allows."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if _is_model(tp) and isinstance(part, str):
            tp = _field(tp, part)
        elif get_origin(tp) in (list, tuple) and isinstance(part, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return []
        if tp is None:
            return []
    tp = _unwrap(tp)
    if not _is_model(tp):
        return []
    return [info.alias or name for name, info in tp.model_fields.items()]
