"""Progress events: the Ansible line parser, the streamed log, the image build's stages."""

from __future__ import annotations

import io
import json
import sys
import threading
from pathlib import Path

import pytest

from provisioner import events
from provisioner.deploy.images.commands import run
from provisioner.events import Event, JsonLinesSink, ListSink
from provisioner.workflow import configure
from provisioner.workflow.ansible_lines import AnsibleLine, parse_line
from tests.support.waiting import wait_until

# Lines as ansible-core's default callback (with profile_tasks) prints them.
ANSIBLE_OUTPUT = """\
PLAY [Base: every host] ********************************************************

TASK [Gathering Facts] *********************************************************
Tuesday 24 November 2026  21:00:00 +0000 (0:00:00.012)       0:00:00.012 ******
ok: [lab-host01]
ok: [lab-host02]

TASK [common : Install chrony] *************************************************
changed: [lab-host01]
ok: [lab-host02 -> localhost]
skipping: [lab-host02] => (item=x)
failed: [lab-host01] (item=y) => {"msg": "boom"}
fatal: [lab-host02]: UNREACHABLE! => {"changed": false, "unreachable": true}
fatal: [lab-host01]: FAILED! => {"msg": "x"}

RUNNING HANDLER [docker : restart docker] **************************************
changed: [lab-host01]

PLAY RECAP *********************************************************************
lab-host01                 : ok=3    changed=2    unreachable=0    failed=1
lab-host02                 : ok=2    changed=0    unreachable=1    failed=0
"""


def test_parse_line_reads_plays_tasks_results_and_recap() -> None:
    parsed = [p for p in map(parse_line, ANSIBLE_OUTPUT.splitlines()) if p is not None]
    assert parsed == [
        AnsibleLine("play", name="Base: every host"),
        AnsibleLine("task", name="Gathering Facts"),
        AnsibleLine("result", host="lab-host01", status="ok"),
        AnsibleLine("result", host="lab-host02", status="ok"),
        AnsibleLine("task", name="common : Install chrony"),
        AnsibleLine("result", host="lab-host01", status="changed"),
        AnsibleLine("result", host="lab-host02", status="ok"),
        AnsibleLine("result", host="lab-host02", status="skipping"),
        AnsibleLine("result", host="lab-host01", status="failed"),
        AnsibleLine("result", host="lab-host02", status="unreachable"),
        AnsibleLine("result", host="lab-host01", status="failed"),
        AnsibleLine("task", name="docker : restart docker"),
        AnsibleLine("result", host="lab-host01", status="changed"),
        AnsibleLine("recap"),
    ]
    # recap lines, timings and JSON details are not progress
    assert parse_line("lab-host01 : ok=3 changed=2 unreachable=0 failed=1") is None
    assert parse_line('    "msg": "ok: [not-a-result]"') is None
    # colour codes (ANSIBLE_FORCE_COLOR) and CRLF do not hide a line's meaning
    assert parse_line("\x1b[0;32mok: [h1]\x1b[0m\r\n") == AnsibleLine("result", host="h1", status="ok")
    assert parse_line("TASK [x : install [extra] bits] ****\n") == AnsibleLine("task", "x : install [extra] bits")


def _fake_playbook(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "ansible-playbook"
    exe.write_text(f"#!{sys.executable}\n{body}")
    exe.chmod(0o755)
    return exe


def test_stream_command_emits_events_and_returns_the_output(tmp_path: Path) -> None:
    exe = _fake_playbook(
        tmp_path,
        f"import sys\nsys.stdout.write({ANSIBLE_OUTPUT!r})\nsys.exit(2)\n",
    )
    sink = ListSink()
    log = tmp_path / "logs" / "site.log"
    with events.sinks(sink):
        code, out = configure.stream_command(
            [str(exe)], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, log_file=log, preamble="n\n"
        )
    assert code == 2
    assert out == "n\n" + ANSIBLE_OUTPUT
    assert log.read_text() == out
    assert [e.data["path"] for e in sink.of("log")] == [str(log)]
    assert sink.events[0].kind == "log"  # the path is known before the first line
    tasks = [e.message for e in sink.of("task")]
    assert tasks == ["Gathering Facts", "common : Install chrony", "docker : restart docker"]
    results = [(e.host, e.message, e.data["status"]) for e in sink.of("result")]
    assert results[0] == ("lab-host01", "Gathering Facts", "ok")
    assert ("lab-host02", "common : Install chrony", "unreachable") in results
    assert results[-1] == ("lab-host01", "docker : restart docker", "changed")
    assert configure.parse_recap(out)["lab-host02"].unreachable == 1


def test_the_log_grows_while_the_playbook_runs(tmp_path: Path) -> None:
    # a stand-in for ansible-playbook that prints a task, then waits until told to go on:
    # the first line must be in the log file while the process still runs
    gate = tmp_path / "go"
    exe = _fake_playbook(
        tmp_path,
        "import sys, time, pathlib\n"
        "print('TASK [common : first] ***', flush=True)\n"
        "print('ok: [h1]', flush=True)\n"
        f"while not pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        "print('TASK [common : second] ***', flush=True)\n"
        "print('changed: [h1]', flush=True)\n",
    )
    log = tmp_path / "site.log"
    done: list[tuple[int, str]] = []
    worker = threading.Thread(
        target=lambda: done.append(
            configure.stream_command([str(exe)], cwd=tmp_path, env={}, log_file=log)
        )
    )
    worker.start()
    try:
        wait_until(lambda: log.exists() and "ok: [h1]" in log.read_text(),
                   "the first task's lines in the log")
        assert not done, "the fake playbook finished before the gate opened"
        first = log.read_text()
        assert "TASK [common : first]" in first and "second" not in first
    finally:
        gate.touch()
        worker.join(30)
    assert done and done[0][0] == 0
    grown = log.read_text()
    assert len(grown) > len(first) and "changed: [h1]" in grown


def test_run_playbook_streams_into_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _fake_playbook(
        tmp_path,
        "import os, sys\nprint('TASK [x] ***')\nprint('PYTHONUNBUFFERED=' + os.environ['PYTHONUNBUFFERED'])\n"
        "print('callback=' + os.environ['ANSIBLE_STDOUT_CALLBACK'])\n",
    )
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(exe))
    monkeypatch.setenv("ANSIBLE_STDOUT_CALLBACK", "json")  # the caller's own choice
    example = Path(__file__).resolve().parents[3] / "inventory" / "example" / "site.yml"
    log = tmp_path / "run.log"
    code, recaps, out = configure.run_playbook(example, ["h1"], log_file=log, pin_keys=False)
    assert code == 0 and recaps == {}
    assert "PYTHONUNBUFFERED=1" in out and "callback=default" in out and log.read_text() == out


def test_image_build_commands_emit_stages_and_output_lines() -> None:
    sink = ListSink()
    with events.sinks(sink):
        out = run(["sh", "-c", "echo 'I: Retrieving Release'; echo; echo 'I: Extracting'"], what="debootstrap")
    assert out == "I: Retrieving Release\n\nI: Extracting\n"
    assert [(e.kind, e.message) for e in sink.events] == [
        ("stage", "debootstrap"),
        ("output", "I: Retrieving Release"),
        ("output", "I: Extracting"),
    ]
    # with no sink installed nothing is collected anywhere
    run(["true"], what="quiet")
    assert len(sink.events) == 3


def test_json_lines_sink_and_a_broken_sink() -> None:
    buf = io.StringIO()

    class Broken:
        def emit(self, event: Event) -> None:
            raise RuntimeError("view crashed")

    with events.sinks(Broken(), JsonLinesSink(buf)):
        events.emit(Event("phase", "one-time PXE boot", host="h1", phase="pxe"))
        events.emit(Event("bytes", host="h1", data={"done": 10, "total": None}))
    docs = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert docs[0]["kind"] == "phase" and docs[0]["host"] == "h1" and docs[0]["phase"] == "pxe"
    assert docs[1]["data"] == {"done": 10, "total": None}
    assert all(isinstance(d["ts"], float) for d in docs)
    events.emit(Event("phase", "after"))  # the sinks are gone
    assert len(buf.getvalue().splitlines()) == 2


def test_each_host_gets_its_own_log(tmp_path: Path) -> None:
    from provisioner.workflow.ansible_logs import HostLogSplitter, host_log

    run_log = tmp_path / "site-20261124-101010.log"
    split = HostLogSplitter(run_log)
    text = ANSIBLE_OUTPUT.replace(
        'fatal: [lab-host01]: FAILED! => {"msg": "x"}\n',
        "fatal: [lab-host01]: FAILED! => \n    msg: the package is held\n    rc: 100\n"
        "included: /x/tasks/y.yml for lab-host02\n",
    )
    for line in text.splitlines(keepends=True):
        split.feed(line)
    one = host_log(run_log, "lab-host01").read_text()
    two = host_log(run_log, "lab-host02").read_text()
    assert host_log(run_log, "lab-host01").parent == tmp_path / "site-20261124-101010"
    assert "lab-host02" not in one and "lab-host01" not in two
    assert one.count("PLAY [Base: every host]") == 1 and two.count("PLAY [Base: every host]") == 1
    assert one.count("TASK [common : Install chrony]") == 1  # once, above its four results
    assert "    msg: the package is held\n    rc: 100\n" in one  # the failure's detail
    assert "included:" not in one  # a line about another host is not host01's detail
    assert "RUNNING HANDLER [docker : restart docker]" in one
    assert "RUNNING HANDLER" not in two  # host02 took no part in the handler
    assert one.rstrip().endswith("lab-host01                 : ok=3    changed=2    unreachable=0    failed=1")
    assert "unreachable=1" in two.splitlines()[-1]
    assert host_log(run_log, "../etc/passwd").parent == host_log(run_log, "x").parent
