"""Each role converges, survives check mode on a fresh host, is idempotent and verifies, under
molecule in a systemd podman container (scripts/molecule/test-role; molecule/shared/README.md).
Vendor packages come from stand-in repositories each scenario describes.

The scenarios run PROVISIONER_MOLECULE_WORKERS at a time (default 2: they wait on apt and
systemd as much as on the CPU); each role is still its own test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import machine

REPO = Path(__file__).resolve().parents[3]
# "role" for a role's default scenario, "role/scenario" for its others (scripts/molecule/test-role).
ROLES = sorted(p.parents[2].name + ("" if p.parent.name == "default" else f"/{p.parent.name}")
               for p in (REPO / "roles").glob("*/molecule/*/molecule.yml"))
# playbooks/molecule: site.yml on a host without GPUs (scripts/molecule/test-role playbooks).
SITE_ROLES = re.compile(r"^\s*(?:- role:|name:)\s*([a-z_]+)\s*$", re.MULTILINE)
WORKERS = int(os.environ.get("PROVISIONER_MOLECULE_WORKERS", "2"))

pytestmark = [pytest.mark.molecule, pytest.mark.slow, pytest.mark.timeout(3600)]


def _run_scenario(role: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts/molecule/test-role"), role, "test"],
        cwd=REPO, capture_output=True, text=True, timeout=1500,
        env={**os.environ, "ANSIBLE_FORCE_COLOR": "0", "PY_COLORS": "0", "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def scenarios(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[
        subprocess.CompletedProcess[str]]]]:
    """Starts the selected roles' scenarios in the background; skips where they cannot run."""
    machine.require("root")
    machine.require_tools(["podman", "runc", "debootstrap", "dpkg-scanpackages", "gpg"],
                          "scripts/deps/30-molecule.list")
    subprocess.run([str(REPO / "scripts/molecule/build-image")], check=True, timeout=900)
    items = [i for i in request.session.items
             if isinstance(i, pytest.Function) and i.module is request.module]
    # Submitted in the order the tests run, so each test waits for little more than its own.
    selected = [str(i.callspec.params["role"]) if hasattr(i, "callspec") else "playbooks"
                for i in items]
    with ThreadPoolExecutor(max_workers=max(1, WORKERS)) as pool:
        yield {role: pool.submit(_run_scenario, role) for role in dict.fromkeys(selected)}


def test_site_playbook_on_a_host_without_gpus(scenarios: dict[str, Future[
        subprocess.CompletedProcess[str]]]) -> None:
    """site.yml: base, Docker and metrics run; GPU/RDMA/PCIe/ZFS stages skip; idempotent."""
    missing = _missing_site_roles()
    assert not missing, f"playbooks name roles that are not in roles/: {', '.join(missing)}"
    proc = scenarios["playbooks"].result()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"molecule test of playbooks/site.yml failed:\n{out[-12000:]}"
    assert "idempotence: Executed: Successful" in out


def _missing_site_roles() -> list[str]:
    named = {m for f in (REPO / "playbooks").glob("*.yml")
             for m in SITE_ROLES.findall(f.read_text())}
    return sorted(r for r in named if not (REPO / "roles" / r).is_dir())


@pytest.mark.parametrize("role", ROLES)
def test_role_scenario(role: str, scenarios: dict[str, Future[
        subprocess.CompletedProcess[str]]]) -> None:
    proc = scenarios[role].result()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"molecule test of {role} failed:\n{out[-12000:]}"
    for step in ("check", "converge", "idempotence", "verify"):
        assert f"{step}: Executed: Successful" in out, f"{role}: {step} did not run:\n{out[-4000:]}"
