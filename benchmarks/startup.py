"""Start-up time of the ``provision`` CLI: ``provision --help`` and every verb's ``--help``.

Each is run as a fresh interpreter (a subprocess, as a user types it), ``--repeat`` times
(median kept); a bare interpreter (``python -c pass``) is timed the same way in the same run so
that a loaded machine can be told from a slow CLI. The goal: every verb's help under 0.2 s on
an idle machine, loading no workflow, requests or pydantic (tests/unit/cli/test_cli_lazy.py
asserts import sets; this script times, and names the heavy packages each help loads).

    .venv/bin/python benchmarks/startup.py [--repeat 5] [--verbs rack,discover]

Prints one line per command, then one line:
``RESULT python_s=... help_s=... verbs=N slowest=VERB slowest_s=... over_0_2_s=N heavy=N
python_cpu_s=... help_cpu_s=... max_verb_cpu_s=... load1=...`` (``heavy``: verbs whose help
loads workflow, requests or pydantic; ``*_cpu_s``: median CPU time, the figure a loaded machine
changes least). Output goes to a pipe, so help is the plain one (cli/main._plain_help).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GOAL_S = 0.2
HEAVY = ("provisioner.workflow", "requests", "pydantic")
# Runs the CLI as `provision ARGS` does, then reports the modules it holds on stderr.
PROBE = """
import json, os, sys
os._exit = lambda code: (_ for _ in ()).throw(SystemExit(code))  # cabling ends the process
from provisioner.cli.main import main
sys.argv = ["provision", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}


def median_s(argv: list[str], repeat: int) -> float:
    """Median wall time of ``repeat`` runs of ``argv`` (their median CPU time goes to CPU)."""
    times, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, env=_env(), cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    CPU[" ".join(argv[1:])] = statistics.median(cpus)
    return statistics.median(times)


# Median CPU seconds (user + system) per timed command line: on a loaded machine wall time is
# mostly waiting for a core; CPU time is what an idle machine's wall time would be, about.
CPU: dict[str, float] = {}


def heavy_modules(args: list[str]) -> list[str]:
    """The heavy packages (HEAVY) ``provision ARGS`` loads."""
    res = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                         env=_env(), cwd=REPO, timeout=120, check=False)
    line = next((x for x in res.stderr.splitlines() if x.startswith("MODULES ")), "MODULES []")
    mods = json.loads(line.removeprefix("MODULES "))
    return sorted({h for h in HEAVY for m in mods if m == h or m.startswith(h + ".")})


def main() -> None:
    """Time the bare interpreter, the root help and each verb's help; print the RESULT line."""
    from provisioner.cli.main import COMMANDS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (median is kept)")
    parser.add_argument("--verbs", help="comma-separated verbs (default: every one)")
    args = parser.parse_args()
    verbs = args.verbs.split(",") if args.verbs else list(COMMANDS)
    cli = [sys.executable, "-m", "provisioner.cli.main"]
    python_s = median_s([sys.executable, "-c", "pass"], args.repeat)
    help_s = median_s([*cli, "--help"], args.repeat)
    python_cpu = CPU["-c pass"]
    help_cpu = CPU[" ".join([*cli[1:], "--help"])]
    print(f"{'':30} {'wall':>8} {'CPU':>7}")
    print(f"{'python -c pass':30} {python_s:6.3f} s {python_cpu:6.3f} s")
    print(f"{'provision --help':30} {help_s:6.3f} s {help_cpu:6.3f} s  "
          f"{', '.join(heavy_modules(['--help']))}")
    timed: dict[str, float] = {}
    heavy = 0
    for verb in verbs:
        timed[verb] = median_s([*cli, verb, "--help"], args.repeat)
        loads = heavy_modules([verb, "--help"])
        heavy += bool(loads)
        flag = "  OVER" if timed[verb] >= GOAL_S else ""
        cpu = CPU[" ".join([*cli[1:], verb, "--help"])]
        print(f"{'provision ' + verb + ' --help':30} {timed[verb]:6.3f} s {cpu:6.3f} s  "
              f"{', '.join(loads) or '-'}{flag}")
    slowest = max(timed, key=lambda v: timed[v])
    over = sum(t >= GOAL_S for t in timed.values())
    print(f"RESULT python_s={python_s:.3f} help_s={help_s:.3f} verbs={len(timed)} "
          f"slowest={slowest} slowest_s={timed[slowest]:.3f} over_0_2_s={over} heavy={heavy} "
          f"python_cpu_s={python_cpu:.3f} help_cpu_s={help_cpu:.3f} "
          f"max_verb_cpu_s={max(CPU.values()):.3f} load1={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
