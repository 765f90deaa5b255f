"""Shared pytest fixtures: paths to the repository and to the recorded real-system corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Recordings from real systems live beside the checkout (../shared/corpus) and are never
# copied into the repository; tests that need them skip cleanly where they are absent.
CORPUS = Path(os.environ.get("PROVISIONER_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real-system corpus folder; skips the test when it is not there."""
    if not CORPUS.is_dir():
        pytest.skip(f"real-system corpus not found at {CORPUS}")
    return CORPUS


def corpus_path(*parts: str) -> Path:
    """A path inside the corpus, skipping the calling test if it is absent."""
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"corpus file not found: {p}")
    return p
