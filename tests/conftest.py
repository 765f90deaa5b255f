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

REPO = Path(__file__).resolve().parent.parent
# Recordings from real systems live in the repository (each folder with its PROVENANCE.md), so a
# clone tests itself alone; a missing recording is a failure, never a skip.
CORPUS = REPO / "tests" / "fixtures" / "corpus"


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
