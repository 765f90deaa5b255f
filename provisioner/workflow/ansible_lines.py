"""Reading ansible-playbook's default (human) output line by line into progress events."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

LineKind = Literal["play", "task", "result", "recap"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colour codes, should ANSIBLE_FORCE_COLOR be set
_HEADER = re.compile(r"^(?P<what>PLAY|TASK|RUNNING HANDLER) \[(?P<name>.*)\]\s*\**\s*$")
_RECAP = re.compile(r"^PLAY RECAP\s*\**\s*$")
# "ok: [h1]", "changed: [h1 -> localhost]", "fatal: [h1]: FAILED! => ...",
# "failed: [h1] (item=x) => ...", "skipping: [h1] => (item=...)"
_RESULT = re.compile(
    r"^(?P<status>ok|changed|skipping|fatal|failed|unreachable|rescued|ignored): "
    r"\[(?P<host>[^\]\s]+)(?: -> [^\]]+)?\](?P<rest>.*)$"
)


@dataclass(frozen=True)
class AnsibleLine:
    """What one output line says: a play or task starts, a host's result, or the recap."""

    kind: LineKind
    name: str = ""  # play or task name
    host: str = ""
    status: str = ""  # ok, changed, skipping, failed, unreachable, rescued, ignored


def parse_line(line: str) -> AnsibleLine | None:
    """The progress a line carries, or None for everything else (details, timings, blanks)."""
    text = _ANSI.sub("", line).rstrip("\r\n")
    m = _HEADER.match(text)
    if m:
        kind: LineKind = "play" if m["what"] == "PLAY" else "task"
        return AnsibleLine(kind, name=m["name"].strip())
    if _RECAP.match(text):
        return AnsibleLine("recap")
    m = _RESULT.match(text)
    if m:
        status = m["status"]
        if status == "fatal":
            status = "unreachable" if "UNREACHABLE!" in m["rest"] else "failed"
        return AnsibleLine("result", host=m["host"], status=status)
    return None
