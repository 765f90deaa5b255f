"""Shared pytest fixtures: paths to the repository and to the recorded real-system corpus, and
the lab's generated site written offline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from provisioner.lab.plan import LabPlan

# skip_policy fails a run that skips for anything but a missing machine capability.
pytest_plugins = ("tests.skip_policy", "pytester")

# pytest-timeout: every test gets a limit that only stops a hang (pyproject's `timeout` is the
# default for the rest); the slowest kinds get theirs by marker, the largest one that applies.
# A test's own @pytest.mark.timeout(N) wins. Limits are for a loaded 2-core CI machine.
MARKER_TIMEOUTS_S = {"lab": 2400, "slow": 2400, "molecule": 3600, "longrun": 3600}

REPO = Path(__file__).resolve().parent.parent
# Recordings from real systems live in the repository (each folder with its PROVENANCE.md), so a
# clone tests itself alone; a missing recording is a failure, never a skip.
CORPUS = REPO / "tests" / "fixtures" / "corpus"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        limits = [s for name, s in MARKER_TIMEOUTS_S.items() if item.get_closest_marker(name)]
        if limits:
            item.add_marker(pytest.mark.timeout(max(limits)))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real-system corpus folder; fails the test when it is not there."""
    if not CORPUS.is_dir():
        pytest.fail(f"real-system corpus not found at {CORPUS} (it is part of the repository)")
    return CORPUS


def corpus_path(*parts: str) -> Path:
    """A path inside the corpus; fails the calling test if it is absent."""
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.fail(f"recording not found: {p} (tests/fixtures/corpus is part of the repository)")
    return p


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PROVISIONER_STATE_DIR set to this test's own folder: no test reads or writes the state
    databases of the user running it."""
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def write_lab_site() -> Callable[[LabPlan], LabPlan]:
    """Writes a plan's generated site (CA, SSH key, BMC passwords, site.yml) as `lab up` would,
    without building anything else; returns the plan."""
    from provisioner.lab import pki, sitegen

    def write(plan: LabPlan) -> LabPlan:
        ca_cert, _ = pki.ensure_ca(plan.pki_dir, plan.netns)
        key, pub = pki.ensure_ssh_key(plan.ssh_dir, "lab")
        for host in plan.lab_hosts:
            pki.ensure_password(plan.password_file(host))
        doc = sitegen.site_document(plan, ssh_public_key=pub, ssh_private_key=key)
        sitegen.write_site(plan, sitegen.render_site(doc, plan), ca_cert.read_bytes())
        return plan

    return write
