"""`provision health` as a library call: site hosts in, judged reports out, state recorded."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from provisioner.exceptions import IllegalTransition, InventoryError
from provisioner.health.checks import CHECK_IDS
from provisioner.health.collector import collector_script, parse_sections
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.errors import HealthInputError
from provisioner.health.fleet import FleetOptions, run_fleet
from provisioner.health.manifest import (
    TopologyManifest,
    capture,
    dump_manifest,
    load_manifest,
    manifest_path,
    refuse_legacy_folder,
)
from provisioner.health.model import (
    CheckResult,
    HostReport,
    Remedy,
    RemedyKind,
    Severity,
    Status,
    Verdict,
    judge,
    worst_remedy,
)
from provisioner.health.runner import HostPlan, ib_pair_bandwidth, publish_textfiles
from provisioner.health.ssh_client import SshClient, SshTarget
from provisioner.inventory import Host, Site
from provisioner.state import NodeState, StateStore
from provisioner.state.store import HealthRun

# States in which a host runs an OS we can log into; the others are skipped (a host being
# installed would otherwise be marked failed for not answering SSH).
CHECKABLE = frozenset({NodeState.DEPLOYED, NodeState.CONFIGURED, NodeState.VALIDATED, NodeState.FAILED})
REASON_PREFIX = "health: "


def health_settings(site: Site, skip: list[str] | None = None) -> HealthSettings:
    """The site's ``settings.health`` block, validated; ``skip`` adds check ids to skip."""
    settings = HealthSettings.from_site_block(site.settings.health, file=str(site.path))
    if skip:
        settings = settings.model_copy(update={"skip_checks": [*settings.skip_checks, *skip]})
    unknown = sorted(set(settings.skip_checks) - set(CHECK_IDS) - {"ib.write_bw"})
    if unknown:
        raise InventoryError(
            f"unknown check id(s) to skip: {', '.join(unknown)}", file=str(site.path),
            key="settings.health.skip_checks",
            hint="check ids: " + ", ".join(CHECK_IDS),
        )
    return settings


def expectations(site: Site, host: Host, settings: HealthSettings) -> Expectations:
    """What ``host`` should contain, from its profile and the site's firmware manifest."""
    p = host.profile
    refuse_legacy_folder(site.path.parent)
    firmware = dict(site.settings.expected_firmware)
    firmware.update(p.vars.get("expected_firmware", {}))
    try:
        manifest = manifest_path(site.path.parent, p.name)
    except InventoryError:  # a profile name no file can carry has no manifest to check
        manifest = None
    return Expectations(
        gpus=p.gpus, gpu_model=p.gpu_model, nvswitch=p.nvswitch, ib_ports=p.ib_hcas,
        ib_rate_gbps=p.ib_rate_gbps, firmware=firmware, settings=settings,
        topology=_manifest(manifest) if manifest else None,
    )


_MANIFESTS: dict[Path, tuple[float, TopologyManifest]] = {}


def _manifest(path: Path) -> TopologyManifest | None:
    """The profile's topology manifest, read once per file version (hundreds of hosts share it)."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    cached = _MANIFESTS.get(path)
    if cached is None or cached[0] != mtime:
        cached = (mtime, load_manifest(path))
        _MANIFESTS[path] = cached
    return cached[1]


def ssh_target(site: Site, host: Host, settings: HealthSettings) -> SshTarget:
    """How to log into ``host``: ansible_host/ansible_port vars win over the address plan."""
    address = host.vars.get("ansible_host") or host.addresses.get("provisioning")
    if address is None:
        raise HealthInputError(
            f"host {host.name!r} has no provisioning address and no vars.ansible_host",
            hint=f"add a provisioning network to {site.path} or set vars.ansible_host",
        )
    key = site.settings.ssh_private_key
    known = settings.known_hosts
    return SshTarget(
        name=host.name, address=str(address),
        user=str(host.vars.get("ansible_user") or site.settings.ssh_user),
        port=int(host.vars.get("ansible_port") or settings.ssh_port),
        key=site.resolve_path(key) if key else None,
        known_hosts=site.resolve_path(known) if known else None,
    )


# A host that entered one of these states got (or is getting) a new OS: health runs from
# before vouch for nothing on the new install (driver, firmware settings, configuration).
_NEW_INSTALL = frozenset({NodeState.DEPLOYING, NodeState.ENROLLED})
_NOT_SCHEDULABLE = frozenset({NodeState.DEPLOYING, NodeState.FAILED, NodeState.MAINTENANCE})


def clean_streak(store: StateStore, host: str, limit: int) -> int:
    """Consecutive clean runs before this one since the host's last install (newest first,
    stopping at the first unclean)."""
    since = store.last_entered(host, _NEW_INSTALL)
    streak = 0
    for run in store.health_history(host, limit=limit):
        if since is not None and run.ts < since:
            break
        if all(r.get("status") in (Status.PASS, Status.NOT_APPLICABLE) for r in run.results):
            streak += 1
        else:
            break
    return streak


@dataclass
class HealthRunSummary:
    """The outcome of one ``provision health`` run over a site."""

    run_id: str
    reports: list[HostReport]
    skipped: dict[str, str] = field(default_factory=dict)  # host -> why
    textfile_problems: dict[str, str] = field(default_factory=dict)

    @property
    def needs_attention(self) -> list[HostReport]:
        """Reports with a failing check."""
        return [r for r in self.reports if r.verdict is Verdict.NEEDS_ATTENTION]


_GPU_STATE_CHECKS = ("gpu.count", "gpu.ecc", "gpu.row_remap")


def age_old_xids(report: HostReport, previous: HostReport | None) -> HostReport:
    """Xids stay in the kernel log until reboot: once they were reported and the GPUs check
    clean again (after the GPU reset the remedy asked for), they are old news, not a new fault.

    Only a gpu.xid failing for a GPU reset, whose every event line was already in the previous
    run's evidence, is downgraded to a warning (which keeps the host from turning golden until
    a reboot). Xids that ask for a reboot or a repair stay failures until that is done.
    """
    xid = next((r for r in report.results if r.id == "gpu.xid"), None)
    if (xid is None or xid.status is not Status.FAIL or previous is None
            or xid.remedy.kind is not RemedyKind.RESET_GPU):
        return report
    before = next((r for r in previous.results if r.id == "gpu.xid"), None)
    if before is None or not set(xid.evidence) <= set(before.evidence):
        return report
    if any(r.id in _GPU_STATE_CHECKS and r.status not in (Status.PASS, Status.NOT_APPLICABLE)
           for r in report.results):
        return report
    aged = xid.model_copy(update={
        "status": Status.WARN, "severity": Severity.WARNING, "remedy": Remedy(),
        "findings": [f.model_copy(update={"status": Status.WARN, "remedy": RemedyKind.NONE})
                     for f in xid.findings],
        "summary": f"{xid.summary}; already reported in run {previous.run_id} and the GPUs "
                   "check clean now (reboot to clear the log)",
        "observed": {**xid.observed, "already_reported_in": previous.run_id},
    })
    return report.model_copy(update={"results": [aged if r is xid else r for r in report.results]})


def _failure_reason(report: HostReport) -> str:
    bits = [f"{r.id} {r.status.value}: {r.summary}" for r in report.failed]
    text = REASON_PREFIX + "; ".join(bits)
    return text if len(text) <= 400 else text[:397] + "..."


def record(store: StateStore, report: HostReport) -> None:
    """Store the run, the health facts, and move the host to failed/validated as it deserves
    (one transaction: one fsync per host, not three, in the fleet's one writer thread)."""
    with store.batch():
        _record(store, report)


def _record(store: StateStore, report: HostReport) -> None:
    store.record_health(report.host, report.run_id, report.verdict.value,
                        [r.model_dump(mode="json") for r in report.results])
    store.record_facts(report.host, {"health": {
        "run_id": report.run_id, "verdict": report.verdict.value, "at": report.started_at,
        "remedy": report.remedy.model_dump(mode="json"), "clean_streak": report.clean_streak,
        "failed_checks": [r.id for r in report.failed],
    }})
    current = store.get(report.host).state
    data: dict[str, Any] = {"run_id": report.run_id, "remedy": report.remedy.kind.value,
                            "part": report.remedy.part}
    try:
        if report.verdict is Verdict.NEEDS_ATTENTION:
            store.transition(report.host, NodeState.FAILED, reason=_failure_reason(report),
                             error=f"remedy: {report.remedy.kind.value}"
                             + (f" ({report.remedy.part})" if report.remedy.part else ""),
                             data=data)
        elif current in (NodeState.CONFIGURED, NodeState.FAILED) and (
            current is NodeState.CONFIGURED or store.get(report.host).reason.startswith(REASON_PREFIX)
        ):
            # A host failed by an earlier health run is healthy again; one failed by a deploy
            # keeps its state until that is redone.
            store.transition(report.host, NodeState.VALIDATED,
                             reason=f"{REASON_PREFIX}{report.verdict.value}", data=data)
    except IllegalTransition as exc:
        store.record_event(report.host, "health", f"state left as {current.value}: {exc}", data)


def previous_streak(facts: dict[str, Any], since: datetime | None) -> int:
    """The clean streak the host's last run ended with, from its facts (no history read), or 0
    when that run predates its last install (or it never had one)."""
    last = facts.get("health") or {}
    streak, at = last.get("clean_streak"), last.get("at")
    if not isinstance(streak, int) or not isinstance(at, str):
        return 0
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return 0
    return streak if since is None or when >= since else 0


def _finisher(store: StateStore, golden_after: int, hosts: list[str]) -> Callable[[HostReport], HostReport]:
    """Judge a host's report against its history and record it (run in one writer thread)."""
    facts = {r.name: r.facts for r in store.all() if r.name in set(hosts)}
    since = {h: store.last_entered(h, _NEW_INSTALL) for h in hosts}

    def finish(rep: HostReport) -> HostReport:
        xid = next((r for r in rep.results if r.id == "gpu.xid"), None)
        if xid is not None and xid.status is Status.FAIL and xid.remedy.kind is RemedyKind.RESET_GPU:
            rep = age_old_xids(rep, latest_report(store, rep.host))  # read only when it matters
        rep = judge(rep, golden_after, previous_streak(facts.get(rep.host, {}), since.get(rep.host)))
        record(store, rep)
        return rep

    return finish


def run_site_health(
    site: Site,
    hosts: list[Host],
    store: StateStore,
    *,
    client: SshClient | None = None,
    deep: bool = False,
    any_state: bool = False,
    publish: bool = True,
    skip: list[str] | None = None,
    on_checked: Callable[[HostReport], None] | None = None,
) -> HealthRunSummary:
    """Check ``hosts`` (one SSH session each, all at once), judge each against its history,
    record it and write its node_exporter textfile as it finishes.

    ``on_checked`` gets each judged report as its host finishes (progress, streamed output);
    with ``deep`` the ib_write_bw pairs need every host first, so reports come at the end.
    """
    settings = health_settings(site, skip)
    store.ensure_hosts([h.name for h in hosts])
    states = {r.name: r.state for r in store.all()}
    skipped = {h.name: f"state {states[h.name].value}" for h in hosts
               if not any_state and states[h.name] not in CHECKABLE}
    chosen = [h for h in hosts if h.name not in skipped]
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    summary = HealthRunSummary(run_id=run_id, reports=[], skipped=skipped)
    if not chosen:
        return summary
    if client is None:
        client = SshClient(connect_timeout_s=settings.connect_timeout_s,
                           command_timeout_s=settings.command_timeout_s,
                           options=settings.ssh_options)
    plans = [HostPlan(ssh_target(site, h, settings), expectations(site, h, settings)) for h in chosen]
    finish = _finisher(store, site.settings.golden_after, [h.name for h in chosen])
    if not deep:
        options = FleetOptions(sessions=settings.parallel,
                               textfile_dir=settings.textfile_dir if publish else None)
        summary.reports, summary.textfile_problems = run_fleet(
            client, plans, run_id, finish, options=options, on_done=on_checked)
        return summary
    raw, _ = run_fleet(client, plans, run_id, lambda rep: rep,
                       options=FleetOptions(sessions=settings.parallel, deep=True))
    raw = ib_pair_bandwidth(client, plans, raw, parallel=settings.parallel)
    summary.reports = [finish(rep) for rep in raw]
    for rep in summary.reports:
        if on_checked is not None:
            on_checked(rep)
    if publish:
        summary.textfile_problems = publish_textfiles(
            client, plans, summary.reports, settings.textfile_dir, parallel=settings.parallel)
    return summary


def latest_report(store: StateStore, host: str) -> HostReport | None:
    """The host's last stored health run as a report (None before its first run)."""
    runs = store.health_history(host, limit=1)
    return _report(host, runs[0]) if runs else None


def _report(host: str, run: HealthRun) -> HostReport:
    results = [CheckResult.model_validate(r) for r in run.results]
    return HostReport(host=host, run_id=run.run_id, started_at=run.ts.isoformat(timespec="seconds"),
                      duration_s=0.0, results=results, verdict=Verdict(run.verdict),
                      remedy=worst_remedy(results))


def golden_hosts(store: StateStore, names: list[str]) -> list[tuple[str, HostReport]]:
    """Hosts whose latest run since their last install was judged golden, unless they are
    being re-imaged, failed or in maintenance since (each host's latest run in one query)."""
    out = []
    states = {r.name: r.state for r in store.all()}
    latest = store.latest_health(names)
    for name in names:
        run = latest.get(name)
        if run is None or states.get(name) in _NOT_SCHEDULABLE or run.verdict != Verdict.GOLDEN:
            continue
        since = store.last_entered(name, _NEW_INSTALL)
        if since is not None and run.ts < since:
            continue
        out.append((name, _report(name, run)))
    return out


def remedy_of(facts: dict[str, Any]) -> RemedyKind | None:
    """The remedy the host's last health run asked for (None if it never had one)."""
    kind = ((facts.get("health") or {}).get("remedy") or {}).get("kind")
    return RemedyKind(kind) if kind else None


def failed_hosts_for(store: StateStore, kind: RemedyKind) -> list[str]:
    """Failed hosts whose last health verdict asks for ``kind`` (e.g. the ones a re-image fixes;
    a host failed with a repair remedy needs a technician, not a new OS)."""
    return [r.name for r in store.all()
            if r.state is NodeState.FAILED and r.reason.startswith(REASON_PREFIX)
            and remedy_of(r.facts) is kind]


def _count_incidents(verdicts: list[str]) -> int:
    """Passing-to-failing turns in a sequence of verdicts, oldest first."""
    count, failing = 0, False
    for verdict in verdicts:
        bad = verdict == Verdict.NEEDS_ATTENTION
        if bad and not failing:
            count += 1
        failing = bad
    return count


def incidents_of(store: StateStore, names: list[str], *, days: float = 30.0,
                 now: datetime | None = None) -> dict[str, int]:
    """How many times each host went from passing to needing attention in the last ``days``
    (one incident spans consecutive failed runs): the few hosts that break again and again
    stand out. One query for every host, no run's results read."""
    now = now or datetime.now(UTC)
    runs = store.health_verdicts(names, since=now - timedelta(days=days))
    return {name: _count_incidents([v for _, v in runs.get(name, [])]) for name in names}


def incidents(store: StateStore, host: str, *, days: float = 30.0, now: datetime | None = None) -> int:
    """:func:`incidents_of` for one host."""
    return incidents_of(store, [host], days=days, now=now)[host]


def capture_topology(site: Site, host: Host, *, client: SshClient | None = None,
                     output: Path | None = None) -> tuple[Path, TopologyManifest]:
    """Collect ``host`` (one SSH session) and write its layout as its profile's manifest.

    A host without GPUs (by its profile, or as collected) has no layout worth holding every
    host to: that is said and nothing is written."""
    if host.profile.gpus == 0:
        raise HealthInputError(
            f"{host.name}'s profile {host.profile.name!r} has no GPUs: there is no GPU/NVLink/NIC "
            "layout to capture", hint="capture a GPU host, or set gpus: in the profile first")
    settings = health_settings(site)
    client = client or SshClient(connect_timeout_s=settings.connect_timeout_s,
                                 command_timeout_s=settings.command_timeout_s)
    expect = expectations(site, host, settings)
    res = client.run_script(ssh_target(site, host, settings), collector_script(expect))
    if res.unreachable:
        raise HealthInputError(f"cannot collect {host.name}: {res.stderr.strip()[-200:]}",
                               hint="check `provision health` on it first")
    manifest = capture(parse_sections(res.stdout), profile=host.profile.name, host=host.name)
    if not manifest.gpus:
        raise HealthInputError(
            f"{host.name} shows no GPU (nvidia-smi and topo -m list none): nothing was written",
            hint=f"check it with `provision health {host.name}`; capture a host whose GPUs answer")
    path = output or manifest_path(site.path.parent, host.profile.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yml.tmp")
    tmp.write_text(f"# captured from {host.name}; review and commit (provision health "
                   f"--capture-topology)\n" + dump_manifest(manifest), encoding="utf-8")
    tmp.replace(path)
    return path, manifest
