"""Benchmark of cabling lint and validate on the 4,088-GPU fabric (511 hosts x 8 HCAs, 3 tiers).

Builds the plan, synthesises its ibnetdiscover output (plus ``iblinkinfo -d`` for ports that
are down) with injected faults of every kind, times lint and validate, checks validate found
every fault with a fix that works and raised no false alarm, and prints links per second.
Then runs the command line end to end as a user would (a new process reading the YAML manifest
and the discovery files, writing the JSON report) and reports its best wall time and peak memory
(``cli_*``; the goal is 0.5 s and 100 MiB): on a shared machine the best of the repeats is the
figure that measures the code rather than the neighbours.

    .venv/bin/python benchmarks/cabling.py [--faults-per-kind 40] [--repeat 3]

``--real-tools`` times the path a user runs instead, with the real InfiniBand stack as the fabric:
the same faults built into ibsim (the fabric simulator, Debian 12's ibsim-utils), one OpenSM sweep,
then ``ibnetdiscover`` and ``iblinkinfo`` (infiniband-diags) each timed (best of ``--repeat``), then
our ``python -m cabling validate`` on their outputs (best of ``--cli-repeat``), checked to find every
fault with a working fix and nothing else.

Ends with one line: ``RESULT key=value ...``.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cabling.diff import validate
from cabling.discovery.iblinkinfo import parse_iblinkinfo
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.ibsim.netfile import BuiltFabric
from cabling.ibsim.simulator import Simulator, launch, missing_tools
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
    """Best wall time, best CPU time (the fair figure on a shared machine), and the result; the
    cyclic GC rests during the call, as it does while a CLI command runs."""
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            result = fn()
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        finally:
            gc.enable()
    return best, best_cpu, result


# Runs a module as ``python -m`` does and, at exit (os._exit too), writes the process's peak RSS (VmHWM: counted
# from exec, unlike ru_maxrss, which a vfork-ed child inherits from this large benchmark process).
_RUN_MODULE = """import atexit, os, runpy, sys
out = sys.argv.pop(1)
def hwm():
    with open('/proc/self/status') as st, open(out, 'w') as fh:
        fh.write(next(line for line in st if line.startswith('VmHWM')).split()[1])
atexit.register(hwm)
real_exit = os._exit
def _exit(code):
    hwm()
    real_exit(code)
os._exit = _exit  # python -m cabling ends with os._exit, which skips atexit
runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)
"""


def _process(module: str, args: list[str], repeat: int, tmp: Path) -> tuple[float, float, float, int]:
    """Best wall seconds, best CPU seconds (user+sys), peak RSS (MiB) of ``python -m module args``
    over ``repeat`` runs, and its exit code."""
    best, best_cpu, peak, rc = float("inf"), float("inf"), 0.0, 0
    # As installed: pip compiles bytecode, so the runs use it too (kept out of the tree, written by
    # an untimed first run) even where PYTHONDONTWRITEBYTECODE is set for the test suite.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    hwm = tmp / "hwm"
    cmd = [sys.executable, "-c", _RUN_MODULE, str(hwm), module, *args]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, usage.ru_utime + usage.ru_stime)
        peak = max(peak, int(hwm.read_text()) / 1024)  # KiB
        rc = proc.returncode = os.waitstatus_to_exitcode(status)
    return best, best_cpu, peak, rc


def _end_to_end(manifest: Manifest, ibnet: str, down: str, repeat: int) -> dict[str, float]:
    """The CLI on files, as a technician runs it: validate (faulty fabric) and lint."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "plan.yaml").write_text(dump_manifest(manifest), encoding="utf-8")
        (d / "fabric.ibnetdiscover").write_text(ibnet, encoding="utf-8")
        (d / "down.iblinkinfo").write_text(down, encoding="utf-8")
        validate_args = ["validate", "-m", str(d / "plan.yaml"), "--ibnetdiscover", str(d / "fabric.ibnetdiscover"),
                         "--iblinkinfo", str(d / "down.iblinkinfo"), "-f", "json", "-o", str(d / "report.json")]
        v_s, v_cpu, v_mib, v_rc = _process("cabling", validate_args, repeat, d)
        l_s, l_cpu, l_mib, l_rc = _process("cabling", ["lint", str(d / "plan.yaml"), "-f", "json", "-o",
                                                       str(d / "lint.json")], repeat, d)
        p_s, p_cpu, p_mib, p_rc = _process("provisioner.cli.main", ["cabling", *validate_args], repeat, d)
    if v_rc != 3 or l_rc != 0 or p_rc != 3:
        print(f"PROBLEM: end-to-end exit codes validate={v_rc} lint={l_rc} provision={p_rc} (want 3, 0, 3)")
    return {"cli_validate_s": v_s, "cli_validate_cpu_s": v_cpu, "cli_peak_mib": v_mib, "cli_lint_s": l_s,
            "cli_lint_cpu_s": l_cpu, "cli_lint_peak_mib": l_mib, "cli_provision_validate_s": p_s,
            "cli_provision_validate_cpu_s": p_cpu, "cli_provision_peak_mib": p_mib}


def _timed_tool(sim: Simulator, argv: tuple[str, ...], repeat: int, out: Path) -> float:
    """Best wall seconds of one diag against the simulator over ``repeat`` runs; its output kept."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = sim.run(*argv)
        best = min(best, time.perf_counter() - t0)
    out.write_text(done.stdout, encoding="utf-8")
    return best


def real_tools(hosts: int, per_kind: int, repeat: int, cli_repeat: int) -> int:
    """The real-tool path: ibsim + OpenSM + ibnetdiscover + iblinkinfo, then our validate; exit 1 if
    the stack is missing or validate missed a fault or raised a false alarm."""
    missing = missing_tools()
    if missing:
        print(f"PROBLEM: not installed: {', '.join(missing)} (scripts/deps/40-cabling.list; ./scripts/install-deps)")
        return 1
    manifest = plan_fat_tree(PlanSpec(hosts=hosts, speed="HDR"))  # ibsim 0.10 has no NDR
    sim = inject_faults(manifest, per_kind, seed=2026)
    built, down = BuiltFabric.from_simulated(manifest, sim)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "plan.yaml").write_text(dump_manifest(manifest), encoding="utf-8")
        ibsim = launch(built, d / "sim")
        t0 = time.perf_counter()
        with ibsim:
            t_start = time.perf_counter() - t0
            t0 = time.perf_counter()
            ibsim.sweep()
            t_sweep = time.perf_counter() - t0
            for ep in down:
                ibsim.unlink(built.node_id(ep), built.sim_port(ep))
            t_ibnet = _timed_tool(ibsim, ("ibnetdiscover",), repeat, d / "ibnetdiscover.txt")
            t_link = _timed_tool(ibsim, ("iblinkinfo",), repeat, d / "iblinkinfo.txt")
        args = ["validate", "-m", str(d / "plan.yaml"), "--ibnetdiscover", str(d / "ibnetdiscover.txt"),
                "--iblinkinfo", str(d / "iblinkinfo.txt"), "-f", "json", "-o", str(d / "report.json")]
        v_s, v_cpu, v_mib, v_rc = _process("cabling", args, cli_repeat, d)
        fab = parse_ibnetdiscover((d / "ibnetdiscover.txt").read_text(encoding="utf-8"), "ibnetdiscover.txt")
        fab.merge(parse_iblinkinfo((d / "iblinkinfo.txt").read_text(encoding="utf-8"), "iblinkinfo.txt"))
        report = validate(manifest, resolve(fab, manifest))
        sizes = {n: (d / f"{n}.txt").stat().st_size // 1024 for n in ("ibnetdiscover", "iblinkinfo")}
    problems = verify_report(manifest, sim, report, tell_down=False)
    if v_rc != 3:
        problems.append(f"validate exited {v_rc}, want 3 (findings)")
    nodes, _, _ = built.capacity()
    print(f"fabric: {hosts} hosts, {len(manifest.links)} cables, {nodes - 16} nodes in ibsim, "
          f"{len(sim.faults)} faults ({per_kind} of each of {len(FAULT_KINDS)} kinds)")
    print(f"ibsim start {t_start:.1f} s, one OpenSM sweep {t_sweep:.1f} s")
    print(f"ibnetdiscover {t_ibnet:.2f} s ({sizes['ibnetdiscover']} KiB), iblinkinfo {t_link:.2f} s "
          f"({sizes['iblinkinfo']} KiB), best of {repeat}")
    print(f"python -m cabling validate on both: {v_s:.2f} s wall, {v_cpu:.2f} s CPU, {v_mib:.0f} MiB, "
          f"best of {cli_repeat}; {len(report.findings)} findings")
    for p in problems:
        print(f"PROBLEM: {p}")
    total = t_ibnet + t_link + v_s
    print(f"RESULT path=real-tools hosts={hosts} links={len(manifest.links)} faults={len(sim.faults)} "
          f"findings={len(report.findings)} all_found={'yes' if not problems else 'no'} "
          f"ibsim_start_s={t_start:.2f} opensm_sweep_s={t_sweep:.2f} ibnetdiscover_s={t_ibnet:.3f} "
          f"iblinkinfo_s={t_link:.3f} validate_s={v_s:.3f} validate_cpu_s={v_cpu:.3f} validate_peak_mib={v_mib:.0f} "
          f"tools_plus_validate_s={total:.3f}")
    return 1 if problems else 0


def main() -> int:
    """Run the benchmark; exit 1 if validate missed a fault or raised a false alarm."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=511)
    ap.add_argument("--faults-per-kind", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli-repeat", type=int, default=5, help="end-to-end runs of each command (best taken)")
    ap.add_argument("--real-tools", action="store_true",
                    help="time ibsim + ibnetdiscover + iblinkinfo + validate instead (the real InfiniBand stack)")
    args = ap.parse_args()
    if args.real_tools:
        return real_tools(args.hosts, args.faults_per_kind, args.repeat, args.cli_repeat)

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
    e2e = _end_to_end(manifest, ibnet, down, args.cli_repeat)
    print(f"end to end, best of {args.cli_repeat} (python -m cabling): validate {e2e['cli_validate_s']:.2f} s "
          f"({e2e['cli_validate_cpu_s']:.2f} s CPU), {e2e['cli_peak_mib']:.0f} MiB; lint {e2e['cli_lint_s']:.2f} s "
          f"({e2e['cli_lint_cpu_s']:.2f} s CPU), {e2e['cli_lint_peak_mib']:.0f} MiB; 'provision cabling validate' "
          f"{e2e['cli_provision_validate_s']:.2f} s ({e2e['cli_provision_validate_cpu_s']:.2f} s CPU), "
          f"{e2e['cli_provision_peak_mib']:.0f} MiB")
    for p in problems:
        print(f"PROBLEM: {p}")
    print(
        f"RESULT links={n_links} faults={len(sim.faults)} findings={len(report.findings)} "
        f"clean_fabric_findings={len(clean_report.findings)} "
        f"all_found={'yes' if not problems else 'no'} false_alarms={0 if not problems else 'see-above'} "
        f"lint_s={t_lint:.3f} lint_cpu_s={c_lint:.3f} validate_s={t_validate:.3f} validate_cpu_s={c_validate:.3f} "
        f"manifest_load_s={t_load:.3f} manifest_load_cpu_s={c_load:.3f} json_manifest_load_cpu_s={c_json:.3f} "
        f"lint_links_per_s={n_links / c_lint:.0f} validate_links_per_s={n_links / c_validate:.0f} "
        + " ".join(f"{k}={v:.3f}" if k.endswith("_s") else f"{k}={v:.0f}" for k, v in e2e.items())
    )
    return 1 if problems or lint_report.findings or clean_report.findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
