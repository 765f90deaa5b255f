"""SHARP aggregation nodes, filtered iblinkinfo, and formats named as unsupported."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cabling.asbuilt import as_built, fabric_json
from cabling.cli import cabling_app
from cabling.discovery.iblinkinfo import parse_iblinkinfo
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.errors import CablingInputError
from cabling.resolve import resolve
from cabling.sources import DiscoveryOptions, open_manifest
from tests.conftest import corpus_path

NDT_SET = ("ib", "ufm-ndt-cabling-validation-dgx-a100-director")
LEAF = "0c42a10300a9b026"  # "MF0;sat11-0101-0927-20ib0:MQM8700/U1" in the recording


def _with_aggregation_node(text: str) -> str:
    """The director recording with a SHARP Aggregation Node on the leaf's port 41, as Quantum
    switches show it (written by the project after public ibnetdiscover outputs: the AN is a CA
    named "Mellanox Technologies Aggregation Node" behind switch port 41, GUID = switch GUID + 8)."""
    an = "0c42a10300a9b02e"
    lines = text.replace("\r\n", "\n").split("\n")
    i = next(k for k, ln in enumerate(lines) if ln.startswith("Switch") and LEAF in ln)
    lines.insert(i + 1, f'[41]"H-{an}"[1]({an}) # "Mellanox Technologies Aggregation Node" lid 4100 4xHDR')
    block = ["", "vendid=0x2c9", "devid=0xcf09", f"caguid=0x{an}",
             f'Ca  1 "H-{an}"# "Mellanox Technologies Aggregation Node"',
             f'[1]({an}) "S-{LEAF}"[41]# lid 4100 lmc 0 "MF0;sat11-0101-0927-20ib0:MQM8700/U1" lid 3894 4xHDR', ""]
    return "\n".join(lines + block)


def test_sharp_aggregation_nodes_are_no_hosts_and_their_links_no_cables() -> None:
    text = corpus_path(*NDT_SET, "ibnetdiscover_director.txt").read_bytes().decode("utf-8", "replace")
    plain = parse_ibnetdiscover(text, "d.txt")
    fab = parse_ibnetdiscover(_with_aggregation_node(text), "d.txt")
    res = resolve(fab)
    assert res.aggregation_nodes == ["0c42a10300a9b02e"]
    assert res.aggregation_links == 1
    assert res.internal_links == resolve(plain).internal_links  # not counted as director internal
    m, m0 = as_built(fab), as_built(plain)
    assert [d.name for d in m.devices] == [d.name for d in m0.devices]
    assert not any("Aggregation" in d.name or "0c42a10300a9b02e" in d.name for d in m.devices)
    js = fabric_json(fab, res)
    assert js["sharp_aggregation_links"] == 1
    assert [n["kind"] for n in js["nodes"] if n["guid"] == "0c42a10300a9b02e"] == ["aggregation_node"]


def test_iblinkinfo_filtered_with_grep_up_gives_the_same_links(fixtures: Path) -> None:
    # 'iblinkinfo | grep Up' of our small fabric: the 'Switch:'/'CA:' headers and Down ports are gone.
    full_text = (fixtures / "small-fabric.iblinkinfo").read_text()
    grepped = "\n".join(ln for ln in full_text.splitlines() if "Up" in ln)
    assert "Switch:" not in grepped and "CA:" not in grepped

    def links(text: str) -> set[tuple[str, ...]]:
        res = resolve(parse_iblinkinfo(text, "x"))
        return {(*sorted((str(rl.a), str(rl.b))), str(rl.width), str(rl.speed), rl.state) for rl in res.links}

    assert links(grepped) == links(full_text)
    assert len(links(grepped)) >= 10


@pytest.mark.parametrize(("name", "text", "fmt"), [
    ("fabric.xml", '<?xml version="1.0"?>\n<IBFabric name="f">\n <Node name="sw1"/>\n</IBFabric>\n', "XML"),
    ("f.topo", "MTS3600 SW-1\n   P1 -4x-10G-> HCA-1 H-1/U1 P1\n", "ibdm topology"),
    ("f.cables", "-------------------------------------------------------\nSource: x Port=1\n", "cable list"),
    ("ibdiagnet2.db_csv", "START_NODES\nNodeDesc,NumPorts\nEND_NODES\n", "ibdiagnet database"),
])
def test_foreign_formats_are_named_with_the_supported_list(tmp_path: Path, name: str, text: str, fmt: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(CablingInputError, match=fmt) as exc:
        open_manifest([path])
    assert "not supported as a manifest" in str(exc.value) and "UFM NDT" in str(exc.value)
    with pytest.raises(CablingInputError, match="not supported as --ibnetdiscover input") as exc:
        DiscoveryOptions(ibnetdiscover=path).load()
    assert "iblinkinfo | grep Up" in str(exc.value)


def test_a_foreign_yaml_lists_the_supported_formats(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("- just\n- a list\n")
    result = CliRunner().invoke(cabling_app, ["lint", str(path)])
    assert result.exit_code == 2
    assert "supported: YAML or JSON manifest" in result.output and "CSV cable list" in result.output


def test_lldp_neighbours_known_only_by_mac_get_an_unambiguous_endpoint(tmp_path: Path) -> None:
    # Written by the project: lldpctl -f json of a host whose neighbour sends no system name, so
    # lldpctl keys the chassis by its MAC; the port id is a MAC too (no description).
    (tmp_path / "gpu01.json").write_text(
        '{"lldp": {"interface": {"eth0": {"chassis": {"44:94:fc:9d:55:0a": {"id": {"type": "mac", '
        '"value": "44:94:fc:9d:55:0a"}}}, "port": {"id": {"type": "mac", "value": "44:94:fc:9d:55:11"}}}}}}')
    from cabling.discovery.lldp import load_lldp_dir
    from cabling.model import Endpoint

    res = resolve(load_lldp_dir(tmp_path))
    ends = sorted(str(e) for rl in res.links for e in (rl.a, rl.b))
    assert ends == ["gpu01:eth0", "mac-4494fc9d550a:mac-4494fc9d5511"]
    ep = Endpoint.model_validate(ends[1])
    assert (ep.device, ep.port) == ("mac-4494fc9d550a", "mac-4494fc9d5511")


def test_an_unknown_discovery_file_hears_the_supported_formats(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("switch inventory, hall B\nrack 3: 12 switches\n")
    with pytest.raises(CablingInputError, match="not ibnetdiscover output") as exc:
        DiscoveryOptions(ibnetdiscover=path).load()
    assert "supported: ibnetdiscover output" in str(exc.value) and "lldpctl -f json" in str(exc.value)
    with pytest.raises(CablingInputError, match="cannot read iblinkinfo line") as exc:
        DiscoveryOptions(iblinkinfo=[path]).load()
    assert "supported: ibnetdiscover output" in str(exc.value)
