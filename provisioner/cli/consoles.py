"""Rich consoles that measure the terminal when they print, not when the CLI is imported.

Rich reads $COLUMNS once, in ``Console()``; the CLI's consoles are module-level, so a width read
at import time would hold for the whole process: a later $COLUMNS (a wrapper script, a resized
terminal, a test) would be ignored and tables would no longer fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, ConsoleDimensions


class TerminalConsole(Console):
    """A Console whose width is $COLUMNS (else the terminal's, else 80) at each use, capped at
    ``max_width`` when given; an explicit ``width=`` still fixes it."""

    def __init__(self, *, max_width: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kwargs.get("width") is None:
            self._width = None  # Rich froze $COLUMNS here; Console.size re-reads it each time
        if kwargs.get("height") is None:
            self._height = None
        self._max_width = max_width

    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        if self._width is None and self._max_width is not None and dims.width > self._max_width:
            return ConsoleDimensions(self._max_width, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    @contextmanager
    def widened(self, width: int) -> Iterator[None]:
        """At least ``width`` columns inside the block (a --wide table); measured again after."""
        saved = self._width
        self._width = max(self.width, width)
        try:
            yield
        finally:
            self._width = saved
