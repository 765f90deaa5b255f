"""Every lint rule on a passing manifest and on a failing one; the 8-island plan."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import yaml

from cabling.errors import CablingInputError
from cabling.manifest import parse_manifest
from cabling.model import Endpoint, Link
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.rules import RULES, lint


def _link(data: dict, a: str, b: str | None = None, **kw) -> dict:
    for lk in data["links"]:
        if lk["a"] == a:
            if b is not None:
                lk["b"] = b
            lk.update(kw)
            return lk
    raise KeyError(a)


def _unknown(d):
    _link(d, "h4:mlx5_1", "l9:4")


def _duplicate(d):
    d["devices"].append(copy.deepcopy(d["devices"][0]))


def _reused(d):
    _link(d, "h2:mlx5_0", "l0:1")


def _beyond(d):
    _link(d, "h4:mlx5_0", "l0:9")


def _self(d):
    d["links"].append({"a": "l0:7", "b": "l0:8"})


def _islands(d):
    d["links"] = [lk for lk in d["links"] if not lk["a"].startswith("l1:")]


def _rail(d):
    _link(d, "h1:mlx5_0", "l1:7")
    _link(d, "h1:mlx5_1", "l0:7")


def _blocking(d):
    d["links"] = [lk for lk in d["links"] if lk["a"] != "l0:6"]


def _asym(d):
    _link(d, "l0:6", "s1:3")


def _speed(d):
    _link(d, "l0:5", speed="HDR")


def _tier(d):
    _link(d, "h4:mlx5_1", "s1:7")


def _tier_rate(d):
    # An as-built imported from a fabric with one uplink trained at EDR: baked into the plan (an
    # as-built has no device speeds, so CAB010 has nothing to compare with).
    _link(d, "l1:6", speed="EDR")
    for dev in d["devices"]:
        dev.pop("speed", None)


def _label(d):
    d["links"][0]["cable"] = "C0007"
    d["links"][1]["cable"] = "C0007"


FAILING: dict[str, tuple[Callable[[dict], None], str]] = {
    "CAB001": (_unknown, "names device 'l9', which is not declared"),
    "CAB002": (_duplicate, "device 'h1' is declared 2 times"),
    "CAB003": (_reused, "port l0:1 is used by"),
    "CAB004": (_beyond, "port 9 is beyond the 8-port radix of l0"),
    "CAB005": (_self, "connects l0 to itself"),
    "CAB006": (_islands, "island rail 1 of 2"),
    "CAB007": (_rail, "h1:mlx5_0 (rail 0) goes to l1, a rail-1 leaf"),
    "CAB008": (_blocking, "leaf l0 has 4 down and 1 up links (4:1); the plan allows 2:1"),
    "CAB009": (_asym, "spine s2 has 1 down-links; the other spines have 3"),
    "CAB010": (_speed, "is planned at HDR but l0 runs NDR"),
    "CAB011": (_tier, "h4:mlx5_1 (host) <-> s1:7 (spine) skips or stays within a tier"),
    "CAB012": (_label, "cable label 'C0007' is on"),
    "CAB013": (_tier_rate, "l1:6 <-> s2:2 is planned at 4xEDR; 3 of the 4 leaf-spine links are at 4xNDR"),
}


def test_every_rule_has_a_failing_case():
    assert set(FAILING) == {r.id for r in RULES}


@pytest.mark.parametrize("rule_id", sorted(FAILING))
def test_rule_passes_on_the_small_fabric(rule_id, small_data):
    report = lint(parse_manifest(yaml.safe_dump(small_data), "small.yaml"))
    assert [f for f in report.findings if f.kind == rule_id] == []


@pytest.mark.parametrize("rule_id", sorted(FAILING))
def test_rule_fails_on_its_broken_manifest(rule_id, small_data):
    mutate, text = FAILING[rule_id]
    mutate(small_data)
    report = lint(parse_manifest(yaml.safe_dump(small_data, sort_keys=False), "broken.yaml"))
    hits = [f for f in report.findings if f.kind == rule_id]
    assert hits, report.findings
    assert any(text in f.message for f in hits), [f.message for f in hits]
    assert all(f.fix for f in hits)
    rule = next(r for r in RULES if r.id == rule_id)
    assert report.failed(strict=True) and report.failed() == (rule.severity == "error")


def test_port_invalid_host_hca_and_non_numeric_switch_port(small_data):
    _link(small_data, "h1:mlx5_0", "l0:eth1")
    small_data["links"].append({"a": "h2:mlx5_9", "b": "l0:7"})
    msgs = [f.message for f in lint(parse_manifest(yaml.safe_dump(small_data))).findings if f.kind == "CAB004"]
    assert any("'eth1' is not a switch port number" in m for m in msgs)
    assert any("host h2 has no HCA 'mlx5_9'" in m for m in msgs)


def test_uneven_uplinks_are_flagged(small_data):
    small_data["links"] += [{"a": "l0:7", "b": "s1:3"}, {"a": "l0:8", "b": "s1:4"}]
    msgs = [f.message for f in lint(parse_manifest(yaml.safe_dump(small_data))).findings if f.kind == "CAB009"]
    assert "asymmetric-spine: l0 has 3 links to s1 but 1 to s2" in msgs


def test_wrong_rail_fix_names_both_hcas(small_data):
    _rail(small_data)
    fixes = [f.fix for f in lint(parse_manifest(yaml.safe_dump(small_data))).findings if f.kind == "CAB007"]
    assert "cable h1 mlx5_0 (rail 0) to a rail-0 leaf, and h1 mlx5_1 (rail 1) to l1" in fixes


def test_a_rail_split_in_two_numbers_its_pieces(small_data):
    # l1 loses its uplinks and its hosts are split over a second rail-1 leaf: two "rail 1" islands.
    small_data["devices"].append({"name": "l2", "kind": "switch", "role": "leaf", "rail": 1, "ports": 8})
    small_data["links"] = [lk for lk in small_data["links"] if not lk["a"].startswith("l1:")]
    _link(small_data, "h4:mlx5_1", "l2:1")
    islands = [f.data["island"] for f in lint(parse_manifest(yaml.safe_dump(small_data))).findings
               if f.kind == "CAB006"]
    assert sorted(islands) == ["rail 0", "rail 1 #1", "rail 1 #2"]


def test_skip_and_unknown_rule(small_data):
    _reused(small_data)
    m = parse_manifest(yaml.safe_dump(small_data))
    assert not [f for f in lint(m, {"cab003"}).findings if f.kind == "CAB003"]
    with pytest.raises(CablingInputError, match="unknown rule id"):
        lint(m, {"CAB999"})


def test_eight_islands_when_rails_never_meet_at_the_spines():
    """The original mistake: each rail's leaves cabled only to that rail's spines -> 8 networks."""
    m = plan_fat_tree(PlanSpec(hosts=64, hcas=8, radix=16, tiers=3))
    dm = m.device_map()
    rewired = []
    spines_by_rail: dict[int, list[str]] = {}
    spines = [d.name for d in m.devices if d.role == "spine"]
    cores = [d.name for d in m.devices if d.role == "core"]
    for r in range(8):
        spines_by_rail[r] = spines[r * len(spines) // 8:(r + 1) * len(spines) // 8]
    for lk in m.links:
        a, b = dm[lk.a.device.casefold()], dm[lk.b.device.casefold()]
        if a.role == "leaf" and b.role == "spine":
            own = spines_by_rail[a.rail]
            lk = Link(a=lk.a, b=Endpoint(device=own[int(lk.a.port) % len(own)], port=lk.b.port), cable=lk.cable)
        elif a.role == "spine" and b.role == "core":
            rail = next(r for r, names in spines_by_rail.items() if a.name in names)
            per = len(cores) // 8
            core = cores[rail * per + int(lk.a.port) % per]
            lk = Link(a=lk.a, b=Endpoint(device=core, port=lk.b.port), cable=lk.cable)
        rewired.append(lk)
    m.links = rewired
    report = lint(m, {"CAB003", "CAB009"})
    islands = [f for f in report.findings if f.kind == "CAB006"]
    assert len(islands) == 8
    assert {f.data["island"] for f in islands} == {f"rail {r}" for r in range(8)}
    for f in islands:
        assert "of 8" in f.message and "8 leaves" in f.message and "x mlx5_" in f.message
        assert "join it at the spine tier" in f.fix and "every spine reaches leaves of every rail" in f.fix


def test_rules_have_unique_ids_and_descriptions():
    assert len({r.id for r in RULES}) == len(RULES)
    assert all(r.description and r.severity in ("error", "warning") for r in RULES)
