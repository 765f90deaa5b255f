"""Every parser and loader, fed mutated real samples, parses or raises the project's typed error.

Bounded for CI: a fixed seed (derandomize) and FUZZ_EXAMPLES examples per target (default 25).
``scripts/fuzz`` runs the same targets and mutations for as long as you like.
"""

from __future__ import annotations

import os
import tempfile
import traceback
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.mutate import mutate
from tests.fuzz.targets import Target, check, targets

T = TypeVar("T")
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
TARGETS = targets()


class DrawChooser:
    """Mutation choices drawn from hypothesis, so a failure shrinks to its smallest mutation."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def choice(self, items: list[T] | tuple[T, ...]) -> T:
        return self.data.draw(st.sampled_from(items))


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_seeds_parse(target: Target) -> None:
    """The unmutated recordings themselves break no rule (most parse, a few are negative samples)."""
    with tempfile.TemporaryDirectory() as work:
        for seed in target.seed_bytes():
            bad = check(target, seed, Path(work))
            assert bad is None, "".join(traceback.format_exception(bad))


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_mutations_parse_or_raise_typed_error(target: Target) -> None:
    seeds = target.seed_bytes()

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        c = DrawChooser(data)
        sample = mutate(c, seeds[c.int(0, len(seeds) - 1)])
        with tempfile.TemporaryDirectory() as work:
            bad = check(target, sample, Path(work))
        assert bad is None, "".join(traceback.format_exception(bad))[-3000:]

    prop()
