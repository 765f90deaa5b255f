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
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.fuzz.mutate import mutate
from tests.fuzz.targets import Target, check, run_case, targets

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
    """Every unmutated recording parses, without even a typed error; only the seeds the target
    names as refused (negative samples, a neighbouring format) give its typed error."""
    seeds = list(enumerate(zip(target.seeds, target.seed_bytes(), strict=True)))
    assert all(any(s.match(p) for s in target.seeds) for p in target.refused), target.refused
    if target.run_seed is not None:  # a whole discovery per seed: a spread of them is enough
        seeds = seeds[:: max(1, len(seeds) // 6)]
    with tempfile.TemporaryDirectory() as work:
        for i, (path, seed) in seeds:
            if target.refuses(path):
                with pytest.raises(target.errors) as refused:
                    run_case(target, seed, Path(work), i)
                assert (target.names_file or "") in str(refused.value), path
            else:
                run_case(target, seed, Path(work), i)


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_mutations_parse_or_raise_typed_error(target: Target) -> None:
    seeds = target.seed_bytes()

    # No shrinking: it can take minutes on 60,000-deep inputs; the report shows the mutation.
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        c = DrawChooser(data)
        i = c.int(0, len(seeds) - 1)
        sample = mutate(c, seeds[i])
        with tempfile.TemporaryDirectory() as work:
            bad = check(target, sample, Path(work), i)
        assert bad is None, "".join(traceback.format_exception(bad))[-3000:]

    prop()
