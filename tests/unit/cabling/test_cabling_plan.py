"""Fat-tree plan generation: the 4,088-GPU three-tier shape, two tiers, and shapes that cannot be built."""

from __future__ import annotations

from collections import Counter

import pytest

from cabling.errors import CablingInputError
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.rules import lint


def test_4088_gpu_three_tier_shape():
    m = plan_fat_tree(PlanSpec(hosts=511))
    roles = Counter(d.role or d.kind for d in m.devices)
    assert roles == {"host": 511, "leaf": 128, "spine": 128, "core": 64}
    assert m.fabric.tiers == 3 and len(m.links) == 4088 + 128 * 32 + 128 * 32
    # Names say where a switch sits: its rack, its tier letter and number.
    dm = m.device_map()
    leaf = dm["r009-l4"]
    assert leaf.rail == 3 and leaf.location.rack == "r009" and leaf.group == "su01"
    assert dm["gpu042"].location.rack.startswith("r0")
    # HCA k of every host goes to the rail-k leaf of its scalable unit.
    for lk in m.links[:4088]:
        host, sw = dm[lk.a.device.casefold()], dm[lk.b.device.casefold()]
        assert sw.rail == host.hcas.index(lk.a.port)
    ports = Counter(ep.key for lk in m.links for ep in (lk.a, lk.b))
    assert max(ports.values()) == 1
    assert lint(m).findings == []


def test_two_tier_when_it_fits():
    m = plan_fat_tree(PlanSpec(hosts=64, hcas=4, radix=32))
    roles = Counter(d.role or d.kind for d in m.devices)
    assert m.fabric.tiers == 2 and roles["leaf"] == 16 and roles["spine"] == 8
    assert lint(m).findings == []


def test_blocking_ratio_changes_leaf_split():
    m = plan_fat_tree(PlanSpec(hosts=32, hcas=2, radix=16, blocking="3:1"))
    leaf = next(d for d in m.devices if d.role == "leaf")
    down = sum(1 for lk in m.links if lk.b.device == leaf.name and m.device_map()[lk.a.device.casefold()].kind == "host")
    assert down == 12
    assert lint(m).findings == []


@pytest.mark.parametrize(("spec", "match"), [
    (PlanSpec(hosts=0), "at least 1"),
    (PlanSpec(hosts=4, radix=7), "even number"),
    (PlanSpec(hosts=4, blocking="x"), "down:up"),
    (PlanSpec(hosts=511, tiers=2), "do not fit"),
    (PlanSpec(hosts=4, tiers=1), "tiers must be 2 or 3"),
    (PlanSpec(hosts=8, radix=4, blocking="1:3", tiers=3), "at most half their ports up"),
    (PlanSpec(hosts=4000, hcas=8, radix=8), "pods exceed"),
    (PlanSpec(hosts=4, radix=4, blocking="1:100"), "no down or up ports"),
])
def test_shapes_that_cannot_be_built(spec, match):
    with pytest.raises(CablingInputError, match=match):
        plan_fat_tree(spec)


def test_core_overflow_is_reported():
    # 3 pods of radix-8 switches: cores cannot be spread evenly over 8 ports each.
    with pytest.raises(CablingInputError, match="would need more than 8 ports"):
        plan_fat_tree(PlanSpec(hosts=44, hcas=2, radix=8, tiers=3))
