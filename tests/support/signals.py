"""Ctrl-C as a terminal delivers it, whatever this test run inherited.

A run started in the background (`nohup`, `cmd &` in a script, some CI runners) inherits SIGINT
ignored, and Python then installs no KeyboardInterrupt handler: a test that sends SIGINT would see
nothing happen, and a child it starts would ignore Ctrl-C too (ignored signals survive exec).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread while the block runs (then as before)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def terminal_signals() -> None:
    """``preexec_fn`` for a child that a test interrupts: SIGINT back to its default, as on a
    terminal (the child's Python then turns it into KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
