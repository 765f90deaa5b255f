"""The image-stream gate alone: limit, FIFO tickets that keep their place, expiry, release, and
held requests handed a released stream at once (FIFO, bounded, vanished hosts dropped)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from provisioner.deploy.embedded.gate import Admission, StreamGate
from tests.support.waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_admits_up_to_the_limit_then_refuses() -> None:
    gate = StreamGate(2)
    assert gate.try_admit("a").admitted and gate.try_admit("b").admitted
    refused = gate.try_admit("c")
    assert not refused.admitted and refused.position == 1 and refused.active == 2
    assert gate.active == 2 and gate.waiting() == ["c"]


def test_tickets_keep_their_place_while_retrying() -> None:
    clock = Clock()
    gate = StreamGate(1, clock=clock)
    assert gate.try_admit("holder").admitted
    for key in ("first", "second", "third"):
        assert not gate.try_admit(key).admitted
    clock.now = 5.0
    # retries in reverse order change nothing: the queue is first-asked first
    assert gate.try_admit("third").position == 3
    assert gate.try_admit("second").position == 2
    gate.release("holder")
    # a free stream goes to the oldest ticket only, even when a younger one asks first
    assert not gate.try_admit("third").admitted
    assert not gate.try_admit("second").admitted
    first = gate.try_admit("first")
    assert first.admitted and first.waited_s == 5.0
    assert gate.waiting() == ["second", "third"]


def test_a_ticket_that_stops_asking_expires() -> None:
    clock = Clock()
    gate = StreamGate(1, ticket_ttl_s=30, clock=clock)
    assert gate.try_admit("holder").admitted
    assert not gate.try_admit("gone").admitted  # this host then fails and stops asking
    assert not gate.try_admit("alive").admitted
    clock.now = 20.0
    assert gate.try_admit("alive").position == 2
    clock.now = 40.0  # "gone" last asked 40 s ago, "alive" 20 s ago
    gate.release("holder")
    assert gate.try_admit("alive").admitted
    assert gate.waiting() == []


def test_forget_drops_a_withdrawn_hosts_ticket() -> None:
    gate = StreamGate(1)
    assert gate.try_admit("holder").admitted
    assert not gate.try_admit("withdrawn").admitted
    assert not gate.try_admit("next").admitted
    gate.forget("withdrawn")
    gate.release("holder")
    assert gate.try_admit("next").admitted


def test_release_counts_per_stream() -> None:
    gate = StreamGate(2)
    assert gate.try_admit("a").admitted and gate.try_admit("a").admitted  # e.g. a resumed Range
    assert not gate.try_admit("b").admitted
    gate.release("a")
    assert gate.active == 1
    assert gate.try_admit("b").admitted
    gate.release("a")
    gate.release("a")  # an extra release never drives the count below zero
    assert gate.active == 1


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        StreamGate(0)


# -- held requests (the long poll) ------------------------------------------------------------


class Wakes:
    """Records which holds the gate woke, in order."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def __call__(self, name: str) -> Callable[[], None]:
        return lambda: self.order.append(name)


def test_a_released_stream_goes_to_the_oldest_held_request_at_once() -> None:
    clock = Clock()
    gate = StreamGate(1, clock=clock)
    wakes = Wakes()
    assert gate.try_admit("holder").admitted
    holds = {k: gate.hold(k, wakes(k)) for k in ("first", "second", "third")}
    assert all(h.admission is None for h in holds.values())  # all three wait in the gate
    assert gate.stats().held == 3 and gate.waiting() == ["first", "second", "third"]
    clock.now = 4.0
    gate.release("holder")
    # handed over in the release itself: no stream is ever free while a host waits
    assert wakes.order == ["first"] and gate.active == 1
    first = holds["first"].admission
    assert first is not None and first.admitted and first.waited_s == 4.0
    clock.now = 7.0
    gate.release("first")
    gate.release("second")
    assert wakes.order == ["first", "second", "third"]
    stats = gate.stats()
    assert (stats.held, stats.waiting, stats.admitted) == (0, 0, 4)
    assert stats.mean_stream_s == pytest.approx((4.0 + 3.0 + 0.0) / 3)


def test_a_hold_that_runs_out_keeps_its_place() -> None:
    clock = Clock()
    gate = StreamGate(1, clock=clock)
    assert gate.try_admit("holder").admitted
    first = gate.hold("first", lambda: None)
    second = gate.hold("second", lambda: None)
    clock.now = 25.0
    refused = gate.cancel(first)  # its hold ran out: a held 503, it asks again at once
    assert not refused.admitted and refused.held and refused.position == 1
    again = gate.hold("first", lambda: None)
    assert again.admission is None and gate.waiting() == ["first", "second"]
    gate.release("holder")
    assert again.admission is not None and again.admission.admitted
    assert second.admission is None  # still waiting, next in line


def test_a_released_stream_skips_a_polling_host_but_it_keeps_its_place() -> None:
    gate = StreamGate(1)
    wakes = Wakes()
    assert gate.try_admit("holder").admitted
    assert not gate.try_admit("poller").admitted  # asks, sleeps, asks again (no hold)
    gate.hold("held", wakes("held"))
    gate.release("holder")
    # the stream does not idle until the poller asks again: the held request gets it
    assert wakes.order == ["held"]
    assert gate.try_admit("late").position == 2  # the poller is still ahead of newcomers
    gate.release("held")
    assert gate.try_admit("poller").admitted


def test_a_vanished_host_gives_up_its_ticket() -> None:
    clock = Clock()
    gate = StreamGate(1, ticket_ttl_s=30, clock=clock)
    wakes = Wakes()
    assert gate.try_admit("holder").admitted
    gone = gate.hold("gone", wakes("gone"))
    gate.hold("alive", wakes("alive"))
    clock.now = 100.0  # a held ticket never expires while it waits
    assert gate.waiting() == ["gone", "alive"]
    refused = gate.cancel(gone, gone=True)  # its client closed the connection
    assert not refused.admitted and refused.position == 0
    assert gate.waiting() == ["alive"]
    gate.release("holder")
    assert wakes.order == ["alive"]


def test_forget_wakes_a_withdrawn_hosts_held_request() -> None:
    gate = StreamGate(1)
    wakes = Wakes()
    assert gate.try_admit("holder").admitted
    h = gate.hold("withdrawn", wakes("withdrawn"))
    gate.hold("next", wakes("next"))
    gate.forget("withdrawn")
    assert wakes.order == ["withdrawn"]
    assert h.admission is not None and not h.admission.admitted and gate.stats().held == 1
    gate.release("holder")
    assert wakes.order == ["withdrawn", "next"]


def test_holds_and_tickets_are_bounded() -> None:
    gate = StreamGate(1, max_held=2, max_tickets=3)
    assert gate.try_admit("holder").admitted
    assert gate.hold("a", lambda: None).admission is None
    assert gate.hold("b", lambda: None).admission is None
    over = gate.hold("c", lambda: None)  # no hold slot left: refused at once, ticket queued
    assert over.admission is not None and not over.admission.admitted
    assert not over.admission.held and over.admission.position == 3
    full = gate.try_admit("d")  # no ticket left either
    assert not full.admitted and full.position == 0
    assert gate.waiting() == ["a", "b", "c"] and gate.stats().held == 2


def test_blocking_admit_is_handed_the_stream_from_another_thread() -> None:
    gate = StreamGate(1)
    assert gate.try_admit("holder").admitted
    got: list[Admission] = []
    waiter = threading.Thread(target=lambda: got.append(gate.admit("w", hold_s=60)))
    waiter.start()
    wait_until(lambda: gate.stats().held, "the request to wait in the gate")
    gate.release("holder")
    waiter.join(30)  # a hand-over that did not happen would hold it 60 s
    assert not waiter.is_alive() and got[0].admitted


def test_blocking_admit_gives_up_when_the_client_goes() -> None:
    gate = StreamGate(1)
    assert gate.try_admit("holder").admitted
    a = gate.admit("w", hold_s=60, gone=lambda: True, poll_s=0.01)
    assert not a.admitted and a.held and gate.waiting() == []
    b = gate.admit("x", hold_s=0.05, poll_s=0.01)  # the hold runs out: refused, place kept
    assert not b.admitted and b.held and b.position == 1 and gate.waiting() == ["x"]


# -- retries ahead of first attempts ----------------------------------------------------------


def test_a_retry_queues_ahead_of_first_attempts_fifo_among_retries() -> None:
    gate = StreamGate(1)
    wakes = Wakes()
    assert gate.try_admit("holder").admitted
    holds = {k: gate.hold(k, wakes(k)) for k in ("first", "second")}
    gate.prefer("retry-a")  # marked before it asks: its ticket goes in ahead when it does
    holds["retry-a"] = gate.hold("retry-a", wakes("retry-a"))
    holds["third"] = gate.hold("third", wakes("third"))
    holds["retry-b"] = gate.hold("retry-b", wakes("retry-b"))
    gate.prefer("retry-b")  # marked after it queued: moved up behind the older retry
    assert gate.waiting() == ["retry-a", "retry-b", "first", "second", "third"]
    for key in ("holder", "retry-a", "retry-b", "first", "second"):
        gate.release(key)
    assert wakes.order == ["retry-a", "retry-b", "first", "second", "third"]


def test_a_preference_ends_with_the_stream_it_got_or_forget() -> None:
    gate = StreamGate(1)
    gate.prefer("retry")
    assert gate.try_admit("retry").admitted
    assert not gate.try_admit("first").admitted
    gate.release("retry")
    assert not gate.try_admit("retry").admitted  # asks again: a first-attempt ticket now
    assert gate.waiting() == ["first", "retry"]
    gate.prefer("gone")
    gate.forget("gone")
    assert not gate.try_admit("gone").admitted
    assert gate.waiting() == ["first", "retry", "gone"]


def test_preferences_are_bounded() -> None:
    gate = StreamGate(1, max_tickets=2)
    assert gate.try_admit("holder").admitted
    assert not gate.try_admit("first").admitted
    for key in ("r1", "r2", "r3"):
        gate.prefer(key)
    for key in ("r1", "r3"):
        gate.try_admit(key)
    assert gate.waiting() == ["r1", "first"]  # r3: no preference kept, no ticket (queue full)
