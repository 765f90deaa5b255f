"""The 80-column screens of `provision reimage` and `provision rack` on a real terminal (tmux,
tests/support/terminal.py), beside the tests of their plain output: what a person sees, row by
row, with nothing wrapped into the next row."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support.terminal import Screen

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[3]


def _env(state_dir: Path) -> dict[str, str]:
    keep = ("PATH", "HOME", "PYTHONPATH", "LANG", "LC_ALL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    return {**env, "PROVISIONER_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO)}


def test_reimage_asks_on_the_terminal_and_a_no_touches_nothing(state_dir: Path,
                                                               tmp_path: Path) -> None:
    argv = [str(BIN / "provision"), "reimage", "--site", "example", "gpu-r01-u03", "gpu-r01-u05"]
    with Screen(argv, _env(state_dir), tmp_path) as screen:
        screen.wait_for("Proceed?")
        asked = screen.lines()
        screen.type("n")
        screen.wait_for("nothing done")
        code = screen.exit_code()
        final = screen.lines()
    assert code == 0, final
    assert asked[0] == "2 hosts will have the root disk wiped and reinstalled (data disks are kept):"
    assert [r.split()[0] for r in asked[1:3]] == ["gpu-r01-u03", "gpu-r01-u05"]
    assert all("(rack r01 U" in r and "BMC " in r for r in asked[1:3]), asked
    assert final[-1] == "nothing done: no host was touched"


LIVE = """
import sys, time
from provisioner import events
from provisioner.cli.deploy_cmds import _view
from provisioner.cli.progress_view import EventReporter
from provisioner.events import Event
from provisioner.workflow.rack import HostResult

hosts = ["lab-host01", "lab-host02", "lab-host03"]
view = _view(hosts, as_json=False)
rep = EventReporter()
with view, events.sinks(view):
    events.emit(Event("run", "3 hosts to install, 3 hosts at once, 3 image streams (uplink "
                      "38 Gb/s / 10 Gb/s)", data={"hosts": hosts}))
    events.emit(Event("stage", "lab OS image built", data={"image": "lab", "step": 5, "steps": 5}))
    for h in hosts:
        rep.phase(h, "install", "writing the image")
    events.emit(Event("bytes", host="lab-host01", data={"done": 300 << 20, "total": 600 << 20}))
    rep.phase("lab-host02", "configure", "running playbooks/site.yml")
    events.emit(Event("task", "docker : Install docker.io, pinned and held at the site's version",
                      phase="configure"))
    events.emit(Event("result", "docker : Install docker.io", host="lab-host02",
                      data={"status": "changed"}))
    rep.finished(HostResult("lab-host03", "failed", "deploy failed after 2 attempt(s): root disk "
                            "hint: no disk matches the hint serial=NO-SUCH-DISK-SERIAL"))
    view._progress.refresh()
print("END")
"""


def test_the_rack_view_keeps_one_row_per_host_at_80_columns(state_dir: Path,
                                                           tmp_path: Path) -> None:
    argv = [sys.executable, "-c", LIVE]
    env = {**_env(state_dir), "TERM": "xterm-256color"}
    with Screen(argv, env, tmp_path) as screen:
        screen.wait_for("END")
        assert screen.exit_code() == 0, screen.text()
        rows = screen.lines()
    names = [r.split()[0] for r in rows[:-1] if r.strip()]
    assert names == ["overall", "lab-host01", "lab-host02", "lab-host03", "prepare"], rows
    by = {r.split()[0]: r for r in rows[:-1] if r.strip()}
    assert "300/600 MiB" in by["lab-host01"] and "24%" in by["lab-host01"]  # moved with bytes
    assert "changed=1" in by["lab-host02"]
    assert "failed deploy failed" in by["lab-host03"] and by["lab-host03"].endswith("…")
    assert "3 hosts to install" in by["overall"]


def test_history_keeps_one_row_per_event_at_80_columns(state_dir: Path, tmp_path: Path) -> None:
    from provisioner.state import NodeState, StateStore

    host = "gpu-r01-u03"
    store = StateStore.for_site("example")
    store.ensure_hosts([host])
    for i in range(3):  # facts updates of many long keys: one row each, not a row per key
        store.record_facts(host, {f"fact_{j:02d}_with_a_long_name": j for j in range(15)} | {"i": i})
    store.transition(host, NodeState.DISCOVERED, reason="discovery: read fully")
    store.transition(host, NodeState.DEPLOYING, reason="image deploy, attempt 1/2")
    store.transition(host, NodeState.FAILED, reason="deploy failed after 2 attempt(s): root disk "
                     "hint: no disk matches the hint serial=NO-SUCH-DISK-SERIAL; refusing to guess",
                     error="no disk", force=True)
    store.close()
    argv = [str(BIN / "provision"), "history", "--site", "example", host]
    with Screen(argv, _env(state_dir), tmp_path) as screen:
        screen.wait_for("└")
        assert screen.exit_code() == 0, screen.text()
        rows = [r for r in screen.lines() if r.strip()]
    assert rows[0] == f"{host}: last 7 events", rows
    table = rows[1:]
    assert all(r[0] in "┏┃┡│└" for r in table), rows  # a wrapped row would start elsewhere
    events = [r for r in table if r.startswith("│ 2")]
    assert len(events) == 7, rows
    assert [r.split("│")[2].strip() for r in events if "->" in r] == [
        "-> enrolled", "enrolled -> discovered", "discovered -> deploying", "deploying -> failed"]
    assert sum("facts updated: 16 facts" in r for r in events) == 3
