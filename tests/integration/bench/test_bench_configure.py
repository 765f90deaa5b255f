"""benchmarks/configure.py keeps working: a small fleet's keys pinned at once, the silent host
named with its reason, and the RESULT line (the figures themselves are the benchmark's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import machine

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow


@machine.needs("root")
def test_key_pinning_benchmark_prints_its_result() -> None:
    machine.require_tools(["/usr/sbin/sshd", "ssh-keyscan"], "scripts/deps/60-health.list")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "configure.py"), "--hosts", "3",
         "--no-before"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "3 hosts + 1 silent, at once" in proc.stderr and "3 keys pinned" in proc.stderr
    assert "silent: ssh-keyscan [127.2.0.1]:" in proc.stderr
    assert "gave no host key within 10 s (2 attempts)" in proc.stderr
    (result,) = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    figures = dict(kv.split("=") for kv in result.split()[1:])
    assert set(figures) == {"keys_3_after_s"}
