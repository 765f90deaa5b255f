"""Validate: every injected fault found with the right fix, no false alarms; fixtures of each source."""

from __future__ import annotations

import pytest

from cabling.diff import validate
from cabling.discovery.iblinkinfo import load_iblinkinfo, parse_iblinkinfo
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.discovery.lldp import load_lldp_dir
from cabling.discovery.ufm import load_ufm_dir
from cabling.manifest import load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.resolve import resolve
from cabling.simulate import (
    FAULT_KINDS,
    build_clean,
    inject_faults,
    render_iblinkinfo_down,
    render_ibnetdiscover,
    verify_report,
)
from cabling.sources import ibstat_names


@pytest.fixture(scope="module")
def plan():
    return plan_fat_tree(PlanSpec(hosts=60, hcas=8, radix=16, tiers=3))


def _run(plan, sim):
    fab = parse_ibnetdiscover(render_ibnetdiscover(plan, sim), "sim.txt")
    if sim.down:
        fab.merge(parse_iblinkinfo(render_iblinkinfo_down(plan, sim), "down.txt"))
    return validate(plan, resolve(fab, plan))


def test_clean_fabric_passes(plan):
    report = _run(plan, build_clean(plan))
    assert report.findings == [] and not report.failed()
    assert report.stats["matched_links"] == len(plan.links)


def test_every_injected_fault_found_with_the_right_fix(plan):
    sim = inject_faults(plan, per_kind=4, seed=11)
    report = _run(plan, sim)
    assert verify_report(plan, sim, report) == []
    kinds = report.by_kind()
    for kind in FAULT_KINDS:
        assert kinds.get(kind, 0) >= 4, kinds
    assert kinds["swapped"] == 4 and kinds["moved"] == 4 and kinds["down"] == 4
    assert kinds["degraded_speed"] == 4 and kinds["degraded_width"] == 4 and kinds["unexpected"] == 4


def test_verify_report_catches_a_wrong_report(plan):
    sim = inject_faults(plan, per_kind=2, seed=3)
    report = _run(plan, sim)
    dropped = [f for f in report.findings if f.kind != "swapped"]
    report.findings = dropped
    assert any("swap" in p or "still missing" in p for p in verify_report(plan, sim, report))


def test_verify_report_for_the_real_tools_judges_missing_and_down_together(plan):
    # The full iblinkinfo names a cable never plugged into a switch port 'down' (the port Polls):
    # tell_down=False accepts either kind for it, but still wants every such link named.
    sim = inject_faults(plan, per_kind=2, seed=5)
    report = _run(plan, sim)
    for f in report.findings:
        if f.kind == "missing":
            f.kind = "down"
    assert any(p.startswith("down:") for p in verify_report(plan, sim, report))
    assert verify_report(plan, sim, report, tell_down=False) == []
    report.findings = [f for f in report.findings if f.kind != "down"]
    assert any("still missing" in p for p in verify_report(plan, sim, report, tell_down=False))


def test_swap_is_one_finding_with_the_technicians_words(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    report = validate(m, resolve(load_iblinkinfo(fixtures / "small-fabric.iblinkinfo"), m))
    by_kind = report.by_kind()
    assert by_kind == {"swapped": 1, "down": 2, "degraded_width": 1, "degraded_speed": 1}
    swap = next(f for f in report.findings if f.kind == "swapped")
    assert swap.fix.startswith("swap the cables in l1 ports 3 and 4")
    assert swap.where.endswith("small-fabric.yaml:20")
    downs = sorted(f.message for f in report.findings if f.kind == "down")
    assert "port l0 port 4 is Polling" in downs[1] and "cabled but initialize" in downs[0]
    width = next(f for f in report.findings if f.kind == "degraded_width")
    assert width.data == {"found": "2x", "expected": "4x"}


def test_move_reads_like_the_issue(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    text = (fixtures / "small-fabric.iblinkinfo").read_text()
    # The cable planned at l0 port 2 for h2 lands on h3's HCA; h3's own cable is out.
    text = text.replace('12    1[  ] "h2 mlx5_0"', '13    1[  ] "h3 mlx5_0"').replace(
        "           1    3[  ] ==( 2X    106.25 Gbps Active/  LinkUp)==>      13    1[  ] \"h3 mlx5_0\" ( )\n", "")
    text = text.split("CA: h2 mlx5_0:")[0]
    report = validate(m, resolve(parse_iblinkinfo(text, "x"), m))
    fixes = [f.fix for f in report.findings if f.kind == "moved"]
    assert fixes == ["move the cable at l0 port 2 from h3 mlx5_0 to h2 mlx5_0"]
    assert any(f.kind == "missing" and f.fix == "connect h3 mlx5_0 to l0 port 3 (cable C003)" for f in report.findings)


def test_unexpected_names_unplanned_devices(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    text = (fixtures / "small-fabric.iblinkinfo").read_text().replace(
        '1    7[  ] ==(                Down/ Polling)==>             [  ] "" ( )',
        '1    7[  ] ==( 4X    106.25 Gbps Active/  LinkUp)==>      99    1[  ] "spare01 mlx5_0" ( )')
    report = validate(m, resolve(parse_iblinkinfo(text, "x"), m))
    extra = [f for f in report.findings if f.kind == "unexpected"]
    assert len(extra) == 1 and "spare01 not in the manifest" in extra[0].message
    assert extra[0].where == "x:8"  # the discovery line that shows the cable
    assert extra[0].fix.startswith("unplug the cable between")


def test_ufm_source(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    report = validate(m, resolve(load_ufm_dir(fixtures / "ufm"), m))
    assert report.by_kind() == {"down": 1, "degraded_width": 1, "degraded_speed": 1}


def test_lldp_source_for_roce(fixtures):
    m = load_manifest(fixtures / "roce-plan.yaml")
    report = validate(m, resolve(load_lldp_dir(fixtures / "lldp"), m))
    assert [f.fix for f in report.findings] == ["move the cable at gpu002 eth2 from leaf01 swp3 to leaf01 swp2"]


def test_ibstat_names_hosts_with_generic_descriptions(tmp_path, fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    ibnet = (
        'Switch\t8 "S-0002c90300000a01"\t\t# "MF0;l0:MQM9700/U1" enhanced port 0 lid 1 lmc 0\n'
        '[2]\t"H-946dae0300000201"[1](946dae0300000201)\t\t# "MT4129 ConnectX7   Mellanox Technologies" lid 12 4xNDR\n'
    )
    fab = parse_ibnetdiscover(ibnet, "x")
    folder = tmp_path / "ibstat"
    folder.mkdir()
    (folder / "h2.txt").write_text(
        "CA 'mlx5_0'\n\tCA type: MT4129\n\tNode GUID: 0x946dae0300000201\n\tPort 1:\n\t\tState: Active\n"
        "\t\tRate: 400\n\t\tPort GUID: 0x946dae0300000201\n\t\tLink layer: InfiniBand\n"
        "CA 'mlx5_1'\n\tCA type: MT4129\n\tNode GUID: 0x946dae0300000202\n\tPort 1:\n\t\tState: Down\n"
        "\t\tPhysical state: Polling\n\t\tRate: 10\n\t\tPort GUID: 0x946dae0300000202\n\t\tLink layer: InfiniBand\n"
        "CA 'mlx5_2'\n\tCA type: MT4125\n\tNode GUID: 0x946dae0300000299\n\tPort 1:\n\t\tState: Active\n"
        "\t\tRate: 100\n\t\tPort GUID: 0x966daefffe000299\n\t\tLink layer: Ethernet\n")
    names = ibstat_names(folder, fab)
    assert names["946dae0300000201"] == "h2 mlx5_0" and "946dae0300000299" not in names
    res = resolve(fab, m, names)
    assert [str(rl.a) + "=" + str(rl.b) for rl in res.links] == ["l0:2=h2:mlx5_0"]
    assert ("h2", "mlx5_1") in res.down
    report = validate(m, res)
    assert any(f.kind == "down" and "h2 mlx5_1 is Polling" in f.message for f in report.findings)


def test_cross_device_swap_names_both_ports():
    from cabling.model import Endpoint

    plan = plan_fat_tree(PlanSpec(hosts=4, hcas=2, radix=8, tiers=2))
    sim = build_clean(plan)
    # gpu001 mlx5_0 (leaf 1 port 1) and gpu002 mlx5_1 (leaf 2 port 2) exchange their leaf ends.
    i = next(k for k, lk in enumerate(sim.links) if str(lk.a) == "gpu001:mlx5_0")
    j = next(k for k, lk in enumerate(sim.links) if str(lk.a) == "gpu002:mlx5_1")
    sim.links[i].b, sim.links[j].b = sim.links[j].b, sim.links[i].b
    report = _run(plan, sim)
    assert report.by_kind() == {"swapped": 1}
    fix = report.findings[0].fix
    assert fix.startswith("swap the cables in r002-l2 port 2 and r002-l1 port 1") or fix.startswith(
        "swap the cables in r002-l1 port 1 and r002-l2 port 2"), fix
    assert isinstance(plan.links[0].a, Endpoint)


def test_hcas_crossed_at_the_host_are_swapped_there():
    plan = plan_fat_tree(PlanSpec(hosts=4, hcas=2, radix=8, tiers=2))
    sim = build_clean(plan)
    i = next(k for k, lk in enumerate(sim.links) if str(lk.a) == "gpu003:mlx5_0")
    j = next(k for k, lk in enumerate(sim.links) if str(lk.a) == "gpu003:mlx5_1")
    sim.links[i].a, sim.links[j].a = sim.links[j].a, sim.links[i].a
    report = _run(plan, sim)
    assert [f.fix.split(" (")[0] for f in report.findings] == ["swap the cables in gpu003 ports mlx5_0 and mlx5_1"]


def test_faults_on_a_full_plan_without_free_ports():
    full = plan_fat_tree(PlanSpec(hosts=64, hcas=8, radix=16, tiers=3))
    sim = inject_faults(full, per_kind=3, seed=5)
    assert verify_report(full, sim, _run(full, sim)) == []
    with pytest.raises(ValueError, match="too small"):
        inject_faults(plan_fat_tree(PlanSpec(hosts=2, hcas=2, radix=8)), per_kind=50)


def test_guid_given_to_another_device_is_an_identity_warning(fixtures, small_data):
    import yaml

    from cabling.manifest import parse_manifest

    # The manifest says l0 has the GUID that the switch calling itself l1 reports.
    next(d for d in small_data["devices"] if d["name"] == "l0")["guid"] = "0x0002c90300000a02"
    m = parse_manifest(yaml.safe_dump(small_data), "plan.yaml")
    report = validate(m, resolve(load_iblinkinfo(fixtures / "small-fabric.iblinkinfo"), m))
    ident = [f for f in report.findings if f.kind == "identity"]
    assert len(ident) == 1 and ident[0].severity == "warning"
    assert "node 0x0002c90300000a02 calls itself 'l1' but the manifest gives its GUID to 'l0'" in ident[0].message
    assert "update the GUID of l0" in ident[0].fix


def test_a_manifest_with_a_port_planned_twice_is_refused(fixtures, small_data):
    import yaml

    from cabling.errors import CablingInputError
    from cabling.manifest import parse_manifest

    small_data["links"].append({"a": "h4:mlx5_0", "b": "l0:5"})
    m = parse_manifest(yaml.safe_dump(small_data), "plan.yaml")
    with pytest.raises(CablingInputError, match=r"plans 2 port\(s\) for two cables: h4:mlx5_0 \(plan.yaml:\d+ and"):
        validate(m, resolve(load_iblinkinfo(fixtures / "small-fabric.iblinkinfo"), m))
