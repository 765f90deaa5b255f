"""name-switches: planned names inferred from neighbours, and a node-name-map that names them."""

from __future__ import annotations

import re

from cabling.diff import validate
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.discovery.nodemap import format_node_name_map, parse_node_name_map
from cabling.naming import infer_switch_names
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.resolve import resolve
from cabling.simulate import build_clean, render_ibnetdiscover

GENERIC = "Quantum Mellanox Technologies"


def _anonymous_fabric(plan):
    text = render_ibnetdiscover(plan, build_clean(plan))
    # Fresh switches report the vendor default description, not their planned names.
    return parse_ibnetdiscover(re.sub(r'"MF0;[^"]+"', f'"{GENERIC}"', text), "fresh.txt")


def test_every_switch_of_a_three_tier_fabric_is_named():
    plan = plan_fat_tree(PlanSpec(hosts=60, hcas=8, radix=16, tiers=3))
    fab = _anonymous_fabric(plan)
    result = infer_switch_names(fab, plan)
    switches = [d.name for d in plan.devices if d.kind == "switch"]
    assert sorted(result.names.values()) == sorted(switches)
    assert not result.ambiguous and not result.unmatched
    assert all(v.startswith("S-") for v in result.current.values())
    # With the map, validate sees a clean fabric.
    names = parse_node_name_map(format_node_name_map(result.names))
    report = validate(plan, resolve(fab, plan, names))
    assert report.findings == []


def test_unmatched_and_ambiguous_switches_are_reported():
    plan = plan_fat_tree(PlanSpec(hosts=8, hcas=2, radix=8, tiers=2))
    text = render_ibnetdiscover(plan, build_clean(plan))
    text = re.sub(r'"MF0;[^"]+"', f'"{GENERIC}"', text)
    # Hosts with generic descriptions give the leaves nothing to go on.
    text = re.sub(r'"gpu\d+ mlx5_\d"', '"MT4129 ConnectX7 Mellanox Technologies"', text)
    result = infer_switch_names(parse_ibnetdiscover(text, "x"), plan)
    assert not result.names and len(result.unmatched) == len([d for d in plan.devices if d.kind == "switch"])
    assert all(why == "no neighbour matches the manifest" for why in result.unmatched.values())


def test_two_switches_claiming_one_name_are_ambiguous():
    plan = plan_fat_tree(PlanSpec(hosts=8, hcas=2, radix=8, tiers=2))
    text = render_ibnetdiscover(plan, build_clean(plan))
    text = re.sub(r'"MF0;[^"]+"', f'"{GENERIC}"', text)
    # Both leaves' hosts claim to be on rail 0 (mlx5_0): both leaves vote for the rail-0 leaf.
    text = text.replace(" mlx5_1\"", " mlx5_0\"")
    result = infer_switch_names(parse_ibnetdiscover(text, "x"), plan)
    assert any("is also claimed by switch" in why for why in result.ambiguous.values())


def test_a_tie_between_two_planned_names_is_ambiguous():
    plan = plan_fat_tree(PlanSpec(hosts=2, hcas=2, radix=8, tiers=2))
    text = render_ibnetdiscover(plan, build_clean(plan))
    text = re.sub(r'"MF0;[^"]+"', f'"{GENERIC}"', text)
    text = text.replace('"gpu002 mlx5_0"', '"TMP"').replace('"gpu002 mlx5_1"', '"gpu002 mlx5_0"')
    text = text.replace('"TMP"', '"gpu002 mlx5_1"')
    result = infer_switch_names(parse_ibnetdiscover(text, "x"), plan)
    assert len(result.ambiguous) == 2
    assert all("neighbours point equally at" in why for why in result.ambiguous.values())
    assert result.unmatched  # the spines above them have no named neighbour


def test_director_blades_are_named_from_the_ufm_test_set():
    """Fresh switches of NVIDIA's DGX A100 set (QM8700 leaves, MCS8500 directors) named from the NDT plan."""
    from cabling.ndt import load_ndt
    from tests.conftest import corpus_path

    base = ("ib", "ufm-ndt-cabling-validation-dgx-a100-director")
    plan = load_ndt([corpus_path(*base, "ndt", "positive", "switch_to_host_topo1.ndt"),
                     corpus_path(*base, "ndt", "positive", "switch_to_switch_topo2.ndt")])
    text = corpus_path(*base, "ibnetdiscover_director.txt").read_bytes().decode()
    fab = parse_ibnetdiscover(re.sub(r'"MF0;[^"]+"', f'"{GENERIC}"', text), "fresh.txt")
    result = infer_switch_names(fab, plan)
    assert not result.ambiguous and not result.unmatched
    assert len(result.names) == 400 and len(result.internal) == 80
    assert result.names["0c42a10300a9b026"] == "SAT11-0101-0927-20IB0"
    assert result.names["0c42a103008b5558"] == "SAT11-0101-0903-01IB1-A:L16/U2"
    assert set(result.internal.values()) >= {"SAT11-0101-0903-01IB1-A"}
    # With the inferred map, validate reports what it reports with the switches' real descriptions.
    names = parse_node_name_map(format_node_name_map(result.names))
    assert validate(plan, resolve(fab, plan, names)).by_kind() == {"device_down": 1, "moved": 2, "missing": 2,
                                                                   "unexpected": 107}
