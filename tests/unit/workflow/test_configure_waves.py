"""site.yml waves: a wave starts as soon as a run may, with every host ready by then; at most
``max_runs`` at once; hosts that come up together share a wave; a host that will not come is
not waited for; a stopped run starts nothing new."""

from __future__ import annotations

import signal
import sys
import threading

import pytest

from provisioner.workflow.configure_waves import ConfigureWaves
from tests.support.signals import ctrl_c_raises
from tests.support.waiting import HANG_S, wait_until


class Waves:
    """Records the waves and holds each one until the test lets it end."""

    def __init__(self) -> None:
        self.started: list[list[str]] = []
        self.release: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def __call__(self, names: list[str]) -> None:
        gate = threading.Event()
        with self.lock:
            self.started.append(list(names))
            for n in names:
                self.release[n] = gate
        assert gate.wait(HANG_S), f"wave {names} was never let go"

    def end(self, host: str) -> None:
        wait_until(lambda: host in self.release, f"the wave of {host}")
        self.release[host].set()

    def count(self) -> int:
        with self.lock:
            return len(self.started)


def test_hosts_ready_while_a_wave_runs_form_the_next_wave_and_runs_are_capped() -> None:
    rec = Waves()
    waves = ConfigureWaves(rec, expected=5, max_runs=2, gather_s=0)
    waves.ready("a")
    wait_until(lambda: rec.count() == 1, "the first wave")
    waves.ready("b")
    wait_until(lambda: rec.count() == 2, "the second wave: a slot was free")
    waves.ready("c")
    waves.ready("d")
    waves.dropped("e")  # its install failed: nobody waits for it
    assert rec.count() == 2  # both slots busy: c and d wait together
    rec.end("a")
    wait_until(lambda: rec.count() == 3, "the third wave")
    assert rec.started == [["a"], ["b"], ["c", "d"]]
    rec.end("b")
    rec.end("c")
    waves.join()
    assert waves.waves == rec.started


def test_hosts_coming_up_together_share_a_wave() -> None:
    rec = Waves()
    waves = ConfigureWaves(rec, expected=3, max_runs=2, gather_s=HANG_S * 10)
    for host in ("a", "b"):
        waves.ready(host)
    assert rec.count() == 0  # gathering: another host is still on its way
    waves.ready("c")  # the last one: the wave starts now, no timer involved
    wait_until(lambda: rec.count() == 1, "the wave")
    rec.end("a")
    waves.join()
    assert rec.started == [["a", "b", "c"]]


def test_close_starts_what_is_pending_and_cancel_starts_nothing() -> None:
    rec = Waves()
    waves = ConfigureWaves(rec, expected=4, max_runs=1, gather_s=HANG_S * 10)
    waves.ready("a")
    waves.close()  # no more hosts will come: a is not kept waiting
    wait_until(lambda: rec.count() == 1, "a's wave")
    rec.end("a")
    waves.join()
    stopped = Waves()
    waves = ConfigureWaves(stopped, expected=3, max_runs=1, gather_s=HANG_S * 10)
    waves.ready("x")
    waves.cancel()
    waves.ready("y")  # a host finishing its install after Ctrl-C
    waves.join()
    assert stopped.started == []


def test_a_wave_that_raises_is_reported_by_join() -> None:
    def broken(names: list[str]) -> None:
        raise RuntimeError("a bug in the wave")

    waves = ConfigureWaves(broken, expected=1, gather_s=0)
    waves.ready("a")
    with pytest.raises(RuntimeError, match="a bug in the wave"):
        waves.join()


def test_a_join_cut_by_ctrl_c_then_joined_again_waits_for_the_running_wave() -> None:
    """The rack runner joins again after Ctrl-C so the waves under way record their hosts: that
    second join must wait (a Thread.join cut by KeyboardInterrupt no longer does on CPython)."""
    main = threading.main_thread()
    in_wave, caught, finished = threading.Event(), threading.Event(), threading.Event()

    def main_is_joining() -> bool:
        frame = sys._current_frames().get(main.ident or 0)
        while frame is not None:
            if frame.f_code.co_name == "join" and "configure_waves" in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        return False

    def wave(names: list[str]) -> None:
        in_wave.set()
        wait_until(main_is_joining, "the main thread in join()")
        signal.pthread_kill(main.ident or 0, signal.SIGINT)  # Ctrl-C reaches the main thread
        assert caught.wait(HANG_S), "the main thread never saw the Ctrl-C"
        finished.set()

    waves = ConfigureWaves(wave, expected=1, gather_s=0.0)
    assert waves.ready("h1")
    assert in_wave.wait(HANG_S)
    with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        waves.join()
    caught.set()  # the wave ends only now: the join below must wait for it
    waves.cancel()
    waves.join()
    assert finished.is_set()
