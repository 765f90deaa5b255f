"""The image stream's rate floor on a virtual clock: measured over the time the server waits for
the client (a slow server is not the client's fault), per window (a fast start buys no credit),
never cutting a client at the floor, off at 0."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from provisioner.deploy.embedded.min_rate import StreamTooSlow, at_least

KB = b"x" * 1000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def chunks(n: int, clock: Clock, make_s: float = 0.0) -> Iterator[bytes]:
    """``n`` chunks of 1 kB, each taking the server ``make_s`` to produce."""
    for _ in range(n):
        clock.now += make_s
        yield KB


def take(stream: Iterator[bytes], clock: Clock, write_s: Callable[[int], float]) -> int:
    """The client: chunk i takes ``write_s(i)`` to reach it; returns the bytes it got."""
    seen = 0
    for i, chunk in enumerate(stream):
        clock.now += write_s(i)
        seen += len(chunk)
    return seen


def test_the_floor_is_checked_per_window_not_on_average_since_the_start():
    clock = Clock()
    # 1 MB at 1 ms a chunk (1 MB/s), then 1 kB/s: on average since the start it would
    # stay above 20 kB/s for 50 s more
    stream = at_least(chunks(1100, clock), min_bps=20_000, window_s=10, clock=clock)
    seen = 0
    with pytest.raises(StreamTooSlow):
        for i, chunk in enumerate(stream):
            clock.now += 0.001 if i < 1000 else 1.0
            seen += len(chunk)
    # the fast start buys no credit: cut at the end of the first slow window
    assert 1_000_000 < seen <= 1_021_000


def test_a_client_at_the_floor_is_never_cut_and_zero_is_no_floor():
    clock = Clock()
    stream = at_least(chunks(500, clock), min_bps=10_000, window_s=1, clock=clock)
    assert take(stream, clock, lambda i: 0.09) == 500_000
    clock = Clock()
    assert take(at_least(chunks(50, clock), min_bps=0, clock=clock), clock,
                lambda i: 100.0) == 50_000


def test_a_slow_server_is_not_the_clients_fault():
    clock = Clock()
    # the server takes 10 s to read each kB of the image (a loaded disk); the client takes
    # each at once: 100 B/s of wall time, yet the client never kept the server waiting
    stream = at_least(chunks(100, clock, make_s=10.0), min_bps=10_000, window_s=5, clock=clock)
    assert take(stream, clock, lambda i: 0.0001) == 100_000
