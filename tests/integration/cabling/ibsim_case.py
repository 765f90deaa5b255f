"""Helpers of the tests whose peer is the real InfiniBand stack: ibsim (the simulator, answering
MADs for a fabric written from a plan), OpenSM (one sweep) and infiniband-diags (ibnetdiscover,
iblinkinfo, ibqueryerrors), whose output is fed to ``provision cabling validate``."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cabling.cli import cabling_app
from cabling.ibsim.netfile import BuiltFabric
from cabling.ibsim.simulator import Simulator, launch, missing_tools
from tests.support import machine

runner = CliRunner()

# What each tool run is called in the tests, and its command line.
TOOLS: dict[str, tuple[str, ...]] = {
    "ibnetdiscover": ("ibnetdiscover",),
    "iblinkinfo": ("iblinkinfo",),
    "iblinkinfo-l": ("iblinkinfo", "-l"),
    "iblinkinfo-d": ("iblinkinfo", "-d"),
}
# The outputs that carry the topology; 'iblinkinfo -d' (ports that are down) only adds to them.
TOPOLOGY = ("ibnetdiscover", "iblinkinfo", "iblinkinfo-l")


def need_stack() -> None:
    """Fails the test, naming the fix, when the simulated stack is not installed (the skip
    policy allows no skip for a tool scripts/install-deps installs)."""
    machine.fail_if_missing(missing_tools(), "scripts/deps/40-cabling.list")


def combos() -> list[tuple[str, ...]]:
    """Every combination of the tools' outputs that has a topology in it."""
    names = list(TOOLS)
    out = [c for n in range(1, len(names) + 1) for c in combinations(names, n)]
    return [c for c in out if set(c) & set(TOPOLOGY)]


def start(built: BuiltFabric, workdir: Path, *, attach: str | None = None) -> Simulator:
    """The simulator of ``built``, started and swept once by OpenSM (the caller stops it)."""
    sim = launch(built, workdir, attach=attach)
    sim.start()
    try:
        sim.sweep()
    except BaseException:
        sim.stop()
        raise
    return sim


def capture(sim: Simulator, folder: Path, *names: str) -> dict[str, Path]:
    """Run the named tools (keys of TOOLS) against the simulator; their outputs, saved."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for name in names or tuple(TOOLS):
        path = folder / f"{name}.txt"
        path.write_text(sim.run(*TOOLS[name]).stdout)
        out[name] = path
    return out


def validate(manifest: Path, outputs: dict[str, Path], use: tuple[str, ...], report: Path,
             *extra: str) -> dict[str, Any]:
    """``provision cabling validate`` on the chosen outputs; the JSON report (exit code in it)."""
    args = ["validate", "-m", str(manifest), "-f", "json", "-o", str(report), *extra]
    for name in use:
        args += ["--ibnetdiscover" if name == "ibnetdiscover" else "--iblinkinfo", str(outputs[name])]
    result = runner.invoke(cabling_app, args)
    assert result.exit_code in (0, 3), result.output
    data: dict[str, Any] = json.loads(report.read_text())
    data["exit_code"] = result.exit_code
    return data


def kinds(report: dict[str, Any]) -> dict[str, int]:
    """Findings per kind."""
    out: dict[str, int] = {}
    for f in report["findings"]:
        out[f["kind"]] = out.get(f["kind"], 0) + 1
    return out


def fixes(report: dict[str, Any], kind: str | None = None) -> list[str]:
    """The fix of every finding (of one kind)."""
    return [f["fix"] for f in report["findings"] if kind is None or f["kind"] == kind]
