"""A real terminal for screen tests: tmux runs a command in a detached window of a fixed size
(80 columns by default); the test types into it and reads the screen as a person sees it.

Each Screen has its own tmux server (a socket in a folder of its own), so tests never meet a
person's tmux nor each other."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support import machine
from tests.support.waiting import wait_until

EXIT = "__screen_exit="


class Screen:
    """``argv`` running on a terminal of ``cols`` x ``rows``; the window stays after it ends."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], folder: Path, *,
                 cols: int = 80, rows: int = 40) -> None:
        machine.require_tools(["tmux"])
        # a short folder of its own: a socket's path is limited to 107 bytes
        self._dir = tempfile.mkdtemp(prefix="screen-")
        self._sock = os.path.join(self._dir, "tmux")
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # the exit status as the command's last row (tmux 3.3 does not always report a dead
        # pane's status)
        command = f"env {exports} {shlex.join(argv)}; echo {EXIT}$?"
        # one command list: the window must stay (remain-on-exit) even for a command that ends
        # before a second tmux call could set it
        self._tmux("start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
                   "set-option", "-g", "status", "off", ";",
                   "new-session", "-d", "-s", "t", "-c", str(folder), "-x", str(cols),
                   "-y", str(rows), command)

    def _tmux(self, *args: str) -> str:
        res = subprocess.run(["tmux", "-S", self._sock, "-f", "/dev/null", *args],
                             capture_output=True, text=True, timeout=30, check=False)
        if res.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    def lines(self) -> list[str]:
        """What the command wrote, as rows of the screen (with what scrolled off the top; trailing
        blanks cut; tmux's own "Pane is dead" note left out)."""
        rows = [r for r in self._rows() if not r.startswith(EXIT)]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    def text(self) -> str:
        return "\n".join(self.lines())

    def wait_for(self, needle: str) -> None:
        """Wait until ``needle`` is on the screen (a deadline, not a sleep)."""
        wait_until(lambda: needle in self.text() or self.ended(), f"{needle!r} on the screen")
        assert needle in self.text(), self.text()

    def type(self, keys: str) -> None:
        """Type ``keys`` and Enter, as a person answers a prompt."""
        self._tmux("send-keys", "-t", "t", "-l", keys)
        self._tmux("send-keys", "-t", "t", "Enter")

    def _rows(self) -> list[str]:
        out = self._tmux("capture-pane", "-p", "-S", "-", "-t", "t").splitlines()
        return [r.rstrip() for r in out if not r.startswith("Pane is dead")]

    def ended(self) -> bool:
        """Whether the command ended."""
        return any(r.startswith(EXIT) for r in self._rows())

    def exit_code(self) -> int:
        """The command's exit status, once it ended."""
        wait_until(self.ended, "the command to end")
        return int(next(r for r in self._rows() if r.startswith(EXIT))[len(EXIT):])

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self._sock, "kill-server"], capture_output=True,
                       timeout=30, check=False)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Screen:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
