"""Naming the keys a manifest object allows, for "unknown key" errors that suggest the fix."""

from __future__ import annotations

import difflib
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel


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


def unknown_key(model: type[BaseModel], loc: tuple[Any, ...], data: Any) -> str:
    """ "unknown key 'hcaz' in device 'x'; allowed: ...; did you mean 'hcas'?" for ``loc``."""
    key, parent = str(loc[-1]), loc[:-1]
    where = ""
    obj = data
    for part in parent:
        try:
            obj = obj[part]
        except (KeyError, IndexError, TypeError):
            obj = None
            break
    if parent:
        label = next((str(p) for p in reversed(parent) if isinstance(p, str)), "")
        kind = label[:-1] if label.endswith("s") else label
        name = obj.get("name") if isinstance(obj, dict) else None
        if isinstance(parent[-1], int):
            where = f" in {kind} {name!r}" if name else f" in {kind} #{parent[-1] + 1}"
        else:
            where = f" in {label!r}"
    allowed = keys_at(model, parent)
    msg = f"unknown key {key!r}{where}"
    if allowed:
        msg += f"; allowed: {', '.join(allowed)}"
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        if close:
            msg += f"; did you mean {close[0]!r}?"
    return msg
