"""Each role converges, survives check mode on a fresh host, is idempotent and verifies, under
molecule in a systemd podman container (scripts/molecule/test-role; molecule/shared/README.md).
Vendor packages come from stand-in repositories each scenario describes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ROLES = sorted(p.parents[2].name for p in (REPO / "roles").glob("*/molecule/default/molecule.yml"))

pytestmark = [pytest.mark.molecule, pytest.mark.slow]


@pytest.fixture(scope="module")
def molecule_ready() -> None:
    """Skips unless this machine can run the scenarios (root, podman, runc, debootstrap)."""
    if os.geteuid() != 0:
        pytest.skip("molecule scenarios need root (podman storage, debootstrap)")
    missing = [t for t in ("podman", "runc", "debootstrap", "dpkg-scanpackages")
               if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}: run scripts/install-deps")
    subprocess.run([str(REPO / "scripts/molecule/build-image")], check=True, timeout=900)


@pytest.mark.parametrize("role", ROLES)
def test_role_scenario(role: str, molecule_ready: None) -> None:
    proc = subprocess.run(
        [str(REPO / "scripts/molecule/test-role"), role, "test"],
        cwd=REPO, capture_output=True, text=True, timeout=1500,
        env={**os.environ, "ANSIBLE_FORCE_COLOR": "0", "PY_COLORS": "0", "NO_COLOR": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"molecule test of {role} failed:\n{out[-12000:]}"
    for step in ("check", "converge", "idempotence", "verify"):
        assert f"{step}: Executed: Successful" in out, f"{role}: {step} did not run:\n{out[-4000:]}"
