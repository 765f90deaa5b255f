"""The fault set at scale against the real tools: a fabric with dozens of faults of every kind at
once, each named with a fix that works and no false finding beside them, from ibnetdiscover alone,
iblinkinfo alone and both; at 511 hosts (4,408 nodes, 12,280 cables) a clean fabric is clean from
every combination of the tools' outputs; a powered-off leaf, host and plane are root causes; crossed
rails and planes, a silent switch and a port back from down are named.

Peer: ibsim 0.10 answering MADs for the plan's fabric as it is cabled (the faults of
``provision cabling simulate`` written into its topology, ports taken down through its console),
swept by OpenSM 3.3 and read by infiniband-diags 44 (Debian 12). Plans are at HDR: ibsim 0.10 has
no NDR. CI runs 16 hosts; the 511-host runs (20-60 s of simulator each) are
marked longrun (scripts/test-long: ~5 min).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cabling.findings import Report
from cabling.ibsim.netfile import BuiltFabric
from cabling.manifest import dump_manifest, load_manifest
from cabling.model import Manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.simulate import FAULT_KINDS, SimFabric, inject_faults, verify_report
from cabling.sources import DiscoveryOptions
from cabling.validating import judge
from tests.integration.cabling.ibsim_case import capture, combos, kinds, need_stack, start, validate

USES = (("ibnetdiscover",), ("iblinkinfo",), ("ibnetdiscover", "iblinkinfo-d"), ("ibnetdiscover", "iblinkinfo"))
SCALES = [pytest.param(16, 2, id="16-hosts"), pytest.param(511, 40, id="511-hosts", marks=pytest.mark.longrun)]


def _plan(hosts: int, folder: Path) -> tuple[Manifest, Path]:
    path = folder / "plan.yaml"
    path.write_text(dump_manifest(plan_fat_tree(PlanSpec(hosts=hosts, speed="HDR"))))
    return load_manifest(path), path


def _report(manifest: Manifest, out: dict[str, Path], use: tuple[str, ...]) -> Report:
    options = DiscoveryOptions(ibnetdiscover=out["ibnetdiscover"] if "ibnetdiscover" in use else None,
                               iblinkinfo=[out[u] for u in use if u != "ibnetdiscover"])
    return judge(manifest, options, None, lambda _text: None).report


def _down_ports_seen(sim: SimFabric, report: Report) -> list[str]:
    """Ports taken down through the console that the report does not name as down (iblinkinfo sees them)."""
    down = {frozenset(f.endpoints[:2]) for f in report.findings if f.kind == "down"}
    faults = [fault for fault in sim.faults if fault.kind == "down"]
    return [str(fault.planned[0]) for fault in faults if frozenset(fault.planned[0]) not in down]


@pytest.mark.parametrize(("hosts", "per_kind"), SCALES)
def test_every_injected_fault_is_found_with_a_fix_that_works(tmp_path, hosts, per_kind):
    need_stack()
    manifest, _path = _plan(hosts, tmp_path)
    sim = inject_faults(manifest, per_kind, seed=2026)
    built, down = BuiltFabric.from_simulated(manifest, sim)
    with start(built, tmp_path / "sim") as ibsim:
        for ep in down:  # a port that goes dark after the sweep: the cable is there, the link is not
            ibsim.unlink(built.node_id(ep), built.sim_port(ep))
        out = capture(ibsim, tmp_path / "out", "ibnetdiscover", "iblinkinfo", "iblinkinfo-d")
    assert len(sim.faults) == per_kind * len(FAULT_KINDS)
    for use in USES:
        report = _report(manifest, out, use)
        # Applying the report's moves and swaps to the cabling as built leaves exactly the links it
        # names as missing/down/unexpected; every degraded link is named, nothing else is.
        problems = verify_report(manifest, sim, report, tell_down=False)
        if "ibnetdiscover" not in use or len(use) > 1:
            problems += [f"port down not named down: {p}" for p in _down_ports_seen(sim, report)]
        assert problems == [], f"{' + '.join(use)}: {problems[:5]}"
        assert {"moved", "swapped", "unexpected", "degraded_speed", "degraded_width"} <= set(report.by_kind())


@pytest.fixture(scope="module")
def clean511(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """Every tool's output of the clean 511-host fabric (4,408 nodes)."""
    need_stack()
    work = tmp_path_factory.mktemp("clean511")
    manifest, path = _plan(511, work)
    with start(BuiltFabric(manifest), work / "sim") as ibsim:
        return path, capture(ibsim, work / "out")


@pytest.mark.longrun
def test_clean_511_host_fabric_has_no_finding_from_any_combination_of_outputs(clean511, tmp_path):
    path, out = clean511
    for use in combos():
        report = validate(path, out, use, tmp_path / "r.json")
        assert (report["findings"], report["exit_code"]) == ([], 0), (use, report["findings"][:3])
        assert report["stats"]["matched_links"] == 12280, use


@pytest.mark.longrun
def test_a_leaf_and_a_host_powered_off_at_511_hosts_are_root_causes(tmp_path):
    need_stack()
    manifest, path = _plan(511, tmp_path)
    built = BuiltFabric(manifest)
    leaf = "r009-l8"
    leaf_cables = sum(1 for lk in manifest.links if leaf in (lk.a.device, lk.b.device))
    with start(built, tmp_path / "sim") as ibsim:
        ibsim.unlink(built.switch_id(leaf))
        for k in range(8):
            ibsim.unlink(built.hca_id("gpu100", f"mlx5_{k}"))
        out = capture(ibsim, tmp_path / "out", "ibnetdiscover", "iblinkinfo", "iblinkinfo-d")
    for use in USES:
        report: dict[str, Any] = validate(path, out, use, tmp_path / "r.json")
        roots = [f for f in report["findings"] if f["kind"] == "device_down"]
        assert sorted(r["data"]["device"] for r in roots) == ["gpu100", leaf], use
        causes: dict[str, int] = {}
        for f in report["findings"]:
            if f["kind"] in ("missing", "down"):
                causes[f["data"].get("cause")] = causes.get(f["data"].get("cause"), 0) + 1
        # Every cable of both is under its device; nothing else is named.
        assert causes == {f"switch {leaf}": leaf_cables, "host gpu100": 8}, (use, causes)
        assert set(kinds(report)) <= {"device_down", "missing", "down"}, use


def _roots(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["kind"] == kind]


@pytest.mark.longrun
def test_crossed_rails_and_planes_a_silent_switch_and_a_port_back_from_down_at_511_hosts(tmp_path):
    need_stack()
    manifest, path = _plan(511, tmp_path)
    built = BuiltFabric(manifest)
    built.move("gpu481:mlx5_2", "r144-l4:32")  # su16's rail-4 leaf has one free port: wrong rail
    built.swap("r145-s1:1", "r147-s1:1")  # a pod1 and a pod2 spine exchange leaf uplinks: wrong plane
    built.describe("r090-l5", "Quantum Mellanox Technologies")  # a leaf still at its vendor description
    with start(built, tmp_path / "sim") as ibsim:
        ibsim.unlink("r027-l1", 7)  # went down and came back: Init until the subnet manager sweeps
        ibsim.relink("r027-l1", 7)
        out = capture(ibsim, tmp_path / "out", "ibnetdiscover", "iblinkinfo", "iblinkinfo-d")
    for use in USES:
        report: dict[str, Any] = validate(path, out, use, tmp_path / "r.json")
        (moved,) = _roots(report, "moved")
        assert moved["fix"] == "move the cable at gpu481 mlx5_2 from r144-l4 port 32 to r144-l3 port 1", use
        assert moved["data"]["wrong"] == "rail"
        (swapped,) = _roots(report, "swapped")
        assert swapped["data"]["wrong"] == "plane" and set(swapped["data"]["ports"]) == {"r145-s1:1", "r147-s1:1"}
        (silent,) = _roots(report, "identity")
        assert "r090-l5" in silent["message"] and "MF0;r090-l5:" in silent["fix"], use
        down = _roots(report, "down")
        if "iblinkinfo" in use:
            assert [(f["endpoints"], f["data"]["state"]) for f in down] == [
                (["gpu071:mlx5_0", "r027-l1:7"], "initialize")], use
        else:
            assert down == [], use
        assert len(report["findings"]) == 3 + len(down), (use, kinds(report))


@pytest.mark.longrun
def test_a_plane_powered_off_at_511_hosts_is_one_root_cause(tmp_path):
    need_stack()
    manifest, path = _plan(511, tmp_path)
    built = BuiltFabric(manifest)
    spines = [d.name for d in manifest.devices if d.role == "spine" and d.group == "pod4"]
    with start(built, tmp_path / "sim") as ibsim:
        for name in spines:
            ibsim.unlink(built.switch_id(name))
        out = capture(ibsim, tmp_path / "out", "ibnetdiscover", "iblinkinfo", "iblinkinfo-d")
    for use in USES:
        report: dict[str, Any] = validate(path, out, use, tmp_path / "r.json")
        (plane,) = _roots(report, "plane_down")
        assert report["findings"][0] == plane and plane["data"]["plane"] == "pod4", use
        assert sorted(plane["data"]["devices"]) == sorted(spines), use
        roots = _roots(report, "device_down")
        assert {r["data"]["device"] for r in roots} >= set(spines), use
        assert all(f["data"].get("cause") for f in report["findings"][1:]), (use, kinds(report))
