"""One log per host out of ansible-playbook's interleaved output, written as it comes.

With hundreds of hosts in one run, the operator looking at one failed host wants its story
alone: each host's file gets the play and task headers it took part in, its result lines and the
detail lines that follow them (a failure's message), and its recap line.
"""

from __future__ import annotations

import re
from pathlib import Path

from provisioner.workflow.ansible_lines import parse_line

_RECAP_HOST = re.compile(r"^(?P<host>\S+)\s*:\s*ok=\d+")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def host_log_dir(run_log: Path) -> Path:
    """Where the per-host logs of the run logged in ``run_log`` go (next to it)."""
    return run_log.with_suffix("")


def host_log(run_log: Path, host: str) -> Path:
    """The file of ``host`` for the run logged in ``run_log``."""
    return host_log_dir(run_log) / f"{_UNSAFE.sub('_', host) or '_'}.log"


class HostLogSplitter:
    """Feed it every output line in order; it appends each host's share to that host's file."""

    def __init__(self, run_log: Path) -> None:
        self.run_log = run_log
        self._play = ("", 0)  # the current play header and its number
        self._task = ("", 0)  # the current task header and its number
        self._seen: dict[str, tuple[int, int]] = {}  # host -> (play, task) numbers written
        self._current: str | None = None  # the host whose result the detail lines belong to
        self._in_recap = False
        host_log_dir(run_log).mkdir(parents=True, exist_ok=True)

    def feed(self, line: str) -> None:
        """Route one line (with its newline) to the host files it concerns."""
        parsed = parse_line(line)
        kind = parsed.kind if parsed is not None else None
        if kind == "play":
            self._play, self._task = (line, self._play[1] + 1), ("", self._task[1] + 1)
            self._current = None
        elif kind == "task":
            self._task, self._current = (line, self._task[1] + 1), None
        elif kind == "recap":
            self._in_recap, self._current = True, None
        elif parsed is not None and kind == "result":
            self._current = parsed.host
            self._result(parsed.host, line)
        elif self._in_recap:
            m = _RECAP_HOST.match(line.strip())
            if m:
                self._append(m["host"], "\nPLAY RECAP\n" + line)
        elif self._current is not None and line[:1] in (" ", "\t") and line.strip():
            self._append(self._current, line)  # the indented detail of the host's last result
        else:
            self._current = None

    def _result(self, host: str, line: str) -> None:
        play_no, task_no = self._seen.get(host, (0, 0))
        head = ""
        if play_no != self._play[1]:
            head += "\n" + self._play[0]
        if task_no != self._task[1] and self._task[0]:
            head += self._task[0]
        self._seen[host] = (self._play[1], self._task[1])
        self._append(host, head + line)

    def _append(self, host: str, text: str) -> None:
        # opened per write: hundreds of hosts must not hold hundreds of descriptors
        with host_log(self.run_log, host).open("a", encoding="utf-8") as fh:
            fh.write(text)
