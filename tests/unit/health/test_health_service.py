"""Recording health runs in the state store: failed with reasons, validated when healthy again,
golden streaks from history, maintenance left alone; SSH targets from the inventory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from provisioner.health.checks.base import result
from provisioner.health.config import HealthSettings
from provisioner.health.errors import HealthInputError
from provisioner.health.model import HostReport, RemedyKind, Status, Verdict, judge
from provisioner.health.service import (
    clean_streak,
    expectations,
    failed_hosts_for,
    golden_hosts,
    incidents,
    latest_report,
    record,
    remedy_of,
    ssh_target,
)
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore

REPO = Path(__file__).resolve().parents[3]


def rep(host: str, *statuses: Status, streak: int = 0) -> HostReport:
    results = [result(f"c{i}", s, f"check {i} {s.value}",
                      remedy=RemedyKind.RESET_GPU if s is Status.FAIL else RemedyKind.NONE,
                      part="GPU at PCI 0000:18:00.0 serial 7" if s is Status.FAIL else None)
               for i, s in enumerate(statuses)]
    r = HostReport(host=host, run_id=f"run-{streak}", started_at="2026-11-22T11:00:00+00:00",
                   duration_s=1.0, results=results)
    return judge(r, 2, streak)


@pytest.fixture()
def store(tmp_path: Path) -> StateStore:
    s = StateStore(tmp_path / "site.sqlite", site="t")
    s.ensure_hosts(["a", "b", "m"])
    for h in ("a", "b", "m"):
        s.transition(h, NodeState.DISCOVERED)
        s.transition(h, NodeState.DEPLOYING)
        s.transition(h, NodeState.DEPLOYED)
        s.transition(h, NodeState.CONFIGURED)
    return s


def test_failing_then_healthy_again(store: StateStore) -> None:
    record(store, rep("a", Status.PASS, Status.FAIL))
    rec = store.get("a")
    assert rec.state is NodeState.FAILED and rec.reason == "health: c1 fail: check 1 fail"
    assert rec.last_error == "remedy: reset_gpu (GPU at PCI 0000:18:00.0 serial 7)"
    assert rec.facts["health"]["failed_checks"] == ["c1"]
    assert clean_streak(store, "a", 10) == 0
    record(store, rep("a", Status.PASS, Status.NOT_APPLICABLE, streak=0))
    assert store.get("a").state is NodeState.VALIDATED
    assert clean_streak(store, "a", 10) == 1
    record(store, rep("a", Status.PASS, streak=1))
    assert latest_report(store, "a").verdict is Verdict.GOLDEN
    assert [n for n, _ in golden_hosts(store, ["a", "b"])] == ["a"]
    assert latest_report(store, "b") is None


def test_failed_hosts_by_remedy(store: StateStore) -> None:
    record(store, rep("a", Status.FAIL))
    store.transition("b", NodeState.FAILED, reason="deploy: timeout")
    assert failed_hosts_for(store, RemedyKind.RESET_GPU) == ["a"]
    assert failed_hosts_for(store, RemedyKind.REIMAGE) == []
    assert remedy_of(store.get("b").facts) is None


def test_repeat_offenders_count_incidents_not_runs(store: StateStore) -> None:
    for statuses in ([Status.FAIL], [Status.FAIL], [Status.PASS], [Status.FAIL], [Status.PASS],
                     [Status.FAIL]):
        record(store, rep("a", *statuses))
    assert incidents(store, "a") == 3
    assert incidents(store, "b") == 0
    later = datetime.now(UTC) + timedelta(days=31)
    assert incidents(store, "a", now=later) == 0


def test_deploy_failure_is_not_cleared_by_a_health_run(store: StateStore) -> None:
    store.transition("b", NodeState.FAILED, reason="deploy: image checksum mismatch")
    record(store, rep("b", Status.PASS))
    assert store.get("b").state is NodeState.FAILED
    assert store.get("b").reason == "deploy: image checksum mismatch"


def test_maintenance_host_keeps_its_state(store: StateStore) -> None:
    store.transition("m", NodeState.MAINTENANCE, reason="PSU swap")
    record(store, rep("m", Status.FAIL))
    assert store.get("m").state is NodeState.MAINTENANCE
    assert "state left as maintenance" in store.events("m")[-1].message


def test_targets_and_expectations_from_a_site() -> None:
    site = load_site(REPO / "tests" / "fixtures" / "health" / "site-48")
    host = site.hosts[0]
    settings = HealthSettings(ssh_port=2200)
    t = ssh_target(site, host, settings)
    assert (t.address, t.user, t.port) == (str(host.addresses["provisioning"]), "provision", 2200)
    e = expectations(site, host, settings)
    assert (e.gpus, e.ib_ports, e.ib_rate_gbps, e.nvswitch) == (8, 8, 400, True)
    bare = type(host)(name="x", rack="r1", u=1, profile=host.profile, bmc=host.bmc,
                      provisioning_mac=None, root_disk=None, addresses={})
    with pytest.raises(HealthInputError, match="no provisioning address"):
        ssh_target(site, bare, settings)


def test_skipping_checks() -> None:
    from provisioner.exceptions import InventoryError
    from provisioner.health.checks import run_checks
    from provisioner.health.checks.base import Context
    from provisioner.health.service import health_settings

    site = load_site(REPO / "tests" / "fixtures" / "health" / "site-48")
    settings = health_settings(site, ["kernel.log", "ib.write_bw"])
    assert settings.skip_checks == ["kernel.log", "ib.write_bw"]
    ids = {r.id for r in run_checks(Context("h", {}, expectations(site, site.hosts[0], settings)))}
    assert "kernel.log" not in ids and "gpu.count" in ids
    with pytest.raises(InventoryError, match=r"unknown check id\(s\) to skip: gpu\.colour"):
        health_settings(site, ["gpu.colour"])


def test_old_xids_are_downgraded_once_the_gpus_check_clean() -> None:
    from provisioner.health.service import age_old_xids

    xid = result("gpu.xid", Status.FAIL, "Xid 48", remedy=RemedyKind.RESET_GPU,
                 evidence=["[t1] NVRM: Xid (PCI:0000:18:00): 48, DBE"])
    ecc_bad = result("gpu.ecc", Status.FAIL, "DBE", remedy=RemedyKind.RESET_GPU)
    ecc_ok = result("gpu.ecc", Status.PASS, "ok")

    def mk(*results, run="r2"):
        return HostReport(host="a", run_id=run, started_at="t", duration_s=0, results=list(results))

    first = mk(xid, ecc_bad, run="r1")
    assert age_old_xids(first, None) is first
    still_bad = age_old_xids(mk(xid, ecc_bad), first)
    assert still_bad.results[0].status is Status.FAIL  # the GPU was not reset yet
    fixed = age_old_xids(mk(xid, ecc_ok), first)
    assert fixed.results[0].status is Status.WARN and fixed.results[0].remedy.kind is RemedyKind.NONE
    assert fixed.results[0].observed["already_reported_in"] == "r1"
    assert judge(fixed, 2, 0).verdict is Verdict.HEALTHY
    new_event = result("gpu.xid", Status.FAIL, "Xid 48", remedy=RemedyKind.RESET_GPU,
                       evidence=[*xid.evidence, "[t2] NVRM: Xid (PCI:0000:18:00): 48, DBE"])
    assert age_old_xids(mk(new_event, ecc_ok), first).results[0].status is Status.FAIL
    repair = xid.model_copy(update={"remedy": xid.remedy.model_copy(update={"kind": RemedyKind.REPAIR})})
    assert age_old_xids(mk(repair, ecc_ok), mk(repair, ecc_ok, run="r1")).results[0].status is Status.FAIL


def test_a_reinstall_starts_the_golden_streak_again(store: StateStore) -> None:
    """Runs from before a re-image vouch for nothing on the new OS: the host leaves the golden
    list while it is re-imaged and must earn it again with runs on the new install."""
    record(store, rep("a", Status.PASS))
    record(store, rep("a", Status.PASS, streak=1))
    assert [n for n, _ in golden_hosts(store, ["a"])] == ["a"]
    assert clean_streak(store, "a", 10) == 2

    store.transition("a", NodeState.DEPLOYING, reason="reimage")
    assert golden_hosts(store, ["a"]) == []  # being re-imaged: not schedulable
    assert clean_streak(store, "a", 10) == 0
    store.transition("a", NodeState.DEPLOYED)
    assert golden_hosts(store, ["a"]) == []  # its golden run was on the old install

    store.transition("a", NodeState.CONFIGURED)
    record(store, rep("a", Status.PASS, streak=clean_streak(store, "a", 10)))
    assert latest_report(store, "a").verdict is Verdict.HEALTHY  # golden_after is 2
    assert clean_streak(store, "a", 10) == 1
    record(store, rep("a", Status.PASS, streak=clean_streak(store, "a", 10)))
    assert [n for n, _ in golden_hosts(store, ["a"])] == ["a"]


def test_golden_hosts_leave_out_failed_and_maintenance_hosts(store: StateStore) -> None:
    for h in ("a", "b"):
        record(store, rep(h, Status.PASS))
        record(store, rep(h, Status.PASS, streak=1))
    store.transition("b", NodeState.MAINTENANCE, reason="PSU swap")
    assert [n for n, _ in golden_hosts(store, ["a", "b"])] == ["a"]
    store.transition("a", NodeState.FAILED, error="deploy: disk not found")
    assert golden_hosts(store, ["a", "b"]) == []


def _commits(store: StateStore) -> list[str]:
    """The COMMITs this thread's connection to ``store`` makes from now on."""
    seen: list[str] = []
    store._conn().set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


def test_a_host_s_result_is_one_transaction(store: StateStore) -> None:
    # the fleet's one writer thread fsyncs once per host (it was three: run, facts, state)
    commits = _commits(store)
    record(store, rep("a", Status.PASS, Status.FAIL))
    assert commits == ["COMMIT"]
    assert store.get("a").state is NodeState.FAILED
