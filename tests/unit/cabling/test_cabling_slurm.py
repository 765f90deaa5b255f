"""Slurm topology.conf from manifests, checked against one written by hand for a real fabric."""

from __future__ import annotations

import pytest

from cabling.asbuilt import as_built
from cabling.discovery.ibnetdiscover import load_ibnetdiscover
from cabling.discovery.nodemap import load_node_name_map, parse_guid_list
from cabling.errors import CablingInputError
from cabling.manifest import load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.slurm import hostlist_compress, hostlist_expand, slurm_topology, switch_tiers
from tests.conftest import corpus_path

X5 = ("ib", "ibnetdiscover-ens-lyon-x5-qdr-ddr")


def test_hostlists():
    names = ["gpu097", "gpu098", "gpu099", "gpu100", "gpu102", "n1", "n2", "n10", "login", "H-003048c749450000"]
    text = hostlist_compress(names)
    assert text == "login,H-003048c749450000,gpu[097-100,102],n[1-2,10]"
    assert sorted(hostlist_expand(text)) == sorted(names)
    for bad in ("gpu[1-x]", "gpu[", "a]b"):
        with pytest.raises(ValueError, match="bad hostlist"):
            hostlist_expand(bad)


def test_rail_optimised_plan_has_one_switch_per_scalable_unit():
    text = slurm_topology(plan_fat_tree(PlanSpec(hosts=511)))
    lines = text.splitlines()
    assert "SwitchName=su01 Nodes=gpu[001-032]" in lines and "SwitchName=su16 Nodes=gpu[481-511]" in lines
    spine = next(line for line in lines if line.startswith("SwitchName=r145-s1 "))
    assert spine == "SwitchName=r145-s1 Switches=su01,su02,su03,su04"
    core = next(line for line in lines if line.startswith("SwitchName=r153-c1 "))
    assert "r145-s1" in core and "su01" not in core


def test_tiers_from_roles_or_from_the_hosts(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    assert switch_tiers(m) == {"l0": 1, "l1": 1, "s1": 2, "s2": 2}
    for d in m.devices:
        d.role = None
    assert switch_tiers(m) == {"l0": 1, "l1": 1, "s1": 2, "s2": 2}
    # Both rails serve the same four hosts: one Slurm switch.
    assert slurm_topology(m).splitlines()[2:] == [
        "SwitchName=l0+l1 Nodes=h[1-4]", "SwitchName=s1 Switches=l0+l1", "SwitchName=s2 Switches=l0+l1"]


def test_no_hosts_no_topology():
    from cabling.model import Device, Manifest

    with pytest.raises(CablingInputError, match="no switch connected to a host"):
        slurm_topology(Manifest(devices=[Device(name="s", kind="switch")]))


def test_matches_the_hand_written_topology_of_a_real_fabric():
    fab = load_ibnetdiscover(corpus_path(*X5, "X5.topofile"))
    asbuilt = as_built(fab, load_node_name_map(corpus_path(*X5, "X5.map")))
    # Name switches S-<guid> as the site's own topology.conf does.
    rename = {d.name: f"S-{d.guid}" for d in asbuilt.devices if d.kind == "switch" and d.guid}
    for d in asbuilt.devices:
        d.name = rename.get(d.name, d.name)
    for lk in asbuilt.links:
        lk.a = lk.a.model_copy(update={"device": rename.get(lk.a.device, lk.a.device)})
        lk.b = lk.b.model_copy(update={"device": rename.get(lk.b.device, lk.b.device)})
    # The site lists its spines; we find the same ones from the cabling alone.
    spines = {f"s-{g}" for g in parse_guid_list(corpus_path(*X5, "X5.spine").read_text())}
    assert {k for k, t in switch_tiers(asbuilt).items() if t > 1} == spines

    ours = _parse(slurm_topology(asbuilt))
    theirs = _parse(corpus_path(*X5, "X5.topology.conf").read_text())
    leaves = {k: v for k, v in theirs.items() if v[0] == "Nodes"}
    assert {k: v for k, v in ours.items() if v[0] == "Nodes"} == leaves
    for name, (kind, members) in theirs.items():
        if kind == "Switches":
            # Theirs lists every neighbour switch; ours only the tiers below (no loops for Slurm).
            assert ours[name][0] == "Switches" and ours[name][1] <= members


def _parse(text: str) -> dict[str, tuple[str, set[str]]]:
    out = {}
    for line in text.splitlines():
        if line.startswith("SwitchName="):
            name_part, rest = line.split(" ", 1)
            kind, _, members = rest.partition("=")
            out[name_part.split("=", 1)[1].lower()] = (kind, {m.lower() for m in hostlist_expand(members)})
    return out


def test_guid_list_errors():
    with pytest.raises(CablingInputError, match=r"g:2: not a GUID"):
        parse_guid_list("S-0008f105001086a2\nspine1\n", "g")
