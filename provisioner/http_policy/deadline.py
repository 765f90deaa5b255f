"""One deadline for every request made in a context (this thread and the threads it hands
context to): a host's whole conversation, however many requests and retries it takes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from provisioner.http_policy.errors import DeadlineExceeded

_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("http_deadline", default=None)


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Bound all guarded HTTP traffic made in this context to ``seconds`` in total (None:
    no bound). Nested deadlines never extend an outer one."""
    if seconds is None:
        yield
        return
    ends = time.monotonic() + seconds
    outer = _DEADLINE.get()
    if outer is not None and outer[0] < ends:
        ends, seconds = outer
    token = _DEADLINE.set((ends, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining_s() -> float | None:
    """Seconds left before the current deadline, or ``None`` when there is none."""
    current = _DEADLINE.get()
    return None if current is None else current[0] - time.monotonic()


def allowed_s() -> float | None:
    """The seconds the current deadline allowed in all, or ``None`` when there is none."""
    current = _DEADLINE.get()
    return None if current is None else current[1]


def check(url: str, method: str = "") -> float | None:
    """Raise :class:`DeadlineExceeded` when the deadline has passed; else seconds left."""
    current = _DEADLINE.get()
    if current is None:
        return None
    left = current[0] - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded(
            f"gave up: the answers took longer than the {current[1]:g}s allowed", url=url,
            method=method, allowed_s=current[1])
    return left


def clip_timeout(timeout: object, url: str, method: str = "") -> object:
    """A requests ``timeout`` (seconds, or a (connect, read) pair) cut to the time left."""
    left = check(url, method)
    if left is None or timeout is None:
        return timeout
    if isinstance(timeout, tuple):
        return tuple(None if t is None else max(0.001, min(float(t), left)) for t in timeout)
    return max(0.001, min(float(timeout), left))  # type: ignore[arg-type]
