"""How long `provision rack` takes: a simulated 512-host rack, and optionally the virtual lab.

Simulated rack: the real RackRunner (configure and SSH off) deploys N hosts whose BMCs are
emulated (sushy-emulator, fake driver, one System per host, behind a TLS proxy on
127.100.x.y). Discovery, the one-time PXE override, the power actions and the boot-from-disk
override are real Redfish requests; only the image transfer is simulated, over an uplink shared
fairly by the hosts streaming at once. Every figure is in simulated seconds on a virtual clock
(provisioner/testing/uplink_sim.py) that charges each real Redfish request ``--bmc-latency``
and each power-on ``--boot-s``, so the machine's load changes the wall time only.

Runs of the same rack, for each host count (``--hosts``, default 128 and 512) and POST time
(``--boot-s``, default 0 and 120 s): ``previous``, the previous default (8 streams, 80% of the
uplink; 64 hosts in flight; a busy answer is a 503 the host retries after 1 s plus jitter);
``new``, today's default (streams fill the uplink; a busy request is held in the server and gets
the next released stream at once; hosts in flight adapt, provisioner/workflow/inflight.py), both
through the embedded server's real StreamGate. ``--planned`` adds the old planner's wave (no
gate), ``--max-parallel K`` K deploys at once ungated (oversubscribed) and through an ideal queue
(gated), ``--reference`` the new default without failures. Each prints the makespan against
the bound ``image bytes x hosts / uplink``, the floor (the bound plus the fastest host's time
before its first and after its last image byte) and the floor with failures (the last retried
failure plus the fastest clean attempt), the host that ended last and why (attempt by attempt),
uplink use while streaming, nodes per hour, per-host image time and Redfish requests per host.
Failures: ``--fail-rate`` of attempts fail after their image (a new power cycle),
``--image-fail-rate`` of streams do not verify (the new default's ramdisk streams again).
``--lab`` also times `provision rack` on the lab's hosts.

    .venv/bin/python benchmarks/rack.py [--hosts 128 512] [--boot-s 0 120] [--reference] [--lab]

Ends with one line: ``RESULT key=value ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.rack_sim import (  # noqa: E402
    GIB,
    PASSWORD_ENV,
    Attempt,
    BMCTiming,
    Farm,
    Pacer,
    SimulatedBackend,
    bmc_farm,
    farm_opener,
    write_site,
)
from provisioner.deploy.base import image_streams  # noqa: E402
from provisioner.deploy.embedded.http import IMAGE_HOLD_S  # noqa: E402
from provisioner.deploy.embedded.peers import PeerPool  # noqa: E402
from provisioner.deploy.embedded.settings import STREAM_SHARE, EmbeddedSettings  # noqa: E402
from provisioner.inventory import Site, load_site  # noqa: E402
from provisioner.state import DONE_STATES, StateStore  # noqa: E402
from provisioner.testing.uplink_sim import SharedUplink, VirtualClock, spread_s  # noqa: E402
from provisioner.workflow.rack import RackOptions, RackRunner  # noqa: E402

DEFAULT_RETRY_S: int = EmbeddedSettings.model_fields["image_retry_after_s"].default
DEFAULT_IMAGE_ATTEMPTS: int = EmbeddedSettings.model_fields["image_attempts"].default
DEFAULT_PEER_LINGER_S: float = EmbeddedSettings.model_fields["peer_linger_s"].default
DEFAULT_PEER_SERVE_MAX_S: float = EmbeddedSettings.model_fields["peer_serve_max_s"].default


@dataclass
class RunFigures:
    """One run of the rack, in simulated seconds."""

    label: str
    parallel: int
    transfer_slots: int | None
    wave_reason: str
    makespan_s: float
    bound_s: float
    planner_estimate_s: float | None
    ok: int
    failed: int
    retried: int
    injected: int
    image_p50_s: float
    image_p95_s: float
    bmc_s_per_host: float
    host_p50_s: float
    queue_p50_s: float
    requests_per_host: float
    requests_by_phase: dict[str, float]
    peak_streams: int
    utilisation: float
    wall_s: float
    reasons: list[str]
    image_injected: int = 0  # streams that did not verify
    refusals: int = 0  # 503s answered by the real gate (retry_s runs)
    held_refusals: int = 0  # of which after a hold ran out (asked again at once)
    floor_s: float = 0.0  # bound + fastest host's time before its first / after its last byte
    peak_in_flight: int = 0
    hosts: int = 0
    boot_s: float = 0.0
    fail_rate: float = 0.0
    tail: Tail | None = None
    fail_floor_s: float = 0.0  # the floor given when the failures happened (see tail_of)
    peer_streams: int = 0  # streams served by peers (off the uplink)
    serve_p50_s: float = 0.0  # how long a host served peers (p50), its own deploy waiting

    @property
    def ratio(self) -> float:
        return self.makespan_s / self.bound_s

    @property
    def fail_floor_ratio(self) -> float:
        return self.makespan_s / self.fail_floor_s if self.fail_floor_s else 0.0

    @property
    def floor_ratio(self) -> float:
        return self.makespan_s / self.floor_s if self.floor_s else 0.0

    @property
    def nodes_per_hour(self) -> float:
        return self.ok / self.makespan_s * 3600 if self.makespan_s else 0.0


@dataclass
class Tail:
    """Which host ended last and why, in simulated seconds since the run began."""

    host: str
    end_s: float
    attempts: list[Attempt]
    cause: str  # retry (its attempt failed), queue (waited for a stream), start (began late)
    last_fail_s: float  # the latest retried failed attempt of any host (0: none)
    min_cycle_s: float  # the fastest successful attempt, power cycle to end, less its queue wait
    retry_queue_p50_s: float  # queue wait of retried attempts

    @property
    def fail_s(self) -> float:
        """When the tail host's first failed attempt ended (0: none failed)."""
        return next((a.end for a in self.attempts if a.failed), 0.0)

    @property
    def queue_s(self) -> float:
        return sum(a.admitted - a.at_gate for a in self.attempts if a.admitted)


def tail_of(pacer: Pacer, attempts: dict[str, list[Attempt]]) -> Tail | None:
    """The host that ended last, what held it up, and when the run's last failure came."""
    if not pacer.ended:
        return None
    host = max(pacer.ended, key=lambda h: pacer.ended[h])
    own = attempts.get(host, [])
    every = [a for tries in attempts.values() for a in tries]
    # failed attempts that were retried (a host's last failure ends it: no cycle follows)
    fails = [a.end for tries in attempts.values() for a in tries[:-1] if a.failed]
    clean = [a.end - a.start - (a.admitted - a.at_gate) for a in every
             if not a.failed and a.end and a.admitted]
    retried = [a.admitted - a.at_gate for a in every if a.attempt > 1 and a.admitted]
    queue = sum(a.admitted - a.at_gate for a in own if a.admitted)
    if any(a.failed for a in own):
        cause = "retry"
    elif own and clean and queue > max(1.0, 0.05 * min(clean)):  # it streamed late
        cause = "queue"
    else:
        cause = "start"
    return Tail(host, pacer.ended[host], own, cause, max(fails, default=0.0),
                min(clean, default=0.0), statistics.median(retried) if retried else 0.0)


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, nearest rank; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_rack(tmp: Path, args: argparse.Namespace, label: str, parallel: int | None,
             transfer_slots: int | None, retry_s: int | None = None,
             hold_s: float = 0.0, peers: bool = False) -> RunFigures:
    """Start a farm, write its site, and deploy every host once with the real RackRunner."""
    workdir = tmp / f"{label}-{args.hosts}-{args.boot_s:g}"
    started = time.monotonic()
    with bmc_farm(args.hosts, workdir / "farm", delay_s=args.proxy_delay) as farm:
        print(f"  {label}: {args.hosts} BMCs up in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
        site = load_site(write_site(
            workdir / "site", farm, uplink_gbps=args.uplink_gbps,
            host_link_gbps=args.host_link_gbps, image_bytes=int(args.image_gib * GIB),
            retries=args.retries))
        return deploy_rack(site, farm, workdir, args, label, parallel, transfer_slots, retry_s,
                           hold_s, peers)


def deploy_rack(site: Site, farm: Farm, workdir: Path, args: argparse.Namespace, label: str,
                parallel: int | None, transfer_slots: int | None,
                retry_s: int | None = None, hold_s: float = 0.0,
                peers: bool = False) -> RunFigures:
    """Deploy every host of the simulated site once with the real RackRunner."""
    image_bytes = int(args.image_gib * GIB)
    clock = VirtualClock(stall_s=args.stall_s)
    uplink = SharedUplink(clock, args.uplink_gbps, args.host_link_gbps)
    timing = BMCTiming(clock, args.bmc_latency)
    backend = SimulatedBackend(uplink, timing, image_bytes, fail_rate=args.fail_rate,
                               seed=args.seed, transfer_slots=transfer_slots, retry_s=retry_s,
                               boot_s=args.boot_s, hold_s=hold_s,
                               prefer_retries=hold_s > 0 and not args.no_prefer,
                               image_fail_rate=args.image_fail_rate,
                               # the previous ramdisk failed the attempt on the first bad stream
                               image_attempts=args.image_attempts if hold_s > 0 else 1,
                               # the site's peer_serving and installed_boot: kexec
                               peers=PeerPool(linger_s=args.peer_linger_s,
                                              serve_max_s=args.peer_serve_max_s)
                               if peers else None,
                               kexec_s=args.kexec_s if peers else None)
    store = StateStore(workdir / f"state-{label}.sqlite", site=site.name)
    pacer = Pacer(clock, label, len(site.hosts))
    runner = RackRunner(site, store, backend, open_bmc=farm_opener(farm, timing), reporter=pacer,
                        options=RackOptions(max_parallel=parallel, configure=False,
                                            wait_ssh=False), clock=lambda: clock.now)
    # the clock must know the pool the runner will use, to wait while workers pick up hosts;
    # with an adaptive window that is what the window allows now, re-evaluated every simulated
    # second as the real dispatcher does (its ages of hosts on their way grow with time)
    size = runner.wave_plan(len(site.hosts)).size

    def slots() -> int:
        return runner.window.target() if runner.window is not None else size

    def wanted() -> None:
        if runner.window is not None:
            runner.window.poke()

    def tick() -> None:
        if clock.unstarted > 0:
            clock.call_at_locked(clock.now + 1.0, tick)

    clock.pool(len(site.hosts), slots, wanted)
    with clock.lock:
        clock.call_at_locked(1.0, tick)

    def interrupted(signum: int, frame: object) -> None:
        # the runner's pool finishes every host before it returns: make them fail fast, so
        # that the farm's processes are stopped on the way out
        clock.abort(f"interrupted by signal {signum}")
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    start = time.monotonic()
    try:
        result = runner.run(site.hosts)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    wall = time.monotonic() - start
    store.close()
    if result.wave.bound_s is None:
        raise SystemExit("the site has no image size: the bound cannot be computed")
    first_images = [t[0] for t in backend.stats.transfers.values() if t]
    tail = tail_of(pacer, backend.stats.attempts)
    # with peers the uplink bound is no floor: the image spreads by doubling
    spread = spread_s(len(site.hosts), transfer_slots or 1,
                      image_bytes * 8 / (args.host_link_gbps * 1e9)) if peers else None
    rack_floor = floor(result.results, min(result.wave.bound_s, spread or result.wave.bound_s))
    requests = list(backend.stats.requests.values())
    n = max(1, len(requests))
    return RunFigures(
        label=label,
        parallel=result.wave.size,
        transfer_slots=transfer_slots,
        wave_reason=result.wave.reason,
        makespan_s=clock.now,
        bound_s=result.wave.bound_s,
        planner_estimate_s=result.wave.est_makespan_s,
        ok=len(result.ok),
        failed=len(result.failed),
        retried=sum(1 for r in result.results if r.attempts > 1),
        injected=backend.stats.injected_failures,
        image_p50_s=statistics.median(first_images) if first_images else 0.0,
        image_p95_s=pct(first_images, 0.95),
        bmc_s_per_host=sum(timing.seconds.values()) / n,
        host_p50_s=statistics.median(pacer.turnaround.values()) if pacer.turnaround else 0.0,
        queue_p50_s=statistics.median(backend.stats.queued.values()) if backend.stats.queued
        else 0.0,
        requests_per_host=sum(requests) / n,
        requests_by_phase={k: v / args.bmc_latency / n for k, v in timing.seconds.items()}
        if args.bmc_latency else {},
        peak_streams=uplink.stats.peak_active,
        utilisation=uplink.utilisation,
        wall_s=wall,
        reasons=sorted({r.reason for r in result.failed}),
        image_injected=backend.stats.injected_image_failures,
        refusals=backend.refusals,
        held_refusals=backend.held_refusals,
        floor_s=rack_floor,
        peak_in_flight=pacer.peak,
        hosts=args.hosts,
        boot_s=args.boot_s,
        fail_rate=args.fail_rate,
        tail=tail,
        # a failed attempt's host ends no sooner than the fastest clean attempt after it
        fail_floor_s=max(rack_floor, tail.last_fail_s + tail.min_cycle_s if tail and
                         tail.last_fail_s else 0.0),
        # streams peers served (off the uplink): the real gate counts them
        peer_streams=stats.peer_admitted if (stats := backend.stream_stats()) else 0,
        serve_p50_s=statistics.median(serving) if (serving := [
            r.phases["serve"] for r in result.results if "serve" in r.phases]) else 0.0,
    )


def floor(results: list[Any], bound_s: float) -> float:
    """The bound plus the fastest host's time before its first and after its last image byte:
    no stream starts before the first host asks, none can end after the last host reboots."""
    before = [r.phases.get("discover", 0.0) + r.phases.get("pxe", 0.0) for r in results
              if "image" in r.phases]
    after = [r.phases.get("reboot", 0.0) for r in results if "reboot" in r.phases]
    return bound_s + (min(before) if before else 0.0) + (min(after) if after else 0.0)


def print_run(f: RunFigures) -> None:
    """The figures of one run."""
    gate = f", {f.transfer_slots} streaming at once" if f.transfer_slots else ""
    print(f"\n[{f.label}] {f.hosts} hosts, {f.boot_s:g} s POST: {f.parallel} hosts deploying at "
          f"once{gate} ({f.wave_reason}); {f.peak_in_flight} in flight at peak")
    print(f"  makespan              {f.makespan_s:9.0f} s   ({f.wall_s:.0f} s of wall time)")
    print(f"  bound                 {f.bound_s:9.0f} s   image bytes x hosts / uplink")
    spread = " (with peers: the doubling spread, if below)" if f.peer_streams else ""
    print(f"  floor                 {f.floor_s:9.0f} s   bound{spread} + fastest host before its "
          "first and after its last byte")
    if f.planner_estimate_s is not None:
        print(f"  planner's estimate    {f.planner_estimate_s:9.0f} s   (image transfers only)")
    print(f"  floor with failures   {f.fail_floor_s:9.0f} s   the last failure + the fastest "
          "clean attempt (power cycle to end, no queue)")
    print(f"  makespan / bound      {f.ratio:9.2f}     (/ floor {f.floor_ratio:.2f}, / floor with "
          f"failures {f.fail_floor_ratio:.2f})")
    print(f"  nodes per hour        {f.nodes_per_hour:9.0f}")
    print(f"  image per host        {f.image_p50_s:9.1f} s   p50 (p95 {f.image_p95_s:.1f} s); "
          f"{f.peak_streams} streams at peak, uplink {f.utilisation:.0%} full while any streams")
    if f.peer_streams:
        print(f"  from peers            {f.peer_streams:9d}     streams off the uplink; a host "
              f"served peers {f.serve_p50_s:.1f} s (p50) before going on")
    if f.transfer_slots:
        hosts = max(1, f.ok + f.failed)
        polled = (f" ({f.refusals / hosts:.1f} busy answers per host, "
                  f"{f.held_refusals / hosts:.1f} after a hold)" if f.refusals else "")
        print(f"  waiting for a stream  {f.queue_p50_s:9.1f} s   p50{polled}")
    print(f"  BMC work per host     {f.bmc_s_per_host:9.1f} s   login/discover, PXE + cycle, "
          "off + disk + on")
    print(f"  one host, start->end  {f.host_p50_s:9.1f} s   p50")
    split = ", ".join(f"{k} {v:.1f}" for k, v in f.requests_by_phase.items())
    print(f"  Redfish requests      {f.requests_per_host:9.1f}     per host, all attempts "
          f"({split})")
    corrupt = f", {f.image_injected} streams that did not verify" if f.image_injected else ""
    print(f"  hosts                 {f.ok} ok, {f.failed} failed, {f.retried} retried "
          f"({f.injected} injected failures{corrupt})")
    for reason in f.reasons[:3]:
        print(f"    failed: {reason}")
    if f.tail is not None:
        print_tail(f.tail)


def print_tail(t: Tail) -> None:
    """The host that ended last, attempt by attempt."""
    why = {"retry": f"its attempt failed at {t.fail_s:.0f} s, the retry took "
                    f"{t.end_s - t.fail_s:.0f} s more",
           "queue": f"it waited {t.queue_s:.0f} s for a stream (the queue is first come, "
                    "first served)",
           "start": "it started late (hosts in flight)"}[t.cause]
    print(f"  last host             {t.host} ended at {t.end_s:.0f} s: {why}")
    for a in t.attempts:
        print(f"    attempt {a.attempt}: cycle at {a.start:.0f} s, asked for the image at "
              f"{a.at_gate:.0f} s, streamed {a.admitted:.0f}-{a.streamed:.0f} s, "
              f"{'failed' if a.failed else 'ended'} at {a.end:.0f} s")
    if t.last_fail_s:
        print(f"  last failure          {t.last_fail_s:9.0f} s   (a clean attempt takes "
              f"{t.min_cycle_s:.0f} s at best; retries waited {t.retry_queue_p50_s:.1f} s for a "
              "stream, p50)")


# -- the lab ----------------------------------------------------------------------------------

def provision_cmd() -> list[str]:
    """How to run the CLI of this checkout."""
    exe = Path(sys.executable).parent / "provision"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "provisioner.cli.main"]


def lab_deploy(names: list[str], timeout_s: float) -> tuple[float, dict[str, Any] | None, str]:
    """Deploy lab hosts (re-image those already deployed); wall seconds, JSON summary, error."""
    store = StateStore.for_site("lab")
    try:
        store.ensure_hosts(names)
        done = any(store.get(n).state in DONE_STATES for n in names)
    finally:
        store.close()
    verb = ["reimage", "--yes"] if done else ["rack"]
    argv = [*verb, "--site", "lab", "--json", "--skip-configure", *names]
    cmd = [*provision_cmd(), *argv]
    print(f"  $ provision {' '.join(argv)}", file=sys.stderr)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return time.monotonic() - start, None, f"timed out after {timeout_s:.0f} s"
    wall = time.monotonic() - start
    try:
        return wall, json.loads(proc.stdout), ""
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return wall, None, f"exit {proc.returncode}: {' / '.join(tail)}"


def run_lab(timeout_s: float) -> dict[str, float]:
    """Time `provision rack` on one lab host, then on all; empty when no lab is up."""
    status = subprocess.run([*provision_cmd(), "lab", "status"], cwd=REPO, capture_output=True,
                            text=True, check=False)
    if status.returncode != 0:
        print(f"\n[lab] skipped: `provision lab status` exited {status.returncode} (no lab is "
              "up); start one with `provision lab up`")
        return {}
    names = [h.name for h in load_site("lab").hosts]
    out: dict[str, float] = {}
    for label, chosen in (("lab_1", names[:1]), (f"lab_{len(names)}", names)):
        wall, summary, error = lab_deploy(chosen, timeout_s)
        print(f"\n[{label}] provision rack on {', '.join(chosen)}: wall {wall:.0f} s")
        if summary is None:
            print(f"  failed to run: {error}")
            continue
        out[f"{label}_s"] = wall
        for h in summary["hosts"]:
            phases = " ".join(f"{k}={v:.0f}s" for k, v in h["phases"].items())
            print(f"  {h['host']:<14} {h['status']:<7} attempts={h['attempts']} {phases}"
                  + (f"  ({h['reason']})" if h["status"] != "ok" else ""))
    return out


# -- main -------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[128, 512],
                   help="simulated hosts, one rack per value (default 128 512)")
    p.add_argument("--uplink-gbps", type=float, default=100.0)
    p.add_argument("--host-link-gbps", type=float, default=10.0)
    p.add_argument("--image-gib", type=float, default=4.0)
    p.add_argument("--bmc-latency", type=float, default=0.5,
                   help="simulated seconds a BMC takes to answer one request (default 0.5)")
    p.add_argument("--proxy-delay", type=float, default=0.0,
                   help="real seconds the proxy waits before each answer (default 0; it "
                   "costs wall time only, simulated time charges --bmc-latency)")
    p.add_argument("--boot-s", type=float, nargs="+", default=[0.0, 120.0],
                   help="simulated POST time after each power cycle, one run per value "
                   "(default 0 120)")
    p.add_argument("--fail-rate", type=float, default=0.02,
                   help="fraction of deploy attempts that fail after the transfer, needing a "
                   "new power cycle (e.g. a disk write error; default 0.02)")
    p.add_argument("--retries", type=int, default=1, help="settings.deploy_retries")
    p.add_argument("--image-fail-rate", type=float, default=0.0,
                   help="fraction of image streams that do not verify (the ramdisk streams "
                   "again, up to --image-attempts; default 0)")
    p.add_argument("--image-attempts", type=int, default=DEFAULT_IMAGE_ATTEMPTS,
                   help="streams a ramdisk tries in the new run (settings.embedded."
                   f"image_attempts, default {DEFAULT_IMAGE_ATTEMPTS}; the previous run: 1)")
    p.add_argument("--planned", action="store_true",
                   help="also run the old planner's wave (no stream gate)")
    p.add_argument("--max-parallel", type=int, default=0,
                   help="also run K deploys at once ungated and through an ideal queue")
    p.add_argument("--no-gated", action="store_true", help="skip the ideal-queue run")
    p.add_argument("--retry-s", type=int, default=DEFAULT_RETRY_S,
                   help="seconds a refused host waits before asking again (plain 503s; "
                   f"default {DEFAULT_RETRY_S}, settings.embedded.image_retry_after_s)")
    p.add_argument("--hold-s", type=float, default=IMAGE_HOLD_S,
                   help=f"longest hold of a queued image request in the new run "
                   f"(default {IMAGE_HOLD_S:g}, the server's)")
    p.add_argument("--no-prefer", action="store_true",
                   help="the new run's retries queue behind first attempts (no StreamGate.prefer)")
    p.add_argument("--reference", action="store_true",
                   help="also run the new default without failures (what the retries cost)")
    p.add_argument("--no-previous", action="store_true", help="skip the previous default's run")
    p.add_argument("--no-new", action="store_true", help="skip the new default's run")
    p.add_argument("--no-peers", action="store_true",
                   help="skip the run with peer serving and kexec (settings.embedded."
                   "peer_serving, installed_boot: kexec)")
    p.add_argument("--kexec-s", type=float, default=5.0,
                   help="simulated seconds from 'finished' to the installed kernel running, "
                   "by kexec (loading it and the jump; the OS's own boot is not charged in "
                   "any run; default 5)")
    p.add_argument("--peer-linger-s", type=float, default=DEFAULT_PEER_LINGER_S,
                   help="settings.embedded.peer_linger_s of the peers run")
    p.add_argument("--peer-serve-max-s", type=float, default=DEFAULT_PEER_SERVE_MAX_S,
                   help="settings.embedded.peer_serve_max_s of the peers run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stall-s", type=float, default=600.0,
                   help="real seconds without any simulated event before a run is declared stuck")
    p.add_argument("--lab", action="store_true", help="also time `provision rack` on the lab")
    p.add_argument("--lab-timeout", type=float, default=1800.0)
    args = p.parse_args(argv)
    if not all(1 <= h <= 10000 for h in args.hosts):  # the site's /16 holds 500 racks of 20
        p.error("--hosts must be between 1 and 10000")
    if not (0 <= args.fail_rate < 1 and 0 <= args.image_fail_rate < 1):
        p.error("--fail-rate and --image-fail-rate must be in [0, 1)")
    return args


PREVIOUS_IN_FLIGHT = 64  # the previous default's cap of hosts in flight


def scenario(tmp: Path, args: argparse.Namespace) -> list[RunFigures]:
    """Every asked-for run of one rack (args.hosts and args.boot_s are single values here)."""
    runs: list[RunFigures] = []

    def run(*a: Any, **kw: Any) -> None:
        runs.append(run_rack(tmp, args, *a, **kw))
        print_run(runs[-1])

    old_streams = image_streams(args.uplink_gbps, args.host_link_gbps)  # 80% of the uplink
    if args.planned:
        run("planned", None, None)
    if not args.no_previous:
        run("previous", min(args.hosts, max(old_streams, PREVIOUS_IN_FLIGHT)), old_streams,
            args.retry_s, hold_s=0.0)
    if not args.no_new:
        # the runner plans hosts in flight itself from the backend's stream count
        run("new", None, image_streams(args.uplink_gbps, args.host_link_gbps, STREAM_SHARE),
            args.retry_s, hold_s=args.hold_s)
    if not args.no_peers:
        # the new default where the site allows peer serving and kexec into the installed OS
        run("peers", None, image_streams(args.uplink_gbps, args.host_link_gbps, STREAM_SHARE),
            args.retry_s, hold_s=args.hold_s, peers=True)
    if args.reference and (args.fail_rate or args.image_fail_rate):
        # the same rack without failures: what the failures' retries cost
        clean = argparse.Namespace(**{**vars(args), "fail_rate": 0.0, "image_fail_rate": 0.0})
        for label, peers, skip in (("new_nofail", False, args.no_new),
                                   ("peers_nofail", True, args.no_peers)):
            if not skip:
                runs.append(run_rack(tmp, clean, label, None, image_streams(
                    args.uplink_gbps, args.host_link_gbps, STREAM_SHARE), args.retry_s,
                    hold_s=args.hold_s, peers=peers))
                print_run(runs[-1])
    if args.max_parallel:
        run("oversubscribed", args.max_parallel, None)
        if not args.no_gated:
            run("gated", args.max_parallel, old_streams)
    return runs


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # SIGTERM unwinds like Ctrl-C from the start, not only while a rack deploys: a benchmark
    # stopped while its farm starts or its site is written still stops the farm's processes
    signal.signal(signal.SIGTERM, _terminated)
    args = parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * max(args.hosts) + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    os.environ.setdefault(PASSWORD_ENV, secrets.token_urlsafe(12))
    print(f"{', '.join(map(str, args.hosts))} hosts, {args.image_gib:g} GiB image, "
          f"{args.uplink_gbps:g} Gb/s uplink, {args.host_link_gbps:g} Gb/s per host; a BMC "
          f"answers in {args.bmc_latency:g} s, a host POSTs in "
          f"{' or '.join(f'{b:g}' for b in args.boot_s)} s; {args.fail_rate:.0%} of attempts "
          f"fail after their image"
          + (f", {args.image_fail_rate:.0%} of streams do not verify" if args.image_fail_rate
             else "")
          + f"; {args.retries} retry. Times in simulated seconds.")
    started = time.monotonic()
    runs: list[RunFigures] = []
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None  # the emulator's sqlite
    tmp = Path(tempfile.mkdtemp(prefix="bench-rack-", dir=base))
    try:
        for hosts in args.hosts:
            for boot_s in args.boot_s:
                one = argparse.Namespace(**{**vars(args), "hosts": hosts, "boot_s": boot_s})
                runs += scenario(tmp, one)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lab = run_lab(args.lab_timeout) if args.lab else {}
    total = time.monotonic() - started
    print(f"\nwhole benchmark: {total:.0f} s wall, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print_table(runs)
    # headline: the largest rack, without and with the longest POST, new and previous default
    fields: dict[str, Any] = {"hosts": max(args.hosts), "post_s": f"{min(args.boot_s):g}",
                              "post_max_s": f"{max(args.boot_s):g}"}
    for key, boot in (("", min(args.boot_s)), ("post_", max(args.boot_s))):
        for label, name in (("new", "ratio"), ("previous", "previous_ratio"),
                            ("peers", "peers_ratio"), ("peers_nofail", "peers_nofail_ratio")):
            f = next((r for r in runs if (r.label, r.hosts, r.boot_s)
                      == (label, max(args.hosts), boot)), None)
            if f is not None:
                fields[key + name] = f"{f.ratio:.2f}"
                if label in ("new", "peers"):
                    pre = "" if label == "new" else "peers_"
                    fields[key + pre + "floor_ratio"] = f"{f.floor_ratio:.2f}"
                    fields[key + pre + "fail_floor_ratio"] = f"{f.fail_floor_ratio:.2f}"
    for f in runs:
        tag = f"h{f.hosts}_p{f.boot_s:g}_{f.label}"
        fields[f"{tag}_makespan_s"] = f"{f.makespan_s:.0f}"
        fields[f"{tag}_bound_s"] = f"{f.bound_s:.0f}"
        fields[f"{tag}_ratio"] = f"{f.ratio:.2f}"
        fields[f"{tag}_floor_s"] = f"{f.floor_s:.0f}"
        fields[f"{tag}_floor_ratio"] = f"{f.floor_ratio:.2f}"
        fields[f"{tag}_fail_floor_s"] = f"{f.fail_floor_s:.0f}"
        fields[f"{tag}_fail_floor_ratio"] = f"{f.fail_floor_ratio:.2f}"
        if f.tail is not None:
            fields[f"{tag}_tail_host"] = f.tail.host
            fields[f"{tag}_tail_cause"] = f.tail.cause
            fields[f"{tag}_tail_after_fail_s"] = (f"{f.tail.end_s - f.tail.fail_s:.0f}"
                                                  if f.tail.fail_s else "0")
            fields[f"{tag}_last_fail_s"] = f"{f.tail.last_fail_s:.0f}"
            fields[f"{tag}_retry_queue_p50_s"] = f"{f.tail.retry_queue_p50_s:.1f}"
        fields[f"{tag}_util"] = f"{f.utilisation:.2f}"
        fields[f"{tag}_nodes_per_hour"] = f"{f.nodes_per_hour:.0f}"
        fields[f"{tag}_parallel"] = f.parallel
        fields[f"{tag}_peak_in_flight"] = f.peak_in_flight
        fields[f"{tag}_streams"] = f.transfer_slots or 0
        fields[f"{tag}_image_p50_s"] = f"{f.image_p50_s:.2f}"
        fields[f"{tag}_requests_per_host"] = f"{f.requests_per_host:.1f}"
        fields[f"{tag}_failed"] = f.failed
        fields[f"{tag}_retried"] = f.retried
        fields[f"{tag}_injected"] = f.injected
        if f.image_injected:
            fields[f"{tag}_image_injected"] = f.image_injected
        if f.peer_streams:
            fields[f"{tag}_peer_streams"] = f.peer_streams
            fields[f"{tag}_serve_p50_s"] = f"{f.serve_p50_s:.1f}"
    fields.update({k: f"{v:.0f}" for k, v in lab.items()})
    fields["wall_s"] = f"{total:.0f}"
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()))
    return 0 if all(f.ok + f.failed == f.hosts for f in runs) else 1


def print_table(runs: list[RunFigures]) -> None:
    """One line per run: the comparison at a glance (80 columns). /fail: the makespan over the
    floor with failures (the last failure + the fastest clean attempt)."""
    print(f"\n{'hosts':>5} {'POST':>5} {'run':<14} {'makespan':>8} {'/bound':>6} {'/floor':>6} "
          f"{'/fail':>5} {'uplink':>6} {'nodes/h':>7} {'peak':>5}")
    for f in runs:
        print(f"{f.hosts:>5} {f.boot_s:>4g}s {f.label:<14} {f.makespan_s:>7.0f}s {f.ratio:>6.2f} "
              f"{f.floor_ratio:>6.2f} {f.fail_floor_ratio:>5.2f} {f.utilisation:>6.0%} "
              f"{f.nodes_per_hour:>7.0f} {f.peak_in_flight:>5}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted: the hosts in flight failed, the BMC farm is stopped", file=sys.stderr)
        sys.exit(130)
