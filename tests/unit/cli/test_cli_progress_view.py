"""The progress views `provision rack` renders the workflow's events with."""

from __future__ import annotations

import io

from rich.console import Console

from provisioner import events
from provisioner.cli.progress_view import EventReporter, LiveView, PlainView
from provisioner.events import Event, ListSink
from provisioner.workflow.rack import HostResult


def _run_view(view: LiveView) -> None:
    with events.sinks(view):
        events.emit(Event("run", "2 hosts to install", data={"hosts": ["lab-host01", "lab-host02"]}))
        events.emit(Event("stage", "debootstrap bookworm", data={"step": 1, "steps": 5}))
        events.emit(Event("output", "I: Retrieving Packages", data={"stage": "debootstrap"}))
        rep = EventReporter()
        rep.phase("lab-host01", "pxe", "one-time PXE boot, power cycle")
        events.emit(Event("bytes", host="lab-host01", data={"done": 300 << 20, "total": 600 << 20}))
        rep.phase("lab-host01", "configure", "running playbooks/site.yml")
        events.emit(Event("log", data={"path": "/var/log/site-1.log"}))
        events.emit(Event("task", "common : Install chrony", phase="configure"))
        events.emit(Event("output", "[bold]not markup[/]"))
        events.emit(
            Event("result", "common : Install chrony", host="lab-host01", data={"status": "changed"})
        )
        rep.finished(HostResult("lab-host02", "failed", "no disk with serial X"))


def test_live_view_draws_hosts_stage_and_overall_bar_at_80_columns() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system=None)
    view = LiveView(["lab-host01", "lab-host02"], console)
    with events.sinks(view):
        events.emit(Event("bytes", host="lab-host02", data={"done": 300 << 20, "total": 600 << 20}))
    frame = _frame(view)
    assert "300/600 MiB" in frame and "MiB/s" not in frame  # one report: bytes, no rate yet
    _run_view(view)
    assert buf.getvalue() == "log: /var/log/site-1.log  (tail -f it to follow)\n"
    frame = _frame(view)
    lines = frame.splitlines()
    assert [line.split()[0] for line in lines] == ["overall", "lab-host01", "lab-host02", "prepare"]
    # host01 entered configure (58% of a host's time), host02 is over: (58 + 100) / 2
    assert "79%" in lines[0] and "2 hosts to install" in lines[0]
    assert "58%" in lines[1] and "100%" in lines[2]
    assert "changed=1 common : Install chrony" in lines[1]
    assert "failed no disk with serial X" in lines[2]
    assert "100%" in lines[3] and "debootstrap bookworm: [bold]not markup[/]" in lines[3]
    assert all(len(line) <= 80 for line in lines)


def _frame(view: LiveView) -> str:
    out = Console(file=io.StringIO(), width=80, color_system=None, record=True)
    out.print(view.renderable())
    return out.export_text()


def test_plain_view_prints_lines_without_bars() -> None:
    buf = io.StringIO()
    view = PlainView(Console(file=buf, width=80, color_system=None))
    with events.sinks(view):
        EventReporter().phase("h1", "install", "writing the image")
        events.emit(Event("stage", "making the root filesystem", data={"step": 3, "steps": 5}))
        events.emit(Event("output", "noise"))
        events.emit(Event("task", "common : ntp", phase="configure"))
        events.emit(Event("log", data={"path": "/tmp/x.log"}))
    assert buf.getvalue().splitlines() == [
        "h1: install: writing the image",
        "prepare [3/5]: making the root filesystem",
        "configure: TASK common : ntp",
        "log: /tmp/x.log  (tail -f it to follow)",
    ]
    assert "\x1b" not in buf.getvalue()


def test_reporter_results_are_events() -> None:
    sink = ListSink()
    with events.sinks(sink):
        EventReporter().finished(HostResult("h1", "ok", "configured", attempts=1))
    (done,) = sink.of("done")
    assert (done.host, done.message, done.data["status"]) == ("h1", "configured", "ok")


def test_without_site_yml_a_host_is_whole_once_installed() -> None:
    view = LiveView(["h1"], Console(file=io.StringIO(), width=80, color_system=None))
    with events.sinks(view):
        events.emit(Event("run", "1 host", data={"hosts": ["h1"], "configure": False}))
        EventReporter().phase("h1", "ssh", "waiting for SSH")
        first = _frame(view)
        EventReporter().phase("h1", "done", "installed, SSH answers")
    assert "88%" in first.splitlines()[1]  # 53 of the 60 shares a run without site.yml has
    assert "100%" in _frame(view).splitlines()[0]


def test_the_preparation_row_shows_steps_a_pulse_or_a_cache_hit() -> None:
    view = LiveView(["h1"], Console(file=io.StringIO(), width=80, color_system=None))
    with events.sinks(view):
        events.emit(Event("stage", "building the deploy ramdisk (linux-image-cloud-amd64)"))
        pulsing = _frame(view).splitlines()[-1]
        events.emit(Event("stage", "debootstrap bookworm", data={"step": 1, "steps": 5}))
        stepped = _frame(view).splitlines()[-1]
        events.emit(Event("stage", "lab OS image: cached in /c/images/ab12"))
        cached = _frame(view).splitlines()[-1]
        events.emit(Event("stage", "play: Base", phase="configure"))  # site.yml: host lines
    assert "%" not in pulsing  # unknown length: a pulse, no made-up percentage
    assert "20%" in stepped and "100%" in cached
    assert "play: Base" in _frame(view).splitlines()[0] and "play: Base" not in cached


def test_every_image_stage_is_drawn_however_soon_the_next_comes() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=True, color_system=None)
    with LiveView(["lab-host01"], console) as view, events.sinks(view):
        for step, text in enumerate(("building the lab OS image", "debootstrap bookworm",
                                     "installing the kernel")):
            events.emit(Event("stage", text, data={"image": "lab", "step": step, "steps": 3}))
    out = buf.getvalue()
    assert all(text in out for text in ("building the lab OS image", "debootstrap bookworm",
                                        "installing the kernel")), out


class _Clock:
    """A hand-moved clock: the views' time without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_output_gets_a_heartbeat_after_30_s_of_silence_with_bytes_and_task() -> None:
    buf = io.StringIO()
    clock = _Clock()
    view = PlainView(Console(file=buf, width=80, color_system=None), clock=clock)
    rep = EventReporter()
    with events.sinks(view):  # not entered: no ticker thread, the test ticks by hand
        rep.phase("h1", "install", "writing the image")
        rep.phase("h2", "configure", "running playbooks/site.yml")
        events.emit(Event("task", "common : Install chrony", phase="configure"))
        clock.now += 29
        events.emit(Event("bytes", host="h1", data={"done": 300 << 20, "total": 600 << 20}))
        view.tick()
        assert len(buf.getvalue().splitlines()) == 3  # 29 s: nothing yet (bytes print no line)
        clock.now += 1
        view.tick()
        clock.now += 10
        view.tick()  # 10 s after the heartbeat: not another one
        clock.now += 2840 - 40
        view.tick()
        rep.phase("h1", "done", "configured")
        rep.finished(HostResult("h2", "ok", "configured"))
        clock.now += 60
        view.tick()  # nothing runs: silence is right
    lines = buf.getvalue().splitlines()
    assert lines[3:] == [
        "still running (30s so far): 1 host in install (up to 30s, 300/600 MiB written); "
        "1 host in configure (up to 30s, TASK common : Install chrony for 30s)",
        "still running (47m20s so far): 1 host in install (up to 47m20s, 300/600 MiB written); "
        "1 host in configure (up to 47m20s, TASK common : Install chrony for 47m20s)",
        "h1: done: configured",
    ]


def test_the_heartbeat_names_the_preparation_step_and_its_last_output() -> None:
    clock = _Clock()
    view = PlainView(Console(file=io.StringIO(), width=80, color_system=None), clock=clock)
    with events.sinks(view):
        events.emit(Event("stage", "debootstrap bookworm", data={"step": 1, "steps": 5}))
        events.emit(Event("output", "I: Retrieving Packages"))
        clock.now += 125
    assert view.heartbeat() == ("still running (2m05s so far): debootstrap bookworm for 2m05s: "
                                "I: Retrieving Packages")


def test_the_heartbeat_thread_prints_while_nothing_else_does() -> None:
    from tests.support.waiting import wait_until

    buf = io.StringIO()
    view = PlainView(Console(file=buf, width=80, color_system=None), heartbeat_s=0.01)
    with view, events.sinks(view):
        EventReporter().phase("h1", "install", "writing the image")
        wait_until(lambda: "still running" in buf.getvalue(), "a heartbeat line")
    assert "1 host in install" in buf.getvalue()


def test_durations_read_as_minutes_and_seconds() -> None:
    from provisioner.cli.progress_view import duration

    assert [duration(s) for s in (0, 12.4, 59.6, 2869, 3600, 7385)] == [
        "0s", "12s", "1m00s", "47m49s", "1h00m", "2h03m"]


def test_the_host_bar_moves_with_the_bytes_written_and_time_left_is_steady() -> None:
    clock = _Clock()
    view = LiveView(["h1"], Console(file=io.StringIO(), width=80, color_system=None), clock=clock)
    with events.sinks(view):
        events.emit(Event("run", "1 host", data={"hosts": ["h1"]}))
        EventReporter().phase("h1", "install", "writing the image")
        at_start = _frame(view).splitlines()[1]
        seen = []
        for done in (150, 300, 450):
            clock.now += 60
            events.emit(Event("bytes", host="h1", data={"done": done << 20, "total": 600 << 20}))
            seen.append(_frame(view).splitlines()[1])
    assert "12%" in at_start  # the install's start
    assert ["18%" in seen[0], "24%" in seen[1], "30%" in seen[2]] == [True, True, True]
    # elapsed x left / done: 180 s for 30 of 100 -> 7m00s, from the run's whole pace
    assert "7m00s left" in seen[2], seen[2]
    # the rate over the bytes since the first report: 300 MiB in 120 s
    assert "450/600 MiB at 2 MiB/s" in seen[2], seen[2]
