"""Shared helpers of the cabling unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cabling"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def small_data() -> dict:
    """The small passing manifest as data, for tests that derive a failing variant from it."""
    return yaml.safe_load((FIXTURES / "small-fabric.yaml").read_text())
