"""site.yml in waves while the rack installs: hosts that are ready go to the playbook as soon as
a run can start, with every other host ready by then, so that no host waits for the slowest
install of the rack (nor for site.yml of hosts that came up long before it).

A wave is any function of a list of host names (the laptop's ansible-playbook today; hosts that
configure themselves with ansible-pull plug in the same way). At most ``max_runs`` waves run at
once (each is an ansible-playbook process with its own forks). A wave starts when a slot is free
and either no host is still on its way or the first host waiting has waited ``gather_s`` (hosts
that come up close together share one run instead of one run each).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Wave = Callable[[list[str]], None]


@dataclass
class _Pending:
    names: list[str] = field(default_factory=list)
    since: float = 0.0  # when the first of them became ready


class ConfigureWaves:
    """Collects hosts as they become ready and runs ``wave`` on them in batches."""

    def __init__(
        self,
        wave: Wave,
        *,
        expected: int,
        max_runs: int = 2,
        gather_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wave = wave
        self._expected = expected  # hosts that may still become ready
        self._max_runs = max(1, max_runs)
        self._gather_s = max(0.0, gather_s)
        self._clock = clock
        self._cond = threading.Condition()
        self._pending = _Pending()
        self._running = 0
        self._dispatching = True
        self._cancelled = False
        self._errors: list[BaseException] = []
        self.waves: list[list[str]] = []  # the batches run, in order (for the summary and tests)
        self._dispatcher = threading.Thread(target=self._dispatch, name="configure-waves",
                                            daemon=True)  # fmt: skip
        self._dispatcher.start()

    def ready(self, host: str) -> bool:
        """``host`` is installed and its key pinned: it joins the next wave (False: the run was
        cancelled, no wave will take it)."""
        with self._cond:
            if self._cancelled:
                return False
            if not self._pending.names:
                self._pending.since = self._clock()
            self._pending.names.append(host)
            self._expected -= 1
            self._cond.notify_all()
            return True

    def dropped(self, host: str) -> None:
        """``host`` will not become ready (its install failed): nobody waits for it."""
        with self._cond:
            self._expected -= 1
            self._cond.notify_all()

    def cancel(self) -> None:
        """The run stops (Ctrl-C): no new wave starts; the waves running end as they end."""
        with self._cond:
            self._cancelled = True
            self._pending = _Pending()
            self._expected = 0
            self._cond.notify_all()

    def close(self) -> None:
        """No more hosts will come (the installs are over, or the run stops): waves left to run
        start now."""
        with self._cond:
            self._expected = 0
            self._cond.notify_all()

    def join(self) -> None:
        """Wait until every host handed in has been through its wave; re-raise a wave's bug."""
        # On the condition, not Thread.join: a Ctrl-C that interrupts Thread.join leaves the
        # thread looking finished (CPython 3.11), so the join after it returned at once and the
        # process exited while site.yml waves were still ending, their hosts' outcome unrecorded.
        with self._cond:
            while self._dispatching or self._running:
                self._cond.wait()
        if self._errors:
            raise self._errors[0]

    # -- the dispatcher -------------------------------------------------------------------------

    def _dispatch(self) -> None:
        with self._cond:
            try:
                while True:
                    batch = self._take()
                    if batch is not None:
                        self._start(batch)
                        continue
                    if not self._pending.names and self._expected <= 0:
                        return
                    self._cond.wait(timeout=self._wait_s())
            finally:
                self._dispatching = False
                self._cond.notify_all()

    def _take(self) -> list[str] | None:
        """The next wave, if one may start now (called with the condition held)."""
        pending = self._pending
        if not pending.names or self._running >= self._max_runs:
            return None
        waited = self._clock() - pending.since
        if self._expected > 0 and waited < self._gather_s:
            return None
        self._pending = _Pending()
        return pending.names

    def _wait_s(self) -> float | None:
        """How long the dispatcher may sleep before a wave could become due (None: until told)."""
        if not self._pending.names or self._running >= self._max_runs or self._expected <= 0:
            return None
        return max(0.0, self._gather_s - (self._clock() - self._pending.since))

    def _start(self, batch: list[str]) -> None:
        self._running += 1
        self.waves.append(batch)
        t = threading.Thread(target=self._run, args=(batch,), name=f"configure-{len(self.waves)}")
        t.start()

    def _run(self, batch: list[str]) -> None:
        try:
            self._wave(batch)
        except BaseException as exc:  # the runner's own bug: re-raised by join()
            with self._cond:
                self._errors.append(exc)
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()
