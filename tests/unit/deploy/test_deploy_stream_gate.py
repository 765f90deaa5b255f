"""The image-stream gate alone: limit, FIFO tickets that keep their place, expiry, release."""

from __future__ import annotations

import pytest

from provisioner.deploy.embedded.gate import StreamGate


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
