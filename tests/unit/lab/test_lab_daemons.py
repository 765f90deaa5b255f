"""Starting and stopping the daemons the lab needs, with stand-in daemons (the real libvirtd
may be serving other labs on this machine, so it is never touched here)."""

from __future__ import annotations

import os

import pytest

from provisioner.exceptions import NotReady
from provisioner.lab import daemons
from provisioner.lab.netns import pid_alive
from tests.support import machine
from tests.support.waiting import wait_until

# Forks a background loop (keeping the script's name as its comm, like a real daemon) that
# creates the socket, then returns 0, as `libvirtd -d` does.
FAKE = """#!/bin/sh
[ "$1" = "-d" ] || exit 2
[ -n "$FAIL" ] && { echo "cannot bind socket: address in use" >&2; exit 1; }
( [ -n "$NO_SOCKET" ] || touch "$FAKE_SOCKET"; while :; do sleep 0.2; done ) &
exit 0
"""


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    names = (f"plablogd{os.getpid() % 1000}", f"plabvirtd{os.getpid() % 1000}")
    for name in names:
        (bin_dir / name).write_text(FAKE)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SOCKET", str(tmp_path / "sock"))
    monkeypatch.setattr(daemons, "DAEMONS", names)
    monkeypatch.setattr(daemons, "SOCKET", tmp_path / "sock")
    monkeypatch.setattr(daemons, "MARKER", tmp_path / "daemons.json")
    yield names
    for name in names:
        for pid in daemons.find_pids(name):
            os.kill(pid, 9)


@machine.needs("root")
def test_daemons_are_started_once_recorded_and_stopped(fakes):
    assert daemons.ensure_daemons(timeout_s=10) == list(fakes)
    pids = daemons.started_by_lab()
    assert sorted(pids) == sorted(fakes) and all(pid_alive(p) for p in pids.values())
    assert daemons.ensure_daemons(timeout_s=10) == []  # already running: nothing started
    assert daemons.stop_lab_daemons() == list(reversed(fakes))
    wait_until(lambda: not any(pid_alive(p) for p in pids.values()), "the daemons to exit")
    assert daemons.started_by_lab() == {}
    assert not daemons.MARKER.exists()


@machine.needs("root")
def test_a_daemon_that_fails_to_start_is_reported_with_its_error(fakes, monkeypatch):
    monkeypatch.setenv("FAIL", "1")
    with pytest.raises(NotReady) as err:
        daemons.ensure_daemons(timeout_s=5)
    assert "failed with exit status 1: cannot bind socket" in str(err.value)


@machine.needs("root")
def test_a_daemon_without_its_socket_is_not_ready(fakes, monkeypatch):
    monkeypatch.setenv("NO_SOCKET", "1")
    with pytest.raises(NotReady, match="did not come up"):
        daemons.ensure_daemons(timeout_s=1)


def test_a_pid_reused_by_another_program_is_not_stopped(fakes, tmp_path):
    daemons.MARKER.write_text(f'{{"{fakes[1]}": {os.getpid()}}}')
    assert daemons.stop_lab_daemons() == []  # our own pid runs python, not the daemon
    assert pid_alive(os.getpid())


@machine.needs("root")
def test_a_missing_daemon_binary_is_named(fakes, monkeypatch):
    monkeypatch.setattr(daemons, "DAEMONS", ("plab-no-such-daemon",))
    with pytest.raises(NotReady, match="plab-no-such-daemon is not installed"):
        daemons.ensure_daemons(timeout_s=1)
