"""Start-up time of the ``provision`` CLI: `provision --help` and `provision cabling --help`.

Each is run as a fresh interpreter (a subprocess, as a user types it), best of N; a bare
interpreter is timed the same way so that a loaded machine can be told from a slow CLI. The
goals: help under 0.2 s, and cabling's help loading no provisioner module but the CLI shell
(tests/unit/cli/test_cli_lazy.py asserts the import sets; this script only times).

    .venv/bin/python benchmarks/startup.py [--repeat 10]

Ends with one line: ``RESULT help_s=... cabling_help_s=... python_s=...``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def best_of(argv: list[str], repeat: int) -> float:
    """Best wall time of ``repeat`` runs of ``argv`` (the least disturbed by other load)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Time the three start-ups and print the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each (best is kept)")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "provisioner.cli.main"]
    python_s = best_of([sys.executable, "-c", "pass"], args.repeat)
    help_s = best_of([*cli, "--help"], args.repeat)
    cabling_s = best_of([*cli, "cabling", "--help"], args.repeat)
    print(f"bare interpreter {python_s:.3f} s; provision --help {help_s:.3f} s "
          f"({help_s / python_s:.0f}x); provision cabling --help {cabling_s:.3f} s")
    print(f"RESULT help_s={help_s:.3f} cabling_help_s={cabling_s:.3f} python_s={python_s:.3f}")


if __name__ == "__main__":
    main()
