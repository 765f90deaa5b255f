"""Progress events that long work emits and front ends render (a terminal view, JSON lines).

The layers doing the work (image builds, the rack runner, Ansible runs) never print: they call
:func:`emit`, and whatever sinks the caller installed with :func:`sinks` receive the event. With
no sink installed an event goes nowhere, so library use and tests stay silent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Literal, Protocol

EventKind = Literal[
    "run",  # a run starts: data["hosts"] lists the hosts it works on
    "phase",  # a host enters a phase (discover, pxe, install, reboot, firstboot, ssh, configure...)
    "bytes",  # bytes of a transfer so far: data["done"], data["total"] (None when unknown)
    "stage",  # a step of a host-less job (an image build stage)
    "output",  # a line of a tool's output, for a live detail line (debootstrap, ansible)
    "log",  # a log file was opened: data["path"]; it grows while the work runs
    "task",  # an Ansible task starts: message is its name
    "result",  # an Ansible task's result on a host: data["status"] (ok, changed, failed...)
    "done",  # a host's run ended: data["status"], message the reason
]


@dataclass(frozen=True)
class Event:
    """One progress event; ``host`` is empty for work that is not about one host."""

    kind: EventKind
    message: str = ""
    host: str = ""
    phase: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=time.time)

    def to_json(self) -> str:
        """The event as one JSON line (no trailing newline)."""
        doc = {k: v for k, v in asdict(self).items() if v not in ("", {})}
        return json.dumps(doc, default=str, sort_keys=True)


class EventSink(Protocol):
    """Anything that receives events; it must be thread-safe (hosts deploy in parallel)."""

    def emit(self, event: Event) -> None: ...


_lock = threading.Lock()
_sinks: list[EventSink] = []


def emit(event: Event) -> None:
    """Hand ``event`` to every installed sink (a failing sink never stops the work)."""
    with _lock:
        current = list(_sinks)
    for sink in current:
        try:
            sink.emit(event)
        except Exception:
            continue


@contextmanager
def sinks(*installed: EventSink) -> Iterator[None]:
    """Install sinks for the duration of a block (process-wide: worker threads emit too)."""
    with _lock:
        _sinks.extend(installed)
    try:
        yield
    finally:
        with _lock:
            for s in installed:
                if s in _sinks:
                    _sinks.remove(s)


class JsonLinesSink:
    """Writes each event as a JSON line and flushes, for automation to follow (`--events`)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self._stream.write(event.to_json() + "\n")
            self._stream.flush()


class ListSink:
    """Keeps the events in memory (tests, summaries)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: EventKind) -> list[Event]:
        """The events of one kind, in order."""
        with self._lock:
            return [e for e in self.events if e.kind == kind]
