"""Root causes before cables: a dark switch, host, rail or plane is one finding with its cables under
it, in every report form. Fabrics here are rendered by ``cabling simulate`` (fast); the same faults
against the real tools are in tests/integration/cabling/test_cabling_ibsim_faults.py."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cabling.diff import validate
from cabling.discovery.iblinkinfo import parse_iblinkinfo
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.model import Endpoint
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.report.fabricmap import map_data
from cabling.report.text import render_text
from cabling.report.worklist import render_worklist
from cabling.resolve import resolve
from cabling.simulate import build_clean, render_iblinkinfo_down, render_ibnetdiscover


@pytest.fixture(scope="module")
def plan():
    return plan_fat_tree(PlanSpec(hosts=16, hcas=8, speed="HDR"))


def _dark(plan, *, devices=(), ports=(), down=True):
    """The clean fabric with every cable of ``devices`` (and the cables at ``ports``) gone; with
    ``down``, the far ends of those cables report Polling (as 'iblinkinfo -d' shows them)."""
    sim = build_clean(plan)
    gone = {d.casefold() for d in devices}
    keep = []
    for lk in sim.links:
        hit = {lk.a.device.casefold(), lk.b.device.casefold()} & gone or {str(lk.a), str(lk.b)} & set(ports)
        if not hit:
            keep.append(lk)
        elif down:
            for me in (lk.a, lk.b):
                if me.device.casefold() not in gone and plan.device_map()[me.device.casefold()].kind == "switch":
                    sim.down.append(Endpoint(device=me.device, port=me.port))
    sim.links = keep
    sim.absent = [d for d in devices if plan.device_map()[d.casefold()].kind == "switch"]
    fab = parse_ibnetdiscover(render_ibnetdiscover(plan, sim), "fab.txt")
    if sim.down:
        fab.merge(parse_iblinkinfo(render_iblinkinfo_down(plan, sim), "down.txt"))
    return validate(plan, resolve(fab, plan))


def test_an_absent_leaf_is_one_root_cause_with_its_cables_under_it(plan):
    report = _dark(plan, devices=["r005-l8"])
    root, *rest = report.findings
    assert root.kind == "device_down" and root.data["device"] == "r005-l8" and root.data["absent"]
    assert "switch r005-l8 (rack r005, U26) is absent: none of its 48 cables came up" in root.message
    assert root.fix.startswith("check r005-l8's power first")
    assert len(rest) == 48 and all(f.data["cause"] == "switch r005-l8" for f in rest)
    assert len(root.data["cables"]) == 48 and "gpu001:mlx5_7 <-> r005-l8:1" in root.data["cables"]


def test_dark_leaves_do_not_make_every_host_a_root_cause(plan):
    # Five of eight leaves off: every host lost five of its eight cables, all explained by the leaves.
    report = _dark(plan, devices=[f"r005-l{k}" for k in range(1, 6)])
    roots = [f for f in report.findings if f.kind == "device_down"]
    assert sorted(r.data["device"] for r in roots) == [f"r005-l{k}" for k in range(1, 6)]


def test_a_host_whose_hcas_are_mostly_down_is_one_root_cause(plan):
    ports = [f"gpu007:mlx5_{k}" for k in range(5)]
    report = _dark(plan, ports=ports)
    root = report.findings[0]
    assert root.kind == "device_down" and root.data["device"] == "gpu007" and not root.data["absent"]
    assert "5 of its 8 cables are missing or down (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4)" in root.message
    assert "check the HCAs on gpu007 first ('ibstat'" in root.fix
    # one HCA down is a cable, not a dark host
    single = _dark(plan, ports=["gpu009:mlx5_4"])
    assert [f.kind for f in single.findings] == ["down"]


def test_a_rail_whose_hcas_are_down_on_most_hosts_is_one_root_cause(plan):
    # The leaf answers; the rail-3 HCA of 12 of 16 hosts does not (a driver or firmware fault).
    report = _dark(plan, ports=[f"gpu{n:03d}:mlx5_3" for n in range(1, 13)])
    rail = report.findings[0]
    assert rail.kind == "rail_down" and rail.data["rail"] == "3" and rail.data["devices"] == []
    assert "the host side is mlx5_3 on most hosts" in rail.message and "mlx5_3 HCAs on the hosts" in rail.fix
    assert sum(1 for f in report.findings if f.data.get("cause") == "rail 3") == 12


def test_reports_put_the_cables_under_their_root_cause(plan):
    report = _dark(plan, devices=["r005-l8"], ports=["gpu002:mlx5_0"])
    text = io.StringIO()
    render_text(report, Console(file=text, width=300, force_terminal=False), None)
    lines = text.getvalue().splitlines()
    assert lines[0].startswith("error device_down ") and lines[1].startswith("    fix: check r005-l8's power")
    assert lines[2].startswith("    error ") and "r005-l8" in lines[2]
    assert any(line.startswith("error down ") and "gpu002:mlx5_0" in line for line in lines)  # not under it
    work = render_worklist(report, plan)
    assert "2 task(s) in 1 rack(s)" in work
    r005 = work[work.index("rack r005 (2)"):]
    assert r005.splitlines()[1].startswith("  [ ] r005-l8 (U26): check r005-l8's power first")
    assert "      then check its 48 cable(s):" in r005 and "      - connect gpu001 mlx5_7 to r005-l8 port 1" in r005
    data = map_data(plan, report)
    assert data["findings"][0][0] == "device_down" and data["findings"][0][6] == -1
    assert sum(1 for f in data["findings"] if f[6] == 0) == 48
