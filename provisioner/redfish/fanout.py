"""A few requests in flight to one BMC: a small thread pool and a gate that narrows on 503.

A slow BMC (a DGX H100's AMI BMC answers in 0.5-3 s) costs requests x latency when read one
request at a time; with a handful of connections the independent reads overlap. Two parts:

- :class:`Fanout` runs a function over items on at most ``width`` threads, the caller being
  one of them. Calls may nest (adapters, then each adapter's ports): a caller first runs
  itself every item no pool thread has started, then waits only for items already running,
  so nested calls never wait on work that nobody runs. The caller's context variables (the
  host deadline) are carried into the pool threads.
- :class:`Gate` bounds requests in flight to the BMC. A BMC that answers 503/429 while several
  requests are in flight is told it has fewer from then on (never fewer than one).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from provisioner.redfish.transport import check_deadline

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class Gate:
    """At most ``width`` requests in flight; :meth:`refused` narrows it for good."""

    def __init__(self, width: int) -> None:
        self.width = max(1, width)
        self.active = 0
        self._cond = threading.Condition()

    @contextmanager
    def slot(self, bmc: str, path: str) -> Iterator[None]:
        """Hold one of the BMC's connections for a request (waits within the host deadline)."""
        with self._cond:
            while self.active >= self.width:
                left = check_deadline(bmc, path)
                self._cond.wait(timeout=1.0 if left is None else max(0.001, min(left, 1.0)))
            self.active += 1
        try:
            yield
        finally:
            with self._cond:
                self.active -= 1
                self._cond.notify()

    def refused(self, bmc: str) -> bool:
        """The BMC answered 503/429 with others in flight: allow fewer. True if narrowed."""
        with self._cond:
            if self.active <= 1 or self.width <= 1:
                return False
            before = self.width
            self.width = max(1, min(self.width, self.active) // 2)
        log.warning("%s: BMC refused concurrent requests (busy); reading with %d connection(s) "
                    "instead of %d", bmc, self.width, before)
        return True


class Fanout:
    """Runs a BMC's independent reads on at most ``width`` threads (the caller included)."""

    def __init__(self, width: int, name: str = "bmc") -> None:
        self.width = max(1, width)
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _executor(self) -> ThreadPoolExecutor | None:
        with self._lock:
            if self._closed:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.width - 1,
                                                thread_name_prefix=f"redfish-{self._name}"[:40])
            return self._pool

    def map(self, func: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[func(i) for i in items]``, a few at a time; the first exception is raised after
        every started item has finished (none is left running behind the caller's back)."""
        todo = list(items)
        pool = self._executor() if self.width > 1 and len(todo) > 1 else None
        if pool is None:
            return [func(item) for item in todo]
        futures: list[Future[R]] = []
        for item in todo[1:]:
            ctx = contextvars.copy_context()
            futures.append(pool.submit(ctx.run, func, item))
        outcomes: list[tuple[bool, object]] = []
        failed = False

        def run(item: T) -> tuple[bool, object]:
            nonlocal failed
            if failed:
                return False, None  # skipped: another item already failed
            try:
                return True, func(item)
            except BaseException as exc:  # re-raised below, in order
                failed = True
                return False, exc

        outcomes.append(run(todo[0]))
        inline: dict[int, tuple[bool, object]] = {}
        for index, future in enumerate(futures):
            if future.cancel():  # no pool thread took it: run it here
                inline[index] = run(todo[index + 1])
        for index, future in enumerate(futures):
            if index in inline:
                outcomes.append(inline[index])
                continue
            try:
                outcomes.append((True, future.result()))
            except BaseException as exc:
                failed = True
                outcomes.append((False, exc))
        for ok, value in outcomes:
            if not ok and isinstance(value, BaseException):
                raise value
        return [value for _ok, value in outcomes]  # type: ignore[misc]

    def close(self) -> None:
        """Stop the pool threads (items not started are dropped)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
