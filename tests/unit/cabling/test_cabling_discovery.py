"""Discovery parsers on the real recorded outputs (tests/fixtures/corpus) and on our own fixtures."""

from __future__ import annotations

import json

import pytest

from cabling.discovery.iblinkinfo import load_iblinkinfo, parse_iblinkinfo
from cabling.discovery.ibnetdiscover import load_ibnetdiscover, parse_ibnetdiscover
from cabling.discovery.ibstat import load_ibstat, parse_ibstat
from cabling.discovery.lldp import load_lldp_dir, parse_lldp
from cabling.discovery.nodemap import format_node_name_map, load_node_name_map, parse_node_name_map
from cabling.discovery.ufm import load_ufm_dir, parse_ufm
from cabling.errors import CablingInputError
from cabling.resolve import resolve
from tests.conftest import corpus_path

NDT_SET = ("ib", "ufm-ndt-cabling-validation-dgx-a100-director")
X5 = ("ib", "ibnetdiscover-ens-lyon-x5-qdr-ddr")


def test_ibnetdiscover_director_putty_log():
    fab = load_ibnetdiscover(corpus_path(*NDT_SET, "ibnetdiscover_director.txt"))
    # The PuTTY banner (line 1) and the trailing shell prompt are noise, not errors.
    assert fab.skipped_lines[0] == 1 and len(fab.skipped_lines) == 2
    switches = [n for n in fab.nodes.values() if n.kind == "switch"]
    assert len(switches) == 400
    assert sum(1 for n in fab.nodes.values() if n.kind == "ca") == 2328
    leaf = fab.nodes["0c42a10300a9b026"]
    assert leaf.desc == "MF0;sat11-0101-0927-20ib0:MQM8700/U1" and leaf.nports == 41 and leaf.lid == 3894
    rates = {(lk.width, lk.speed) for lk in fab.links}
    assert rates == {("4x", "HDR"), ("4x", "EDR")}
    res = resolve(fab)
    # Director blades are one chassis; blade-to-blade links inside it are not cables.
    assert res.internal_links == 3200
    names = {str(rl.b) for rl in res.links} | {str(rl.a) for rl in res.links}
    assert "sat11-0101-0903-01ib1-A:L16/U2/20" in names
    assert "SAT111092710053:ibp11s0f0" in names


def test_ibnetdiscover_x5_tabs_and_generic_descriptions():
    fab = load_ibnetdiscover(corpus_path(*X5, "X5.topofile"))
    assert len(fab.nodes) == 100 and len(fab.links) == 159
    assert {lk.speed for lk in fab.links} == {"QDR", "DDR"}
    assert fab.nodes["0008f10500200b50"].desc == "Voltaire 4036 - 36 QDR ports switch"
    # CA port GUIDs are kept, so a GUID map can name hosts whose description is the vendor default.
    assert fab.nodes["003048c707b60000"].port_guids[1] == "003048c707b60001"
    res = resolve(fab)
    names = {res.names[g].device for g in fab.nodes}
    assert "H-003048c707b60000" in names  # generic "MT25408 ConnectX Mellanox Technologies"
    # Two switches share "Voltaire 4036 - 36 QDR ports switch": they fall back to GUID names.
    assert "S-0008f10500200b50" in names


def test_x5_map_names_hosts():
    names = load_node_name_map(corpus_path(*X5, "X5.map"))
    assert names["003048c74e4a0000"] == "x5570comp1"
    fab = load_ibnetdiscover(corpus_path(*X5, "X5.topofile"))
    res = resolve(fab, None, names)
    assert any(rl.a.device.startswith("x5570comp") or rl.b.device.startswith("x5570comp") for rl in res.links)


def test_x5_spine_list_is_a_guid_list_not_a_map():
    with pytest.raises(CablingInputError, match=r"X5.spine:2: cannot read node-name-map line"):
        load_node_name_map(corpus_path(*X5, "X5.spine"))


def test_rdma_core_node_name_map_example():
    names = load_node_name_map(corpus_path("ib", "node-name-map-rdma-core-example", "ib-node-name-map.example"))
    assert names["0008f104003f125c"] == "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D"
    assert len(names) == 14
    text = format_node_name_map({"0002c903000e0b72": "r03-l1"}, "made by a test")
    assert text == '# made by a test\n0x0002c903000e0b72 "r03-l1"\n'
    assert parse_node_name_map(text) == {"0002c903000e0b72": "r03-l1"}


def test_ibnetdiscover_errors_have_line_numbers():
    good = 'Switch\t36 "S-0008f10500200b50"\t\t# "sw1" enhanced port 0 lid 9 lmc 0\n'
    with pytest.raises(CablingInputError, match=r"f.txt:2: cannot read port line"):
        parse_ibnetdiscover(good + '[1]\t"S-0008f105001' + "\n", "f.txt")
    with pytest.raises(CablingInputError, match=r"f.txt:2: cannot read this line of node 'sw1'"):
        parse_ibnetdiscover(good + "garbage here\n", "f.txt")
    with pytest.raises(CablingInputError, match=r"f.txt:1: port line outside a node block"):
        parse_ibnetdiscover('[1]\t"S-0008f10500108c5c"[15]\t\t# "x" lid 16 4xQDR\n', "f.txt")
    with pytest.raises(CablingInputError, match="not ibnetdiscover output"):
        parse_ibnetdiscover("hello\nworld\n", "f.txt")


def test_ibnetdiscover_missing_file(tmp_path):
    with pytest.raises(CablingInputError, match="cannot read ibnetdiscover output"):
        load_ibnetdiscover(tmp_path / "none.txt")


@pytest.mark.parametrize("name", ["ibstat.47.0.a100.all.active.0", "ibstat.47.0.h100.all.active.0",
                                  "ibstat.47.0.h100.all.active.1", "ibstat.47.0.h100.some.down.0",
                                  "ibstat.47.0.h100.some.down.1"])
def test_ibstat_corpus(name):
    ports = load_ibstat(corpus_path("ib", "ibstat-a100-h100-gpud", name))
    assert all(p.node_guid and p.port_guid and p.state for p in ports)
    assert all(p.hca.startswith("mlx5_") and p.link_layer in ("InfiniBand", "Ethernet") for p in ports)
    if "h100" in name:
        # Eight ConnectX-7 (MT4129) at 400 Gb/s: NDR whether the port runs IB or RoCE.
        cx7 = [p for p in ports if p.ca_type == "MT4129"]
        assert len(cx7) == 8 and {p.speed for p in cx7 if p.state == "Active"} == {"NDR"}
    if "some.down" in name:
        assert any(p.state.lower() == "down" or p.physical_state.lower() != "linkup" for p in ports)


def test_ibstat_errors(tmp_path):
    with pytest.raises(CablingInputError, match=r"s.txt:2: cannot read ibstat line"):
        parse_ibstat("CA 'mlx5_0'\n???\n", "s.txt")
    with pytest.raises(CablingInputError, match="not ibstat output"):
        parse_ibstat("CA 'mlx5_0'\n\tCA type: MT4129\n", "s.txt")
    with pytest.raises(CablingInputError, match="cannot read ibstat output"):
        load_ibstat(tmp_path / "x")


def test_iblinkinfo_fixture(fixtures):
    fab = load_iblinkinfo(fixtures / "small-fabric.iblinkinfo")
    assert fab.down_ports == {("0002c90300000a01", 4): "Polling", ("0002c90300000a01", 7): "Polling"}
    by_port = {(lk.a_guid, lk.a_port): lk for lk in fab.links}
    assert by_port[("0002c90300000a01", 3)].width == "2x"
    assert by_port[("0002c90300000a01", 6)].speed == "HDR"
    assert by_port[("0002c90300000a02", 6)].state == "initialize"
    # l0 port 5 <-> s1 port 1 appears from both ends but is one link.
    assert sum(1 for lk in fab.links if {lk.a_guid, lk.b_guid} == {"0002c90300000a01", "0002c90300000b01"}) == 1
    assert fab.nodes["946dae0300000101"].kind == "ca"


def test_iblinkinfo_line_mode():
    # `iblinkinfo --switches-only -l`: no headers, peers by GUID, remarks in the last parentheses.
    text = "\n".join([
        '0x0002c90300000a01 "          r01-l1"   4    1[  ] ==( 4X     106.25 Gbps Active/  LinkUp)==>  '
        '0x946dae0300000101     11    1[  ] "gpu01 mlx5_0" (Could be 12X Could be 212.5 Gbps)',
        '0x0002c90300000a01 "          r01-l1"   4    2[  ] ==( 4X      53.13 Gbps Active/  LinkUp)==>  '
        '0x946dae0300000201     12    1[  ] "gpu02 mlx5_0" ( )',
        '0x0002c90300000a01 "          r01-l1"   4    3[  ] ==(                Down/ Polling)==>             '
        '[  ] "" ( )',
        '0x0002c90300000a01 "          r01-l1"   4   33[  ] ==( 4X 10.0 Gbps (FDR10) Active/ LinkUp)==>  '
        '0x0002c90300000b01      7    5[  ] "r02-s1" ( )',
    ])
    fab = parse_iblinkinfo(text, "l.txt")
    res = resolve(fab)
    got = sorted((str(rl.a), str(rl.b), rl.speed) for rl in res.links)
    assert got == [("r01-l1:1", "gpu01:mlx5_0", "NDR"), ("r01-l1:2", "gpu02:mlx5_0", "HDR"),
                   ("r01-l1:33", "r02-s1:5", "FDR10")]
    assert fab.nodes["0002c90300000a01"].kind == "switch" and fab.nodes["946dae0300000101"].kind == "ca"
    assert fab.nodes["0002c90300000b01"].kind == "switch"
    assert fab.down_ports == {("0002c90300000a01", 3): "Polling"}


def test_iblinkinfo_errors():
    with pytest.raises(CablingInputError, match=r"x:2: cannot read iblinkinfo line"):
        parse_iblinkinfo("Switch: 0x01 sw:\n  nonsense\n", "x")
    with pytest.raises(CablingInputError, match="CA port line without its port GUID"):
        parse_iblinkinfo('CA: h1 mlx5_0:\n  1    1[  ] ==( 4X 106.25 Gbps Active/  LinkUp)==>  2 1[  ] "p" ( )\n', "x")
    with pytest.raises(CablingInputError, match=r"x:2: cannot read the ports"):
        parse_iblinkinfo('Switch: 0x01 sw:\n  abc ==( 4X 106.25 Gbps Active/  LinkUp)==>  2 1[  ] "p" ( )\n', "x")
    with pytest.raises(CablingInputError, match="not iblinkinfo output"):
        parse_iblinkinfo("\n# nothing\n", "x")


@pytest.mark.parametrize("name", ["lldp_query.json", "dev_bin_lldpcli_embedded.json"])
def test_lldp_corpus(name):
    path = corpus_path("lldp", "lldpctl-json-cumulus-bluefield-dpu-nvidia-bmm", name)
    fab = load_lldp_dir(path)
    ports = sorted((str(lk.a_port), fab.nodes[lk.b_guid].name, lk.b_port) for lk in fab.links)
    assert ports == [("oob_net0", "RNO1-M03-B17-IPMI-01", "swp7"), ("p0", "RNO1-M03-B17-IPMI-01", "swp7"),
                     ("p1", "RNO1-M03-B17-IPMI-01", "swp7")]
    assert fab.nodes[f"lldp:{path.stem}"].name == path.stem


def test_lldp_dir_both_json_formats(fixtures):
    fab = load_lldp_dir(fixtures / "lldp")
    got = sorted((fab.nodes[lk.a_guid].name, lk.a_port, fab.nodes[lk.b_guid].name, lk.b_port) for lk in fab.links)
    assert got == [("gpu001", "eth2", "leaf01", "swp1"), ("gpu001", "eth3", "leaf02", "swp1"),
                   ("gpu002", "eth2", "leaf01", "swp3"), ("gpu002", "eth3", "leaf02", "swp2")]


def test_lldp_collected_on_a_switch(fixtures):
    fab = load_lldp_dir(fixtures / "lldp-switch")
    kinds = {n.name: n.kind for n in fab.nodes.values()}
    assert kinds == {"leaf01": "switch", "gpu001": "ca", "gpu002": "ca"}
    # A host that sends its MAC as port id names the interface in the port description.
    assert sorted((lk.a_port, lk.b_port) for lk in fab.links) == [("swp1", "eth2"), ("swp3", "eth2")]


def test_lldp_errors(tmp_path):
    with pytest.raises(CablingInputError, match=r"h.json:1: not JSON"):
        parse_lldp("{", "h", "h.json")
    with pytest.raises(CablingInputError, match="not 'lldpctl -f json' output"):
        parse_lldp("[]", "h", "h.json")
    with pytest.raises(CablingInputError, match="no chassis name or port id"):
        parse_lldp(json.dumps({"lldp": {"interface": {"eth0": {"chassis": {"sw": {}}, "port": {}}}}}), "h")
    with pytest.raises(CablingInputError, match="has no chassis"):
        parse_lldp(json.dumps({"lldp": {"interface": {"eth0": {"chassis": "x"}}}}), "h")
    with pytest.raises(CablingInputError, match="must be objects"):
        parse_lldp(json.dumps({"lldp": {"interface": ["x"]}}), "h")
    with pytest.raises(CablingInputError, match="LLDP folder not found"):
        load_lldp_dir(tmp_path / "none")
    with pytest.raises(CablingInputError, match=r"no \*\.json files"):
        load_lldp_dir(tmp_path)


def test_ufm_fixture(fixtures):
    fab = load_ufm_dir(fixtures / "ufm")
    assert len(fab.links) == 11
    names = resolve(fab).names
    assert names["0002c90300000a01"].device == "l0"
    assert {names[g].device for g, n in fab.nodes.items() if n.kind == "ca"} == {"h1", "h2", "h3", "h4"}
    assert fab.down_ports == {("0002c90300000a02", 4): "Polling"}
    widths = {lk.width for lk in fab.links}
    assert widths == {"4x", "2x"}


def test_ufm_errors(tmp_path):
    with pytest.raises(CablingInputError, match=r"missing systems\.json"):
        load_ufm_dir(tmp_path)
    (tmp_path / "systems.json").write_text("[")
    with pytest.raises(CablingInputError, match="not JSON"):
        load_ufm_dir(tmp_path)
    with pytest.raises(CablingInputError, match="must be a JSON list"):
        parse_ufm({}, [], [])  # type: ignore[arg-type]
    with pytest.raises(CablingInputError, match=r"UFM links\[0\] has no 'source_guid'"):
        parse_ufm([], [], [{"source_port": "1"}])
    bad = [{"source_guid": "1", "source_port": "1", "destination_guid": "2", "destination_port": "1", "width": "3x"}]
    with pytest.raises(CablingInputError, match=r"links\[0\]\.width: unknown link width"):
        parse_ufm([], [], bad)


def test_missing_files_are_input_errors(tmp_path):
    from cabling.csvio import import_csv
    from cabling.sources import open_manifest

    with pytest.raises(CablingInputError, match="cannot read iblinkinfo output"):
        load_iblinkinfo(tmp_path / "none")
    with pytest.raises(CablingInputError, match="cannot read CSV"):
        import_csv(tmp_path / "none.csv")
    with pytest.raises(CablingInputError, match="no manifest given"):
        open_manifest([])


def test_iblinkinfo_port_line_roundtrip():
    from cabling.discovery.iblinkinfo import format_port_line

    text = "Switch: 0x0002c90300000a01 MF0;l0:MQM9700/U1:\n" + format_port_line(
        1, 3, "4x", "106.25", "Active", "LinkUp", 11, 1, "h1 mlx5_0") + "\n"
    fab = parse_iblinkinfo(text, "x")
    assert [(lk.a_port, lk.b_port, lk.width, lk.speed) for lk in fab.links] == [(3, 1, "4x", "NDR")]


def test_port_refs_compare_with_endpoints():
    from cabling.model import Endpoint, PortRef

    ref = PortRef("R03-L1", "17")
    assert ref == Endpoint(device="r03-l1", port="17") and hash(ref) == hash(PortRef("r03-l1", "17"))
    assert repr(ref) == "PortRef('R03-L1', '17')" and ref != "r03-l1:17"


def test_sharp_aggregation_nodes_are_not_cables():
    text = (
        'Switch\t65 "S-0002c90300000a01"\t\t# "MF0;r01-l1:MQM9700/U1" enhanced port 0 lid 1 lmc 0\n'
        '[1]\t"H-946dae0300000101"[1](946dae0300000101)\t\t# "gpu01 mlx5_0" lid 11 4xNDR\n'
        '[65]\t"H-0002c90300000a09"[1](2c90300000a09)\t\t# "Mellanox Technologies Aggregation Node" '
        "lid 90 4xNDR\n")
    res = resolve(parse_ibnetdiscover(text, "x"))
    assert [str(rl.b) for rl in res.links] == ["gpu01:mlx5_0"] and res.aggregation_links == 1
