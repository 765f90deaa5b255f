"""Shared pytest fixtures: paths to the repository and to the recorded real-system corpus, and
the lab's generated site written offline."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from provisioner.lab.plan import LabPlan

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
