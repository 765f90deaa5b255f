"""How `provision rack`/`reimage` show progress: a live view on a terminal, lines otherwise.

The workflow emits :class:`provisioner.events.Event`s; the views here are event sinks. The
runner's reporter (phase changes, results) is turned into events too, so every front end
(the view, `--events` JSON lines) sees one stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
)
from rich.table import Column
from rich.text import Text

from provisioner.cli.errors import plain
from provisioner.events import Event, emit
from provisioner.safetext import terminal

if TYPE_CHECKING:  # annotations only: `provision rack --help` must not load the workflow
    from provisioner.workflow.rack import HostResult

# A host's phases in the order a run goes through them, each with its rough share of a host's
# time (a lab VM or an HGX server alike: the image stream, first boot and site.yml dominate), so
# the overall bar moves with the time spent and its ETA means something.
PHASE_SHARE = {
    "queued": 0,
    "discover": 2,
    "release": 1,
    "deploy": 1,
    "pxe": 8,
    "install": 25,
    "reboot": 4,
    "firstboot": 12,
    "ssh": 4,
    "deployed": 1,
    "configure": 40,
    "done": 2,
}
PHASES = tuple(PHASE_SHARE)
FULL = sum(PHASE_SHARE.values())
CONFIGURE_HALF = 60  # Ansible results per host at which the configure share is half done


def progress_at(phase: str) -> int:
    """How far (of FULL) a host is when it enters ``phase``."""
    return sum(PHASE_SHARE[p] for p in PHASES[: PHASES.index(phase)])


COLOURS = {"failed": "red", "retry": "yellow", "done": "green", "skipped": "dim"}
# a host's run is over once it enters one of these phases (or its "done" event comes)
ENDED = ("done", "failed", "interrupted")
# plain output (CI logs, `tee`) never stays silent longer than this during long steps
HEARTBEAT_S = 30.0


def duration(seconds: float) -> str:
    """A duration as people read it: 12s, 47m49s, 2h03m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class EventReporter:
    """The rack runner's reporter: each phase change and result becomes an event."""

    def phase(self, host: str, phase: str, message: str) -> None:
        emit(Event("phase", message, host=host, phase=phase))

    def finished(self, result: HostResult) -> None:
        emit(
            Event(
                "done",
                result.reason,
                host=result.host,
                data={"status": result.status, "attempts": result.attempts},
            )
        )


def _rate(done: int, total: int | None, first: tuple[float, int], now: float) -> str:
    """"300/600 MiB at 12 MiB/s": the rate over the bytes since the first report (none before
    a second has passed: a first report says nothing of the speed)."""
    mib = done / 2**20
    of = f"/{total / 2**20:.0f}" if total else ""
    took = now - first[0]
    if took < 1.0:
        return f"{mib:.0f}{of} MiB"
    return f"{mib:.0f}{of} MiB at {(done - first[1]) / 2**20 / took:.0f} MiB/s"


def log_line(event: Event) -> str:
    """ "log: PATH (tail -f it to follow)", and where each host's own log is."""
    line = f"log: {event.data['path']}  (tail -f it to follow)"
    if event.data.get("hosts_dir"):
        line += f"; each host's: {event.data['hosts_dir']}/<host>.log"
    return line


@dataclass
class _Doing:
    """What a host (or the host-less preparation) is doing, since when, and its detail."""

    what: str
    since: float
    detail: str = ""
    done: int = 0  # image bytes written so far
    total: int | None = None


class PlainView:
    """One line per phase, stage and Ansible task: for logs, pipes and `--json` (on stderr).

    When nothing was printed for ``heartbeat_s`` while work runs (an 800 s apt task, a 5 min
    image write), a heartbeat line says what runs, for how long, and the bytes or the task."""

    def __init__(
        self,
        console: Console,
        *,
        heartbeat_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._console = console
        self._lock = threading.Lock()
        self._heartbeat_s = heartbeat_s
        self._clock = clock
        self._started = self._last = clock()
        self._hosts: dict[str, _Doing] = {}
        self._stage: _Doing | None = None
        self._task: _Doing | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> PlainView:
        if self._heartbeat_s > 0:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick_until_stopped,
                                            name="heartbeat", daemon=True)  # fmt: skip
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(self._due_in()):
            self.tick()

    def _due_in(self) -> float:
        with self._lock:
            return max(0.5, self._last + self._heartbeat_s - self._clock())

    def emit(self, event: Event) -> None:
        line = self.line(event)
        with self._lock:
            self._track(event)
            if line is not None:
                self._print(line)

    def _print(self, line: str) -> None:
        self._console.print(terminal(line), markup=False, highlight=False, soft_wrap=True)
        self._last = self._clock()

    def tick(self) -> None:
        """Print a heartbeat if work runs and nothing was printed for ``heartbeat_s``."""
        with self._lock:
            if self._clock() - self._last >= self._heartbeat_s:
                line = self.heartbeat()
                if line is not None:
                    self._print(line)

    def _track(self, event: Event) -> None:
        now = self._clock()
        if event.kind == "phase":
            self._stage = None  # hosts have started: the preparation is over
            if event.phase in ENDED:
                self._hosts.pop(event.host, None)
            else:
                self._hosts[event.host] = _Doing(event.phase, now)
        elif event.kind == "done":
            self._hosts.pop(event.host, None)
        elif event.kind == "bytes" and event.host:
            doing = self._hosts.setdefault(event.host, _Doing("install", now))
            total = event.data.get("total")
            doing.done, doing.total = int(event.data.get("done", 0)), int(total) if total else None
        elif event.kind == "stage" and event.phase != "configure":
            self._stage = _Doing(event.message, now)
        elif event.kind == "output" and self._stage is not None:
            self._stage.detail = event.message
        elif event.kind == "task":
            self._task = _Doing(event.message, now)
        elif event.kind == "stage" and event.message == "play recap":
            self._task = None

    def heartbeat(self) -> str | None:
        """What runs now, in one line (None when nothing does)."""
        now = self._clock()
        parts = []
        if self._stage is not None:
            detail = f": {self._stage.detail}" if self._stage.detail else ""
            parts.append(f"{self._stage.what} for {duration(now - self._stage.since)}{detail}")
        groups: dict[str, list[_Doing]] = {}
        for doing in self._hosts.values():
            groups.setdefault(doing.what, []).append(doing)
        for phase, hosts in groups.items():
            parts.append(self._group(phase, hosts, now))
        if not parts:
            return None
        return f"still running ({duration(now - self._started)} so far): " + "; ".join(parts)

    def _group(self, phase: str, hosts: list[_Doing], now: float) -> str:
        longest = duration(now - min(d.since for d in hosts))
        text = f"{len(hosts)} {'host' if len(hosts) == 1 else 'hosts'} in {phase} (up to {longest}"
        written = [d for d in hosts if d.done]
        if written:
            done = sum(d.done for d in written) / 2**20
            totals = [d.total for d in written if d.total]
            of = f"/{sum(totals) / 2**20:.0f}" if len(totals) == len(written) else ""
            text += f", {done:.0f}{of} MiB written"
        if phase == "configure" and self._task is not None:
            text += f", TASK {self._task.what} for {duration(now - self._task.since)}"
        return text + ")"

    @staticmethod
    def line(event: Event) -> str | None:
        """The text line an event prints as, or None for the events too chatty for a log."""
        if event.kind == "phase":
            return f"{event.host}: {event.phase}: {event.message}"
        if event.kind == "stage":
            step = event.data.get("step")
            of = f" [{step}/{event.data['steps']}]" if step is not None else ""
            return f"{event.phase or 'prepare'}{of}: {event.message}"
        if event.kind == "log":
            return log_line(event)
        if event.kind == "task":
            return f"configure: TASK {event.message}"
        if event.kind == "run":
            return f"run: {event.message}"
        if event.kind == "result" and event.data.get("status") in ("failed", "unreachable"):
            return f"{event.host}: configure: {event.data['status']}: {event.message}"
        return None


class SteadyTimeLeft(ProgressColumn):
    """Time left from the whole run's pace (elapsed x left / done), not from the last
    seconds' speed, which jumps between phases of very different lengths."""

    MIN_FRACTION = 0.03  # below this, any estimate is a guess: none is shown

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed
        if task.finished or not task.total or not elapsed:
            return Text("", style="progress.remaining")
        fraction = task.completed / task.total
        if fraction < self.MIN_FRACTION:
            return Text("", style="progress.remaining")
        left = elapsed * (1 - fraction) / fraction
        return Text(f"{duration(left)} left", style="progress.remaining")


class LiveView:
    """A live view: one overall bar with ETA, a bar per host, a line for the current stage."""

    def __init__(
        self, hosts: list[str], console: Console, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._lock = threading.Lock()
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=12),
            TaskProgressColumn(text_format="{task.percentage:>3.0f}%"),  # blank while pulsing
            SteadyTimeLeft(),
            # one line per host: a long detail is cut, never wrapped into the next host's row
            TextColumn(
                "{task.fields[detail]}",
                table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1),
            ),
            console=console,
            expand=True,
            refresh_per_second=4,
            transient=False,
            get_time=clock,
        )
        width = max([len(h) for h in hosts] + [7])
        self._width = width
        self._full = FULL
        self._overall = self._progress.add_task(
            "overall".ljust(width), total=max(1, len(hosts)) * FULL, detail=""
        )
        self._stage: TaskID | None = None
        self._stage_text = ""
        self._hosts: dict[str, TaskID] = {}
        self._done: dict[str, int] = {}
        self._clock = clock
        self._bytes_first: dict[str, tuple[float, int]] = {}  # host -> (when, bytes) first seen
        self._results: dict[str, dict[str, int]] = {}
        for h in hosts:
            self._hosts[h] = self._progress.add_task(h.ljust(width), total=FULL, detail="queued")
            self._done[h] = 0

    def renderable(self) -> RenderableType:
        """The view as it is now (what the terminal shows at the next refresh)."""
        return self._progress.get_renderable()

    def __enter__(self) -> LiveView:
        self._progress.start()
        return self

    def __exit__(
        self,
        et: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def _advance(self, host: str, step: int) -> None:
        if host not in self._hosts:
            return
        self._done[host] = min(max(self._done[host], step), self._full)
        self._progress.update(self._hosts[host], completed=self._done[host])
        self._progress.update(self._overall, completed=sum(self._done.values()))

    def _without_configure(self) -> None:
        """No site.yml in this run: a host is whole once installed."""
        self._full = FULL - PHASE_SHARE["configure"]
        for task in self._hosts.values():
            self._progress.update(task, total=self._full)
        self._progress.update(self._overall, total=max(1, len(self._hosts)) * self._full)

    def _detail(self, host: str, text: str) -> None:
        if host in self._hosts:
            self._progress.update(self._hosts[host], detail=text)

    def emit(self, event: Event) -> None:
        with self._lock:
            self._handle(event)

    def _handle(self, event: Event) -> None:
        # task names and tool output may hold "[...]": shown as text, never read as markup
        kind, text = event.kind, plain(event.message)
        if kind == "phase":
            self._prepared()
            colour = COLOURS.get(event.phase, "cyan")
            self._detail(event.host, f"[{colour}]{event.phase}[/] {text}")
            if event.phase == "done" or event.phase == "failed":
                self._advance(event.host, self._full)
            elif event.phase in PHASES:
                self._advance(event.host, progress_at(event.phase))
        elif kind == "done":
            status = event.data.get("status")
            colour = COLOURS.get("done" if status == "ok" else str(status), "cyan")
            self._detail(event.host, f"[{colour}]{status}[/] {text}")
            self._advance(event.host, self._full)
        elif kind == "bytes":
            done, total = int(event.data.get("done", 0)), event.data.get("total")
            first = self._bytes_first.setdefault(event.host, (self._clock(), done))
            rate = _rate(done, total, first, self._clock())
            self._detail(event.host, f"[cyan]install[/] {rate}")
            if total:  # the bar moves with the bytes written, through the install's share
                share = PHASE_SHARE["install"] * min(1.0, done / int(total))
                self._advance(event.host, progress_at("install") + int(share))
        elif kind == "stage":
            self._stage_line(event)
        elif kind == "output" and self._stage is not None:
            self._progress.update(self._stage, detail=f"{self._stage_text}: {text}")
        elif kind == "log":
            self._progress.console.print(terminal(log_line(event)), markup=False)
        elif kind == "task":
            for host, task in self._hosts.items():
                if progress_at("configure") <= self._done.get(host, 0) < self._full:
                    self._progress.update(task, detail=f"[cyan]configure[/] {text}")
        elif kind == "result":
            counts = self._results.setdefault(event.host, {})
            status = str(event.data.get("status"))
            counts[status] = counts.get(status, 0) + 1
            tally = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            # site.yml's task count is not known up front: each result moves the bar a little
            # less, so it keeps moving through the longest phase without ever reaching the end
            n = sum(counts.values())
            share = PHASE_SHARE["configure"] * n / (n + CONFIGURE_HALF)
            self._advance(event.host, progress_at("configure") + int(share))
            self._detail(event.host, f"{tally} [cyan]{text}[/]")
        elif kind == "run":
            self._progress.update(self._overall, detail=text)
            if event.data.get("configure") is False:
                self._without_configure()

    def _stage_line(self, event: Event) -> None:
        if event.phase == "configure":  # a play of site.yml: the host lines show its progress
            self._progress.update(self._overall, detail=plain(event.message))
            return
        step, steps = event.data.get("step"), event.data.get("steps")
        name = "prepare".ljust(self._width)
        if self._stage is None:
            self._stage = self._progress.add_task(name, total=None, detail="")
        self._stage_text = plain(event.message)
        update: dict[str, object] = {"detail": self._stage_text}
        if steps and step is not None:
            update["total"], update["completed"] = steps, step
        else:
            # a step of unknown length (a ramdisk build, a download) pulses, a finding (cached)
            # is whole; hosts starting end the preparation either way
            done = "cached" in event.message
            update["total"], update["completed"] = (1, 1) if done else (None, 0)
        self._progress.update(self._stage, **update)  # type: ignore[arg-type]
        if self._progress.live.is_started:
            # Drawn now, not at the next 4 Hz tick: a step that ends within a quarter second
            # would otherwise never be on the screen.
            self._progress.refresh()

    def _prepared(self) -> None:
        """The hosts have started: whatever the preparation row shows is over."""
        if self._stage is not None:
            task = self._progress.tasks[self._stage_index()]
            if task.total is None or task.completed < task.total:
                self._progress.update(self._stage, total=1, completed=1)

    def _stage_index(self) -> int:
        return next(i for i, t in enumerate(self._progress.tasks) if t.id == self._stage)
