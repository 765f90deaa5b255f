"""How `provision health` scales: 1, 64, 256 and 512 hosts over real SSH on loopback.

The fleet is provisioner.testing.sshfleet: real sshd daemons (16 loopback addresses each, one
address per host) whose sessions find recorded outputs of a real HGX H100 host behind a shim
PATH (nvidia-smi -q of driver 535.161.08 and lspci -vvv of the same board kind from gpud,
ibstat of an H100 node, the project's written topo -m / nvlink listings for 8x H100): each
host prints ~1 MB, as a real one does. Nothing leaves loopback; the fleet is stopped after
each size.

`provision health --site FLEET --any-state --json` runs as its own process (the client), with
the site's defaults: one SSH session per host (collect, wait the counter interval, collect,
textfile), parsing in a process pool. Measured per size: wall time, the ratio to one host,
the client's CPU per host (the client process and everything it started: ssh, parse workers),
the client's peak memory (its own peak RSS, and the peak PSS of its whole process tree, ssh
included), from /proc while it runs. The sshd side shares the machine's cores (on a laptop's
2 cores the fleet's own CPU is in the wall time too), so the wall times are upper bounds.

Usage (heavy: run it alone):  flock /work/coord/heavy.lock python benchmarks/health.py
         [--hosts 1,64,256,512] [--interval 5]
Ends with one ``RESULT`` line per size and one summary ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.testing.sshfleet import Recordings, SshFleet  # noqa: E402

CORPUS = REPO / "tests" / "fixtures" / "corpus"
FIX = REPO / "tests" / "fixtures" / "health"
PROFILE = {"gpus": 8, "gpu_model": "H100 80GB HBM3", "nvswitch": True, "ib_hcas": 8,
           "ib_rate_gbps": 400}


def nvlink_counters(path: Path) -> Path:
    """``nvidia-smi nvlink -e`` of 8 GPUs x 18 links, all counters 0 (the layout of
    tests/fixtures/health/nvlink-errors.0.txt)."""
    lines = []
    for g in range(8):
        lines.append(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000{g})")
        for link in range(18):
            lines += [f"\t Link {link}: {c}: 0" for c in ("Replay Errors", "Recovery Errors", "CRC Errors")]
    path.write_text("\n".join(lines) + "\n")
    return path


def recordings(work: Path) -> Recordings:
    return Recordings(
        nvsmi=CORPUS / "pcie-gpu/nvidia-smi-q-8xh100-and-others-gpud/nvidia-smi-query.535.161.08.out.0.valid",
        nvlink_status=FIX / "nvlink-status.h100x8.18-links.txt",
        nvlink_errors=nvlink_counters(work / "nvlink-errors.txt"),
        topo=FIX / "topo-m.535.h100x8-10nic.txt",
        lspci=CORPUS / "pcie-gpu/lspci-vvv-hgx-h100-gpud/lspci-vvv",
        ibstat=CORPUS / "ib/ibstat-a100-h100-gpud/ibstat.47.0.h100.all.active.0",
        kernel_log=CORPUS / "pcie-gpu/dmesg-nvrm-xid-gpud/dmesg.decode.iso.xid13.log",
        dcgm_metrics=FIX / "dcgm-exporter.metrics.txt",
        docker_info=FIX / "docker-info.zfs.json",
    )


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(k) for k in kids]
    return out


def _kib(path: str, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cpu_ticks(pid: int) -> tuple[str, int] | None:
    """(command name, user + system clock ticks) of a process, from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    return name, int(fields[11]) + int(fields[12])


class Sampler(threading.Thread):
    """Samples the client's own RSS high-water mark, its whole tree's PSS and each process's
    CPU (by command name: the client, its ssh sessions, its parse workers) every 0.1 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.hwm_kib = 0
        self.tree_pss_kib = 0
        self.max_procs = 0
        self.ticks: dict[int, tuple[str, int]] = {}  # pid -> (name, last CPU ticks seen)

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.hwm_kib = max(self.hwm_kib, _kib(f"/proc/{self.pid}/status", "VmHWM:"))
            procs = _tree(self.pid)
            self.max_procs = max(self.max_procs, len(procs))
            self.tree_pss_kib = max(self.tree_pss_kib,
                                    sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in procs))
            for p in procs:
                seen = _cpu_ticks(p)
                if seen is not None:
                    self.ticks[p] = seen

    def cpu_by_command(self) -> dict[str, float]:
        """CPU seconds per command name (a process's last 0.1 s before it exits is missed)."""
        hz = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for pid, (name, ticks) in self.ticks.items():
            key = "client" if pid == self.pid else "workers" if name.startswith("python") else name
            out[key] = out.get(key, 0.0) + ticks / hz
        return out


def measure(n: int, interval: float, work: Path) -> dict[str, float]:
    """Start a fleet of ``n`` hosts, run one health pass over it, stop it."""
    fleet_dir = work / f"fleet-{n}"
    with SshFleet(fleet_dir, n, recordings(work)) as fleet:
        site = fleet_dir / "site"
        site.mkdir(exist_ok=True)
        (site / "site.yml").write_text(fleet.site_yaml(profile=PROFILE, health={
            "counter_interval_s": interval, "textfile_dir": str(fleet_dir / "textfile"),
            "kernel_log_allow": ["."]}))
        env = {**os.environ, "PROVISIONER_STATE_DIR": str(fleet_dir / "state"),
               "PYTHONPATH": str(REPO), "COLUMNS": "80"}
        argv = [sys.executable, "-m", "provisioner.cli.main", "health", "--site", str(site),
                "--any-state", "--json"]
        # Only the client is reaped between these two readings (the fleet's daemons are still
        # running; the previous size's were reaped before): their difference is its CPU.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sampler = Sampler(proc.pid)
        sampler.start()
        out, err = proc.communicate()
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler.stop.set()
        sampler.join()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    docs = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    reached = sum(1 for d in docs for c in d["checks"]
                  if c["id"] == "host.reachable" and c["status"] == "pass")
    if len(docs) != n or reached != n:
        sys.exit(f"health over {n} hosts reported {len(docs)} hosts, {reached} reached "
                 f"(exit {proc.returncode}): {err.decode()[-2000:]}")
    split = sampler.cpu_by_command()
    print(f"  {n} hosts, client CPU by command (s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in sorted(split.items(), key=lambda kv: -kv[1])),
          flush=True)
    # The parse workers are children of multiprocessing's forkserver, which the client does not
    # wait for: their CPU is not in the client's rusage, only in what the sampler saw.
    cpu = max(cpu, sum(split.values()))
    return {"wall_s": wall, "cpu_s": cpu, "ssh_cpu_s": split.get("ssh", 0.0),
            "peak_rss_mib": sampler.hwm_kib / 1024, "peak_tree_pss_mib": sampler.tree_pss_kib / 1024,
            "procs": sampler.max_procs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="1,64,256,512")
    parser.add_argument("--interval", type=float, default=5.0, help="counter_interval_s")
    args = parser.parse_args()
    sizes = [int(x) for x in args.hosts.split(",")]
    cores = os.cpu_count() or 1
    print(f"machine: {cores} cores; counter interval {args.interval:g} s; "
          f"load average {os.getloadavg()[0]:.1f} at start")
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="health-bench-") as tmp:
        for n in sizes:
            r = measure(n, args.interval, Path(tmp))
            results[n] = r
            base = results[sizes[0]]["wall_s"]
            print(f"RESULT health_hosts={n} wall_s={r['wall_s']:.1f} ratio={r['wall_s'] / base:.2f} "
                  f"client_cpu_per_host_ms={1000 * r['cpu_s'] / n:.0f} "
                  f"peak_rss_mib={r['peak_rss_mib']:.0f} peak_tree_pss_mib={r['peak_tree_pss_mib']:.0f} "
                  f"processes={r['procs']:.0f}", flush=True)
    big, one = results[sizes[-1]], results[sizes[0]]
    # What the client alone would need at the largest size on this many cores: its CPU spread
    # over the cores, plus the one counter wait every host shares.
    per_core = big["cpu_s"] / cores + args.interval
    print(f"RESULT health_summary hosts={sizes[-1]} ratio={big['wall_s'] / one['wall_s']:.2f} "
          f"goal_ratio=2 peak_rss_mib={big['peak_rss_mib']:.0f} goal_mib=300 "
          f"client_cpu_s={big['cpu_s']:.1f} cores={cores} client_bound_wall_s={per_core:.1f}")


if __name__ == "__main__":
    main()
