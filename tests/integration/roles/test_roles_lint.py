"""ansible-lint (production profile, .ansible-lint) finds nothing in roles/ and playbooks/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_ansible_lint_production_profile_is_clean() -> None:
    lint = shutil.which("ansible-lint", path=str(Path(sys.executable).parent)) or shutil.which(
        "ansible-lint")
    assert lint is not None, "ansible-lint is not installed: ./scripts/install-deps installs it"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "ANSIBLE_ROLES_PATH": str(REPO / "roles")}
    proc = subprocess.run(
        [lint, "--profile", "production", "--offline", "-q", "--nocolor", "roles", "playbooks"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
