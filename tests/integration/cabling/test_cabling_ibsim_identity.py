"""A clean fabric is clean whatever the real tools print: no finding from any combination of
ibnetdiscover, iblinkinfo (blocks, -l, -d) and for every GUID layout of a host's HCAs.

Peer: ibsim 0.10 answering MADs for the plan's fabric, swept by OpenSM 3.3, read by
infiniband-diags 44 (Debian 12). ibsim numbers an HCA's port GUIDs node GUID + port, as older
ConnectX HCAs do: iblinkinfo names each HCA by its port GUID and ibnetdiscover by its node GUID.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cabling.ibsim.netfile import BuiltFabric, GuidLayout
from cabling.manifest import load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from tests.integration.cabling.ibsim_case import capture, combos, need_stack, start, validate

pytestmark = pytest.mark.usefixtures("stack")


@pytest.fixture(scope="module")
def stack() -> None:
    need_stack()


@pytest.fixture(scope="module")
def plan16(tmp_path_factory) -> Path:
    """16 hosts x 8 HCAs at HDR (ibsim 0.10 has no NDR): 8 leaves, 4 spines, 384 cables."""
    path = tmp_path_factory.mktemp("plan") / "plan.yaml"
    from cabling.manifest import dump_manifest

    path.write_text(dump_manifest(plan_fat_tree(PlanSpec(hosts=16, hcas=8, speed="HDR"))))
    return path


@pytest.fixture(scope="module")
def clean16(plan16, tmp_path_factory) -> dict[str, Path]:
    """Every tool's output of the clean 16-host fabric."""
    work = tmp_path_factory.mktemp("clean16")
    with start(BuiltFabric(load_manifest(plan16)), work / "sim") as sim:
        return capture(sim, work / "out")


@pytest.mark.parametrize("use", combos(), ids="+".join)
def test_clean_fabric_has_no_finding_from_any_combination_of_outputs(plan16, clean16, use, tmp_path):
    # ibnetdiscover together with the full iblinkinfo used to count each HCA twice (node GUID in
    # one, port GUID in the other): 136 false findings on this fabric.
    report = validate(plan16, clean16, use, tmp_path / "r.json")
    assert report["findings"] == [] and report["exit_code"] == 0
    assert report["stats"]["matched_links"] == 384


def _write(manifest: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


@pytest.mark.parametrize("named_by", ["node", "port"])
def test_hcas_with_vendor_descriptions_are_named_by_manifest_guids_of_either_kind(plan16, tmp_path, named_by):
    # HCAs without rdma-ndd describe themselves by model only; the manifest names each by a GUID,
    # its node GUID (ibstat 'Node GUID') or its port GUID (ibstat 'Port GUID'): either is that HCA.
    m = load_manifest(plan16)
    built = BuiltFabric(m)
    data = yaml.safe_load(plan16.read_text())
    for dev in data["devices"]:
        if dev["kind"] == "host":
            dev["hca_guids"] = {h: "0x" + (built.node_guid(dev["name"], h) if named_by == "node"
                                           else built.port_guid(dev["name"], h)) for h in dev["hcas"]}
            for h in dev["hcas"]:
                built.describe(built.hca_id(dev["name"], h), "MT4123 ConnectX6   Mellanox Technologies")
    plan = _write(data, tmp_path / "plan.yaml")
    with start(built, tmp_path / "sim") as sim:
        out = capture(sim, tmp_path / "out")
    for use in (("ibnetdiscover",), ("ibnetdiscover", "iblinkinfo"), ("ibnetdiscover", "iblinkinfo-l"),
                ("iblinkinfo", "ibnetdiscover", "iblinkinfo-d")):
        report = validate(plan, out, use, tmp_path / "r.json")
        assert report["findings"] == [], (use, report["findings"][:3])
        assert report["stats"]["matched_links"] == 384
    if named_by == "port":
        # iblinkinfo alone prints port GUIDs only: a manifest of port GUIDs names every HCA from it.
        for use in (("iblinkinfo",), ("iblinkinfo-l",)):
            assert validate(plan, out, use, tmp_path / "r.json")["findings"] == [], use


def test_hcas_sharing_a_system_image_guid_are_each_their_own_port(plan16, tmp_path):
    # The HCAs of one host report one system image GUID, and the site's node-name-map names the
    # host by it: the system is the host, each HCA is still the one its description names.
    built = BuiltFabric(load_manifest(plan16), GuidLayout(host_sysimg=True))
    nnm = tmp_path / "hosts.map"
    nnm.write_text("".join(f'0x{built.sysimg_guid(f"gpu{n:03d}", "mlx5_0")} "gpu{n:03d}"\n' for n in range(1, 17)))
    with start(built, tmp_path / "sim") as sim:
        out = capture(sim, tmp_path / "out")
    assert "sysimgguid=0x" + built.sysimg_guid("gpu003", "mlx5_5") in out["ibnetdiscover"].read_text()
    for use in (("ibnetdiscover",), ("ibnetdiscover", "iblinkinfo", "iblinkinfo-d")):
        report = validate(plan16, out, use, tmp_path / "r.json", "--node-name-map", str(nnm))
        assert report["findings"] == [], (use, report["findings"][:3])
        assert report["stats"]["matched_links"] == 384


def test_dual_port_hcas_are_one_node_with_two_ports(tmp_path):
    # ConnectX-3 style: one HCA (one node GUID) with two ports, each cabled to another leaf.
    hosts = [f"h{n}" for n in range(1, 5)]
    manifest = {
        "version": 1,
        "fabric": {"speed": "HDR", "width": "4x"},
        "devices": [{"name": h, "kind": "host", "hcas": ["mlx4_0"]} for h in hosts]
        + [{"name": n, "kind": "switch", "role": "leaf", "ports": 36} for n in ("l1", "l2")],
        "links": [{"a": f"{h}:mlx4_0", "b": f"l1:{i}"} for i, h in enumerate(hosts, 1)]
        + [{"a": f"{h}:mlx4_0/2", "b": f"l2:{i}"} for i, h in enumerate(hosts, 1)]
        + [{"a": f"l1:{30 + k}", "b": f"l2:{30 + k}"} for k in range(1, 3)],
    }
    plan = _write(manifest, tmp_path / "plan.yaml")
    built = BuiltFabric(load_manifest(plan))
    with start(built, tmp_path / "sim") as sim:
        out = capture(sim, tmp_path / "out")
    text = out["ibnetdiscover"].read_text()
    assert f'Ca\t2 "H-{built.node_guid("h1", "mlx4_0")}"' in text
    for use in combos():
        report = validate(plan, out, use, tmp_path / "r.json")
        assert report["findings"] == [], (use, report["findings"][:3])
        assert report["stats"]["matched_links"] == 10
