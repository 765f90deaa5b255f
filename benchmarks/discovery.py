"""How discovery scales: N emulated BMCs that each answer every request after a delay.

One sushy-emulator (fake driver) serves one system; a proxy (provisioner/testing/bmcproxy.py)
listens on N loopback addresses, each one a BMC, and answers each request after ``--delay``
seconds (BMC latency). Identical GETs are answered from the proxy's memory so the emulator's
CPU does not limit what is measured: the client's parallelism and round trips.

Prints the wall time of discovering 1 BMC and N BMCs, their ratio and requests per host, and
ends with one ``RESULT`` line. Usage: python benchmarks/discovery.py [--n 512] [--delay 0.2]

``--dgx``: the real DGX H100 recording (sushy-static) behind the same proxy, every GET answered
after ``--delay`` (default 1 s) and three resources after ``--outlier`` (default 10 s), as a
slow AMI BMC does; 1 host, then ``--n`` hosts (default 16). "before" reads as discovery did
before: one request at a time, member by member (the BMC answers no $expand); "after" with
``settings.redfish.connections`` (4) and $expand (the proxy inlines members, each costing
``--expand-cost`` x delay more). Ends with ``RESULT ... dgx_requests=... dgx_wall_s=...``.
Usage: python benchmarks/discovery.py --dgx [--n 16] [--delay 1] [--outlier 10] [--no-before]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from provisioner.workflow.nic_choice import NicPolicy

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.bmc.factory import open_redfish  # noqa: E402
from provisioner.inventory import NicRule  # noqa: E402
from provisioner.redfish.client import ClientOptions  # noqa: E402
from provisioner.secrets import Secret  # noqa: E402
from provisioner.testing.redfish_peers import (  # noqa: E402
    fake_system,
    fault_proxy,
    make_tls,
    sushy_emulator,
    sushy_static,
    write_emulator_config,
)
from provisioner.workflow.discover import DiscoveryTarget, discover_all  # noqa: E402

UUID = "0b0e5a0c-6f2b-4a39-9c1e-5a7d3c2b1a00"
DISKS = [{"Id": f"d{i}", "Name": f"disk {i}", "CapacityBytes": 3840755982336,
          "Protocol": "NVMe"} for i in range(1, 4)]


def address(i: int) -> str:
    """The loopback address of emulated BMC ``i`` (127.100.x.y: all route to lo on Linux)."""
    return f"127.100.{i // 250}.{i % 250 + 1}"


def run(urls: list[str], parallel: int, timeout_s: float, processes: int | None = None,
        ca: Path | None = None) -> tuple[float, list[int], int, tuple[float, float]]:
    """Discover every URL; return wall seconds, requests per host, failures."""
    options = ClientOptions(verify_tls=ca is not None, ca_bundle=ca, timeout_s=timeout_s,
                            retries=1)
    rule = NicRule(mac_prefix="52:54:00:18:00")
    targets = [
        DiscoveryTarget(url, partial(open_redfish, url, "admin", Secret("unused"), options,
                                     boot_port=NicPolicy(rule=rule).choose),
                        nic=NicPolicy(rule=rule))
        for url in urls
    ]
    start = time.perf_counter()
    cpu0 = client_cpu()
    results = discover_all(targets, max_parallel=parallel, processes=processes)
    wall = time.perf_counter() - start
    user, system = (b - a for a, b in zip(cpu0, client_cpu(), strict=True))
    print(f"  {len(urls)} BMCs: wall {wall:.2f} s, client CPU {user + system:.2f} s "
          f"({1000 * (user + system) / len(urls):.1f} ms per BMC, "
          f"{100 * system / max(user + system, 1e-9):.0f}% system)", file=sys.stderr)
    requests = [int(r.facts.extra["requests"]) for r in results if r.facts]
    failed = [r for r in results if not r.ok]
    for res in failed[:5]:
        print(f"  failed: {res.host}: {res.reason}: {res.error}", file=sys.stderr)
    return wall, requests, len(failed), (user, system)


def client_cpu() -> tuple[float, float]:
    """User and system CPU seconds of this process and its reaped children (discovery's
    forked workers; the proxy and emulator are still running, so not counted)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + kids.ru_utime, me.ru_stime + kids.ru_stime


DGX_TREE = REPO / "tests/fixtures/corpus/redfish/nvidia-dgx-h100-libredfish/mockup/redfish/v1"
# Resources a slow AMI BMC takes longest over (big collections): read once in either mode.
DGX_OUTLIERS = ("/redfish/v1/UpdateService/FirmwareInventory", "/redfish/v1/Chassis",
                "/redfish/v1/Systems/DGX/BootOptions")


def dgx_run(urls: list[str], options: ClientOptions) -> tuple[float, list[int], list[str]]:
    """Discover the DGX BMCs at ``urls`` at once; wall seconds, requests per host, failures."""
    rule = NicRule(rule="first-onboard-up")
    targets = [DiscoveryTarget(url, partial(open_redfish, url, "admin", Secret("unused"),
                                            options, boot_port=NicPolicy(rule=rule).choose),
                               deadline_s=600.0, nic=NicPolicy(rule=rule))
               for url in urls]
    start = time.perf_counter()
    results = discover_all(targets, max_parallel=len(urls), processes=1)
    wall = time.perf_counter() - start
    return (wall, [int(r.facts.extra["requests"]) for r in results if r.facts],
            [f"{r.host}: {r.reason}: {r.error}" for r in results if not r.ok])


def dgx_main(args: argparse.Namespace) -> int:
    """The DGX H100 scenario: before/after at 1 host and ``args.n`` hosts."""
    n = args.n if args.n != 512 else 16
    slow = [a for path in DGX_OUTLIERS for a in ("--slow", f"{path}={args.outlier}")]
    proxy_args = ["--delay", str(args.delay), "--cache-gets", *slow]
    modes = {"before": (ClientOptions(verify_tls=False, connections=1), proxy_args),
             "after": (ClientOptions(verify_tls=False),
                       [*proxy_args, "--expand", "--expand-cost", str(args.expand_cost)])}
    if args.no_before:
        del modes["before"]
    figures: dict[str, tuple[float, float, float]] = {}
    failures: list[str] = []
    print(f"DGX H100 recording, {args.delay:g} s per GET, {len(DGX_OUTLIERS)} resources "
          f"{args.outlier:g} s", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bench-dgx-") as tmp, \
            sushy_static(DGX_TREE, Path(tmp)) as upstream:
        for mode, (options, extra) in modes.items():
            with fault_proxy(upstream, Path(tmp), listen=[address(i) for i in range(n)],
                             args=extra) as urls:
                one, req, fail1 = dgx_run(urls[:1], options)
                print(f"  {mode}: 1 host {one:.1f} s, {req[0] if req else 0} requests",
                      file=sys.stderr)
                many, req_n, fail_n = dgx_run(urls, options)
                print(f"  {mode}: {n} hosts {many:.1f} s", file=sys.stderr)
            failures += fail1 + fail_n
            figures[mode] = (statistics.mean(req_n) if req_n else 0.0, one, many)
    for failure in failures[:5]:
        print(f"  failed: {failure}", file=sys.stderr)
    print(f"{'':24}{'requests/host':>14}{'1 host':>10}{f'{n} hosts':>11}")
    for mode, (req_mean, one, many) in figures.items():
        label = {"before": "one at a time, members", "after": "4 connections, $expand"}[mode]
        print(f"{label:24}{req_mean:>14.0f}{one:>9.1f}s{many:>10.1f}s")
    after = figures["after"]
    before = figures.get("before")
    line = (f"RESULT dgx_hosts={n} delay_ms={args.delay * 1000:.0f} outlier_s={args.outlier:g} "
            f"dgx_requests={after[0]:.0f} dgx_wall_s={after[1]:.1f} dgx_rack_wall_s={after[2]:.1f}")
    if before:
        line += (f" dgx_requests_before={before[0]:.0f} dgx_wall_s_before={before[1]:.1f}"
                 f" dgx_rack_wall_s_before={before[2]:.1f}")
    print(line + f" failed={len(failures)}")
    return 0 if not failures else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="number of BMCs (default 512)")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per BMC answer")
    parser.add_argument("--parallel", type=int, default=None,
                        help="discovery threads (default: N)")
    parser.add_argument("--tls", action="store_true",
                        help="BMCs answer HTTPS (verified against a throwaway CA)")
    parser.add_argument("--processes", type=int, default=None,
                        help="discovery processes (default: one per core, >= 64 BMCs each)")
    parser.add_argument("--dgx", action="store_true",
                        help="the DGX H100 recording on a slow BMC, before/after")
    parser.add_argument("--outlier", type=float, default=10.0,
                        help="--dgx: seconds for the slowest resources")
    parser.add_argument("--expand-cost", type=float, default=0.05,
                        help="--dgx: extra delay per expanded member, x delay")
    parser.add_argument("--no-before", action="store_true", help="--dgx: skip 'before'")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    if args.dgx:
        if "--delay" not in sys.argv:
            args.delay = 1.0
        return dgx_main(args)
    parallel = args.parallel or args.n

    with tempfile.TemporaryDirectory(prefix="bench-discovery-") as tmp:
        tmpdir = Path(tmp)
        conf = write_emulator_config(
            tmpdir / "emu", [fake_system(UUID, "bench", ["52:54:00:18:00:01",
                                                         "52:54:00:18:01:01"], "On")],
            drives={UUID: DISKS})
        addresses = [address(i) for i in range(args.n)]
        tls = make_tls(tmpdir / "tls", addresses[0], more_ips=addresses[1:]) if args.tls else None
        ca = tls.ca if tls else None
        with sushy_emulator(conf) as upstream, fault_proxy(
            upstream, tmpdir, listen=addresses, tls=tls,
            args=["--delay", str(args.delay), "--cache-gets"],
        ) as urls:
            run(urls[:1], 1, 30, ca=ca)  # warm the proxy's cache; not measured
            one, req_one, fail_one, _ = run(urls[:1], 1, 30, ca=ca)
            many, req_many, fail_many, (user, system) = run(urls, parallel, 60,
                                                             args.processes, ca=ca)
    ratio = many / one
    per_host = statistics.mean(req_many) if req_many else 0.0
    print(f"BMC answer delay        {args.delay * 1000:.0f} ms")
    print(f"discover 1 BMC          {one:.2f} s  ({req_one[0] if req_one else 0} requests)")
    print(f"discover {args.n} BMCs {' ' * max(0, 10 - len(str(args.n)))}{many:.2f} s  "
          f"({parallel} threads, {fail_many} failed)")
    print(f"ratio N/1               {ratio:.2f} (target <= 2)")
    print(f"requests per host       {per_host:.1f}")
    cpu_ms = 1000 * (user + system) / args.n
    print(f"client CPU per BMC      {cpu_ms:.1f} ms ({100 * system / max(user + system, 1e-9):.0f}% "
          "system)")
    print(f"RESULT n={args.n} delay_ms={args.delay * 1000:.0f} tls={int(args.tls)} t1_s={one:.2f} "
          f"tn_s={many:.2f} ratio={ratio:.2f} requests_per_host={per_host:.1f} "
          f"cpu_per_bmc_ms={cpu_ms:.1f} system_pct={100 * system / max(user + system, 1e-9):.0f} "
          f"failed={fail_many + fail_one}")
    return 0 if fail_many + fail_one == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
