"""Ambiguous identities: two HCAs with one GUID, two GUIDs with one name. Validate names the ports
and the fix, and proposes no cable move or manifest edit that rests on them."""

from __future__ import annotations

import pytest

from cabling.asbuilt import as_built
from cabling.diff import validate
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.discovery.model import DiscoveredFabric
from cabling.model import Manifest
from cabling.resolve import resolve
from tests.conftest import corpus_path

NDT_SET = ("ib", "ufm-ndt-cabling-validation-dgx-a100-director")
# Two HCAs of host SAT111092710037 on leaf sat11-0101-0927-20ib0 (ports 16 and 15 of its U1 ASIC).
KEEP, CLONE = "043f720300b23c1c", "0c42a10300fb52ec"


@pytest.fixture(scope="module")
def director() -> str:
    return corpus_path(*NDT_SET, "ibnetdiscover_director.txt").read_bytes().decode("utf-8", "replace")


def _as_built_of(text: str) -> tuple[DiscoveredFabric, Manifest]:
    fab = parse_ibnetdiscover(text, "director.txt")
    return fab, as_built(fab)


def test_a_cloned_hca_guid_is_its_own_finding_and_no_cable_moves(director: str) -> None:
    # Changed from the real recording: the HCA "SAT111092710037 ibp203s0f0" (GUID 0c42a10300fb52ec,
    # on leaf port 15) is given the GUID of "SAT111092710037 ibp213s0f0" (043f720300b23c1c, port 16)
    # in its own node block and on the leaf's port line, as a mis-flashed HCA would report it.
    _fab, plan = _as_built_of(director)
    cloned = director.replace(CLONE, KEEP).replace(CLONE.lstrip("0"), KEEP.lstrip("0"))
    found = resolve(parse_ibnetdiscover(cloned, "cloned.txt"), plan)
    report = validate(plan, found)
    kinds = report.by_kind()
    assert kinds == {"duplicate_guid": 1}, [f.message for f in report.findings][:5]
    f = report.findings[0]
    assert f.severity == "error"
    assert "GUID 0x043f720300b23c1c" in f.message
    assert "the cables on sat11-0101-0927-20ib0 port 15 and sat11-0101-0927-20ib0 port 16" in f.message
    assert "'SAT111092710037 ibp213s0f0'" in f.message and "'SAT111092710037 ibp203s0f0'" in f.message
    assert "re-flash or replace" in f.fix and "manifest needs no change" in f.fix
    assert f.where.startswith("cloned.txt:")
    # No finding tells anyone to move a cable or edit a GUID in the manifest.
    assert not any(x.kind in ("moved", "swapped", "identity") for x in report.findings)
    assert report.stats["unchecked_links"] == 2


def test_a_guid_cabled_twice_from_one_node_block_is_a_duplicate(director: str) -> None:
    # Changed from the real recording: only the leaf's port line of ibp203s0f0 names the other HCA's
    # GUID, and that HCA's own block is dropped: what libibnetdisc prints when it merges two nodes.
    lines = director.replace("\r\n", "\n").split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Ca") and CLONE in ln)
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    merged = "\n".join(lines[:start - 3] + lines[end:]).replace(f'"H-{CLONE}"', f'"H-{KEEP}"')
    _fab, plan = _as_built_of(director)
    report = validate(plan, resolve(parse_ibnetdiscover(merged, "merged.txt"), plan))
    assert report.by_kind() == {"duplicate_guid": 1}, [f.message for f in report.findings][:5]


def test_import_leaves_out_an_ambiguous_guid(director: str) -> None:
    cloned = director.replace(CLONE, KEEP).replace(CLONE.lstrip("0"), KEEP.lstrip("0"))
    fab = parse_ibnetdiscover(cloned, "cloned.txt")
    res = resolve(fab)
    assert [a.kind for a in res.ambiguous] == ["duplicate_guid"]
    m = as_built(fab, None, res)
    host = next(d for d in m.devices if d.name == "SAT111092710037")
    assert KEEP not in host.hca_guids.values()
    assert not any("SAT111092710037:ibp213s0f0" in (str(lk.a), str(lk.b)) for lk in m.links)


def test_two_hcas_describing_themselves_alike_are_a_duplicate_name(director: str) -> None:
    # Changed from the real recording: HCA 0c42a10300fb52ec describes itself as the other one does
    # ("SAT111092710037 ibp213s0f0"), as a copied node description would; GUIDs stay distinct.
    renamed = director.replace('"SAT111092710037 ibp203s0f0"', '"SAT111092710037 ibp213s0f0"')
    _fab, plan = _as_built_of(director)
    plan_by_name = plan.model_copy(deep=True)
    for d in plan_by_name.devices:  # a plan without GUIDs: names come from the descriptions
        d.hca_guids, d.guid = {}, None
    report = validate(plan_by_name, resolve(parse_ibnetdiscover(renamed, "renamed.txt"), plan_by_name))
    assert report.by_kind() == {"duplicate_name": 1}, [f.message for f in report.findings][:5]
    f = report.findings[0]
    assert "0x043f720300b23c1c" in f.message and "0x0c42a10300fb52ec" in f.message
    assert "SAT111092710037:ibp213s0f0" in f.message
    assert "node-name map" in f.fix


def test_a_node_name_map_giving_two_guids_one_name_is_a_duplicate_name(director: str) -> None:
    fab = parse_ibnetdiscover(director, "director.txt")
    names = {KEEP: "gpu7 mlx5_0", CLONE: "gpu7 mlx5_0"}
    res = resolve(fab, None, names)
    assert [(a.kind, a.identity) for a in res.ambiguous] == [("duplicate_name", "gpu7:mlx5_0")]


def test_two_switches_configured_with_one_name_are_a_duplicate_name(director: str) -> None:
    # Changed from the real recording: leaf sat11-0101-0904-02ib0 describes itself as its
    # neighbour sat11-0101-0904-01ib0 does (a copied switch configuration); GUIDs stay distinct.
    copied = director.replace('"MF0;sat11-0101-0904-02ib0:MQM8700/U1"', '"MF0;sat11-0101-0904-01ib0:MQM8700/U1"')
    _fab, plan = _as_built_of(director)
    for d in plan.devices:  # a plan without GUIDs: switch names come from the descriptions
        d.hca_guids, d.guid = {}, None
    fab = parse_ibnetdiscover(copied, "copied.txt")
    report = validate(plan, resolve(fab, plan))
    assert report.by_kind() == {"duplicate_name": 1}, [f.message for f in report.findings][:5]
    f = report.findings[0]
    assert "2 switches" in f.message and "'sat11-0101-0904-01ib0'" in f.message and "more" in f.message
    assert "node description" in f.fix
    # The as-built keeps both switches under their GUIDs (unambiguous), with every cable.
    m = as_built(fab)
    names = {d.name for d in m.devices if d.kind == "switch"}
    assert "sat11-0101-0904-01ib0" not in names and sum(n.startswith("S-") for n in names) == 2
    assert len(m.links) == len(as_built(parse_ibnetdiscover(director, "d.txt")).links)
