"""Find the bad host(s) in a set that fails together (e.g. an all-reduce that hangs on 48 hosts).

Hosts are laid out on a grid of ``rounds[0]`` rows by ``rounds[1]`` columns. Round one runs the
command once per row, round two once per column, so two hosts share a group in at most one
round, and one bad host is named exactly by the failing row and failing column (two rounds
instead of log2(N) sequential halvings, and every group of a round runs at once).
"""

from __future__ import annotations

import math
import shlex
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from provisioner.health.errors import HealthInputError


@dataclass(frozen=True)
class Group:
    """One group of one round."""

    round: int
    index: int
    hosts: tuple[str, ...]


@dataclass
class GroupOutcome:
    """What running the command on one group gave."""

    group: Group
    rc: int
    output: str

    @property
    def failed(self) -> bool:
        """Non-zero exit status."""
        return self.rc != 0


@dataclass
class BisectResult:
    """Both rounds' outcomes and the hosts in a failing group of every round."""

    outcomes: list[GroupOutcome]
    suspects: list[str]
    confirmed: dict[str, bool] = field(default_factory=dict)

    @property
    def ambiguous(self) -> bool:
        """More suspects than failing groups in a round: two bad hosts cross (confirm singly)."""
        failing = [o for o in self.outcomes if o.failed]
        per_round = max((sum(o.group.round == r for o in failing) for r in (1, 2)), default=0)
        return len(self.suspects) > per_round


def parse_groups(spec: str) -> tuple[int, int]:
    """"6,8" -> (6, 8); HealthInputError for anything else."""
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise HealthInputError(
            f"--groups {spec!r}: expected two positive group counts like 6,8",
            hint="round one runs the first number of groups, round two the second",
        )
    return int(parts[0]), int(parts[1])


def plan_rounds(hosts: Sequence[str], rows: int, cols: int) -> list[Group]:
    """Groups of both rounds for ``hosts`` on a rows x cols grid (filled row by row)."""
    if len(set(hosts)) != len(hosts):
        raise HealthInputError("the host list names a host twice")
    if len(hosts) < 2:
        raise HealthInputError("bisect needs at least two hosts")
    if len(hosts) > rows * cols:
        need = math.ceil(len(hosts) / rows)
        raise HealthInputError(
            f"{len(hosts)} hosts do not fit {rows} x {cols} groups",
            hint=f"use --groups {rows},{need} (or larger) for {len(hosts)} hosts",
        )
    # Use as few columns as the hosts need so that rows stay full and columns even.
    cols = math.ceil(len(hosts) / rows)
    grid = [list(hosts[r * cols : (r + 1) * cols]) for r in range(rows)]
    groups = [Group(1, r, tuple(row)) for r, row in enumerate(grid) if row]
    for c in range(cols):
        col = tuple(row[c] for row in grid if c < len(row))
        if col:
            groups.append(Group(2, c, col))
    return groups


def suspects_of(outcomes: list[GroupOutcome]) -> list[str]:
    """Hosts that are in a failing group in every round (in first-round order)."""
    by_round: dict[int, set[str]] = {1: set(), 2: set()}
    order: list[str] = []
    for o in outcomes:
        if o.group.round == 1:
            order.extend(o.group.hosts)
        if o.failed:
            by_round[o.group.round].update(o.group.hosts)
    bad = by_round[1] & by_round[2]
    return [h for h in order if h in bad]


Runner = Callable[[Sequence[str]], tuple[int, str]]


def shell_runner(command: str, timeout_s: float) -> Runner:
    """Run ``command`` with ``{hosts}`` replaced by the group's comma-separated host names."""
    if "{hosts}" not in command:
        raise HealthInputError(
            "--command must contain {hosts}",
            hint="e.g. --command 'mpirun -H {hosts} all_reduce_perf -b 1G -e 1G'",
        )

    def run(hosts: Sequence[str]) -> tuple[int, str]:
        cmd = command.replace("{hosts}", shlex.quote(",".join(hosts)))
        try:
            p = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                               timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {timeout_s:g}s"  # a hang is the typical symptom
        return p.returncode, (p.stdout + p.stderr)[-2000:]

    return run


def bisect(
    hosts: Sequence[str], rows: int, cols: int, run: Runner, *, parallel: int = 8,
    confirm: bool = False,
) -> BisectResult:
    """Run both rounds (groups of a round in parallel) and name the suspects."""
    groups = plan_rounds(hosts, rows, cols)
    outcomes: list[GroupOutcome] = []
    for rnd in (1, 2):
        batch = [g for g in groups if g.round == rnd]
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(batch)))) as pool:
            for g, (rc, out) in zip(batch, pool.map(lambda g: run(g.hosts), batch), strict=True):
                outcomes.append(GroupOutcome(g, rc, out))
    res = BisectResult(outcomes=outcomes, suspects=suspects_of(outcomes))
    if confirm and res.suspects:
        # A collective test on one host proves little: swap each suspect into a group that
        # passed, in place of one of its hosts, so the group size stays what it was.
        good = next((o.group.hosts for o in outcomes if not o.failed and len(o.group.hosts) > 1),
                    None)
        if good is None:
            raise HealthInputError(
                "every group failed: no passing group to confirm suspects against",
                hint="the command may fail everywhere; run it on a known-good set first",
            )
        for h in res.suspects:
            rc, _ = run([*good[:-1], h])
            res.confirmed[h] = rc != 0
    return res
