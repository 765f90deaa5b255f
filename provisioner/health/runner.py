"""Collect and check many hosts in parallel over SSH (one session per host), then publish."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from provisioner.health.checks.base import not_applicable, result
from provisioner.health.config import Expectations
from provisioner.health.deep_measure import (
    COUNTERS_SCRIPT,
    client_command,
    counter_rise,
    pair_up,
    parse_ib_write_bw,
    server_command,
)
from provisioner.health.model import CheckResult, HostReport, RemedyKind, Status
from provisioner.health.ssh_client import SshClient, SshTarget
from provisioner.health.textfile import install_command, render_textfile


@dataclass(frozen=True)
class HostPlan:
    """One host to check: how to reach it and what it should contain."""

    target: SshTarget
    expect: Expectations


def unreachable_result(plan: HostPlan, stderr: str, timed_out: bool) -> CheckResult:
    """host.reachable for a host ssh could not run the collector on (why, from its stderr)."""
    why = "timed out" if timed_out else (stderr.strip().splitlines() or ["ssh failed"])[-1]
    evidence = stderr.strip().splitlines()[-5:]
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "Host key verification failed" in stderr:
        # Usually a re-imaged host with a new host key: a person must accept it, since a
        # changed key is also what a hijacked address looks like.
        known = plan.target.known_hosts or "~/.ssh/known_hosts"
        return result(
            "host.reachable", Status.ERROR, f"the SSH host key of {plan.target.address} changed",
            detail=f"if {plan.target.name} was re-imaged: ssh-keygen -f {known} -R "
            f"'[{plan.target.address}]:{plan.target.port}' (or -R {plan.target.address} on port 22)",
            evidence=evidence,
        )
    return result(
        "host.reachable", Status.FAIL,
        f"cannot run checks over SSH on {plan.target.address}:{plan.target.port}: {why}",
        remedy=RemedyKind.REBOOT,
        detail="power-cycle through the BMC; check the key and ssh_user if it boots",
        evidence=evidence,
    )


def publish_textfiles(
    client: SshClient, plans: list[HostPlan], reports: list[HostReport], directory: str,
    *, parallel: int = 32,
) -> dict[str, str]:
    """Write each reachable host's metrics to its node_exporter textfile directory.

    Returns {host: problem} for hosts where the write failed (reported, never fatal).
    """
    by_name = {r.host: r for r in reports}
    now = time.time()

    def one(plan: HostPlan) -> tuple[str, str | None]:
        rep = by_name[plan.target.name]
        if any(r.id == "host.reachable" and r.status is not Status.PASS for r in rep.results):
            return plan.target.name, "unreachable"
        res = client.run(plan.target, install_command(directory), stdin=render_textfile(rep, now))
        if res.rc != 0:
            return plan.target.name, (res.stderr.strip() or f"exit {res.rc}")
        return plan.target.name, None

    problems: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(plans) or 1))) as pool:
        for name, problem in pool.map(one, plans):
            if problem:
                problems[name] = problem
    return problems


def _fabric_devices(report: HostReport) -> list[str]:
    for r in report.results:
        if r.id == "ib.ports" and r.status is Status.PASS:
            return [str(name).split("/")[0] for name in r.observed.get("good", [])]
    return []


def _bandwidth_pair(
    client: SshClient, a: HostPlan, b: HostPlan, devices: list[tuple[str, str]], port: int,
) -> tuple[CheckResult, CheckResult]:
    """ib_write_bw from ``a`` to ``b`` on each rail, with error counters read before and after."""
    s = a.expect.settings
    rate = a.expect.ib_rate_gbps or 0
    before = {p.target.name: client.run(p.target, COUNTERS_SCRIPT).stdout for p in (a, b)}
    measured: dict[str, float] = {}
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        for dev_a, dev_b in devices:
            server = pool.submit(client.run, b.target, server_command(dev_b, port, s.ib_bw_duration_s))
            res = client.run(a.target, client_command(dev_a, port, s.ib_bw_duration_s, b.target.address))
            server.result()
            bw = parse_ib_write_bw(res.stdout)
            rail = f"{a.target.name}:{dev_a} -> {b.target.name}:{dev_b}"
            if bw is None:
                problems.append(f"{rail}: no result (exit {res.rc}) {res.stderr.strip()[-200:]}")
                continue
            measured[rail] = bw[1]
            if rate and bw[1] < s.ib_bw_min_fraction * rate:
                problems.append(f"{rail}: {bw[1]:.1f} Gb/s < {s.ib_bw_min_fraction:.0%} of {rate} Gb/s")
    rise = {p.target.name: counter_rise(before[p.target.name], client.run(p.target, COUNTERS_SCRIPT).stdout)
            for p in (a, b)}
    threshold = {"min_gbps": s.ib_bw_min_fraction * rate, "counter_rise": 0}

    def judged(me: HostPlan, peer: HostPlan) -> CheckResult:
        mine, theirs = rise[me.target.name], rise[peer.target.name]
        observed = {"peer": peer.target.name, "avg_gbps": measured, "counters_rise": mine}
        evidence = problems + [f"{me.target.name} {port_}: {c}" for port_, c in mine.items()]
        if not problems and not mine:
            return result("ib.write_bw", Status.PASS, f"{len(measured)} rail(s) with "
                          f"{peer.target.name} at rate, counters steady", observed=observed,
                          threshold=threshold)
        if mine or not theirs:
            # Errors counted on this side (or on neither): this end's cable/HCA is the suspect.
            part = "; ".join(f"HCA {p} cable/transceiver" for p in sorted(mine)) or (
                f"InfiniBand rail(s) between {me.target.name} and {peer.target.name} "
                "(either end; re-test against another peer)")
            return result("ib.write_bw", Status.FAIL, f"ib_write_bw with {peer.target.name}: "
                          f"{len(problems)} slow/failed rail(s), {len(mine)} port(s) with rising errors",
                          observed=observed, threshold=threshold, remedy=RemedyKind.REPAIR,
                          part=part, evidence=evidence)
        return result("ib.write_bw", Status.WARN, f"rails to {peer.target.name} slow; the errors "
                      "are counted on the peer's side", observed=observed, threshold=threshold,
                      evidence=evidence)

    return judged(a, b), judged(b, a)


def ib_pair_bandwidth(
    client: SshClient, plans: list[HostPlan], reports: list[HostReport], *, parallel: int = 32,
) -> list[HostReport]:
    """--deep: ib_write_bw between host pairs on every fabric rail; adds ``ib.write_bw`` results."""
    by_name = {r.host: r for r in reports}
    plan_of = {p.target.name: p for p in plans}
    ready = [p.target.name for p in plans if p.expect.ib_ports > 0 and _fabric_devices(by_name[p.target.name])]
    extra: dict[str, list[CheckResult]] = {n: [] for n in by_name}
    skipped = {p.target.name for p in plans if "ib.write_bw" in p.expect.settings.skip_checks}
    ready = [n for n in ready if n not in skipped]
    for p in plans:
        if p.target.name in skipped:
            continue
        if p.expect.ib_ports == 0:
            extra[p.target.name].append(not_applicable("ib.write_bw", "host profile has no InfiniBand HCAs"))
        elif p.target.name not in ready:
            extra[p.target.name].append(not_applicable(
                "ib.write_bw", "skipped: its fabric ports did not pass ib.ports"))
    if len(ready) == 1:
        extra[ready[0]].append(not_applicable("ib.write_bw", "no other healthy host to pair with"))
    pairs = pair_up(ready)
    base = plans[0].expect.settings.ib_bw_port if plans else 18515

    def one(i_pair: tuple[int, tuple[str, str]]) -> tuple[str, str, CheckResult, CheckResult]:
        i, (a, b) = i_pair
        rails = list(zip(_fabric_devices(by_name[a]), _fabric_devices(by_name[b]), strict=False))
        ra, rb = _bandwidth_pair(client, plan_of[a], plan_of[b], rails, base + i)
        return a, b, ra, rb

    # A host in two pairs (the odd one out) must not run two tests at once: odd pairs go last.
    first, last = pairs[: len(ready) // 2], pairs[len(ready) // 2 :]
    for batch, offset in ((first, 0), (last, len(first))):
        if not batch:
            continue
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(batch)))) as pool:
            for a, b, ra, rb in pool.map(one, enumerate(batch, start=offset)):
                extra[a].append(ra)
                if not any(r.id == "ib.write_bw" for r in extra[b]):
                    extra[b].append(rb)
    return [r.model_copy(update={"results": [*r.results, *extra[r.host]]}) for r in reports]
