"""Benchmark of cabling lint and validate on the 4,088-GPU fabric (511 hosts x 8 HCAs, 3 tiers).

Builds the plan, synthesises its ibnetdiscover output (plus ``iblinkinfo -d`` for ports that
are down) with injected faults of every kind, times lint and validate, checks validate found
every fault with a fix that works and raised no false alarm, and prints links per second.

    .venv/bin/python benchmarks/cabling.py [--faults-per-kind 40] [--repeat 3]

Ends with one line: ``RESULT key=value ...``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cabling.diff import validate
from cabling.discovery.iblinkinfo import parse_iblinkinfo
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.manifest import dump_manifest, parse_manifest
from cabling.model import Manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.resolve import resolve
from cabling.rules import lint
from cabling.simulate import (
    FAULT_KINDS,
    build_clean,
    inject_faults,
    render_iblinkinfo_down,
    render_ibnetdiscover,
    verify_report,
)


def _best(fn, repeat: int):  # type: ignore[no-untyped-def]
    """Best wall time, best CPU time (the fair figure on a shared machine), and the result."""
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, result


def main() -> int:
    """Run the benchmark; exit 1 if validate missed a fault or raised a false alarm."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=511)
    ap.add_argument("--faults-per-kind", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    t_plan, _, manifest = _best(lambda: plan_fat_tree(PlanSpec(hosts=args.hosts)), 1)
    text = dump_manifest(manifest)
    t_load, c_load, manifest = _best(lambda: parse_manifest(text, "plan.yaml"), 1)
    js = manifest.model_dump_json()
    _, c_json, _ = _best(lambda: Manifest.model_validate_json(js), args.repeat)
    n_links = len(manifest.links)
    t_lint, c_lint, lint_report = _best(lambda: lint(manifest), args.repeat)
    clean = build_clean(manifest)
    clean_report = validate(manifest, resolve(parse_ibnetdiscover(render_ibnetdiscover(manifest, clean), "clean"),
                                              manifest))
    sim = inject_faults(manifest, args.faults_per_kind, seed=2026)
    ibnet = render_ibnetdiscover(manifest, sim)
    down = render_iblinkinfo_down(manifest, sim)

    def run():  # type: ignore[no-untyped-def]
        fab = parse_ibnetdiscover(ibnet, "fabric.ibnetdiscover")
        fab.merge(parse_iblinkinfo(down, "down.iblinkinfo"))
        return validate(manifest, resolve(fab, manifest))

    t_validate, c_validate, report = _best(run, args.repeat)
    problems = verify_report(manifest, sim, report)
    by_kind = report.by_kind()
    print(f"plan: {args.hosts} hosts, {len(manifest.devices)} devices, {n_links} links, "
          f"{manifest.fabric.tiers} tiers (built in {t_plan:.2f} s)")
    print(f"manifest load: YAML {t_load:.2f} s wall, {c_load:.2f} s CPU ({len(text) // 1024} KiB); "
          f"JSON {c_json:.2f} s CPU")
    print(f"lint: {t_lint:.3f} s wall, {c_lint:.3f} s CPU, {len(lint_report.findings)} findings, "
          f"{n_links / c_lint:,.0f} links/s")
    print(f"injected {len(sim.faults)} faults: " + ", ".join(
        f"{sum(1 for f in sim.faults if f.kind == k)} {k}" for k in FAULT_KINDS))
    print(f"validate (parse ibnetdiscover {len(ibnet) // 1024} KiB + iblinkinfo, name, diff): "
          f"{t_validate:.3f} s wall, {c_validate:.3f} s CPU, {n_links / c_validate:,.0f} links/s")
    print("findings: " + ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items())))
    print(f"clean fabric: {len(clean_report.findings)} findings")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(
        f"RESULT links={n_links} faults={len(sim.faults)} findings={len(report.findings)} "
        f"clean_fabric_findings={len(clean_report.findings)} "
        f"all_found={'yes' if not problems else 'no'} false_alarms={0 if not problems else 'see-above'} "
        f"lint_s={t_lint:.3f} lint_cpu_s={c_lint:.3f} validate_s={t_validate:.3f} validate_cpu_s={c_validate:.3f} "
        f"manifest_load_s={t_load:.3f} manifest_load_cpu_s={c_load:.3f} json_manifest_load_cpu_s={c_json:.3f} "
        f"lint_links_per_s={n_links / c_lint:.0f} validate_links_per_s={n_links / c_validate:.0f}"
    )
    return 1 if problems or lint_report.findings or clean_report.findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
