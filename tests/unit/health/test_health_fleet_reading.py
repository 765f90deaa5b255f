"""The fleet run's stream reading: markers found across chunk boundaries, output capped (a
hostile host cannot make the client hold more than the cap), the streak from facts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from provisioner.health.fleet import _drain, _read_to, _TooLarge
from provisioner.health.service import previous_streak


def feed(*chunks: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    for c in chunks:
        reader.feed_data(c)
    reader.feed_eof()
    return reader


def read_to(chunks: list[bytes], marker: bytes, cap: int = 1 << 20) -> tuple[bool, bytes]:
    async def go() -> tuple[bool, bytes]:
        data = bytearray()
        found = await _read_to(feed(*chunks), marker, data, cap)
        return found, bytes(data)
    return asyncio.run(go())


def test_marker_split_across_chunks_is_found():
    found, data = read_to([b"a\nb\n@@PROVISIONER-HEA", b"LTH-READY\nrest"], b"@@PROVISIONER-HEALTH-READY")
    assert found and data.startswith(b"a\nb\n")
    assert read_to([b"@@PROVISIONER-HEALTH-READY\n"], b"@@PROVISIONER-HEALTH-READY")[0]


def test_marker_must_be_a_whole_line():
    assert not read_to([b"x @@M\n", b"@@Mx\n"], b"@@M")[0]


def test_output_past_the_cap_is_refused():
    with pytest.raises(_TooLarge):
        read_to([b"x" * 70_000, b"y" * 70_000], b"@@M", cap=100_000)


def test_drain_keeps_at_most_the_cap_and_reads_to_the_end():
    async def go() -> bytes:
        return await _drain(feed(b"a" * 1000, b"b" * 1000), 1500)
    assert asyncio.run(go()) == b"a" * 1000 + b"b" * 500


def test_previous_streak_comes_from_the_facts_of_the_last_run():
    now = datetime.now(UTC)
    facts = {"health": {"clean_streak": 4, "at": now.isoformat(timespec="seconds")}}
    assert previous_streak(facts, None) == 4
    assert previous_streak(facts, now - timedelta(hours=1)) == 4
    assert previous_streak(facts, now + timedelta(hours=1)) == 0  # re-installed since
    assert previous_streak({}, None) == 0
    assert previous_streak({"health": {"clean_streak": "4", "at": "x"}}, None) == 0
