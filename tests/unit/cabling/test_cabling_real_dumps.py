"""Real fabric dumps (and variations of their formats written here) that the cabling parsers once
read wrongly: each test names the behaviour it pins. Provenance: tests/fixtures/cabling/real/PROVENANCE.md."""

from __future__ import annotations

import pytest

from cabling.diff import validate
from cabling.discovery.ibnetdiscover import load_ibnetdiscover, parse_ibnetdiscover
from cabling.errors import CablingInputError
from cabling.manifest import parse_manifest
from cabling.resolve import resolve
from cabling.speeds import parse_ibnet_rate

# Written here, in the form of the loginoff/infiniband_topology recording: one SX6036 leaf with two
# hosts. {r1} and {r2} are the rates the leaf prints for its two host ports.
_LEAF = (
    "vendid=0x2c9\ndevid=0xc738\nsysimgguid=0xf4521403001165a0\n"
    "switchguid=0xf4521403001165a0(f4521403001165a0)\n"
    'Switch\t36 "S-f4521403001165a0"\t\t# "MF0;ib5:SX6036/U1" enhanced port 0 lid 104 lmc 0\n'
    '[1]\t"H-24be05ffff980030"[1](24be05ffff980031) \t\t# "stage114 mlx4_0" lid 105 {r1}\n'
    '[2]\t"H-24be05ffff982d50"[1](24be05ffff982d51) \t\t# "stage112 mlx4_0" lid 113 {r2}\n'
)
_PLAN = """version: 1
fabric: {{name: t, speed: QDR, width: 4x}}
devices:
  - {{name: ib5, kind: switch, ports: 36, guid: "0xf4521403001165a0"}}
  - {{name: stage114, kind: host, hcas: [mlx4_0]}}
  - {{name: stage112, kind: host, hcas: [mlx4_0]}}
links:
  - {{a: "stage114:mlx4_0", b: "ib5:1"}}
  - {{a: "stage112:mlx4_0", b: "ib5:2"}}
"""


def _validate(text: str):
    plan = parse_manifest(_PLAN.format(), "plan.yaml")
    return validate(plan, resolve(parse_ibnetdiscover(text, "fabric.txt"), plan))


@pytest.mark.parametrize(("text", "expected"), [
    ("2x???", ("2x", None)), ("4x???", ("4x", None)), ("??HDR", (None, "HDR")), ("4xNDR", ("4x", "NDR")),
    ("?????", None), ("junk", None),
])
def test_unknown_speed_keeps_the_width(text, expected):
    # rdma-core's dump_linkspeedext_compat prints "???" for an extended speed an older build does not know.
    assert parse_ibnet_rate(text) == expected


def test_half_width_link_with_unknown_speed_is_degraded():
    report = _validate(_LEAF.format(r1="2x???", r2="4x???"))
    kinds = [(f.kind, f.data.get("found")) for f in report.findings]
    assert kinds == [("degraded_width", "2x")]


def test_two_ends_disagreeing_keep_the_lower_rate(fixtures):
    # junousi 1.topo: ISR9024 port 10 says 4xSDR, its far end SW-6IB4 port 1 says 1xSDR (line 26); the
    # ISR9024 port 12 says 4xSDR, the HCA at its far end 1xSDR (line 52).
    fab = load_ibnetdiscover(fixtures / "real" / "junousi-ibtopotool-1.topo")
    widths = {frozenset(((lk.a_guid, lk.a_port), (lk.b_guid, lk.b_port))): lk.width for lk in fab.links}
    assert widths[frozenset((("005442ba00003080", 10), ("0008f10400410015", 1)))] == "1x"
    assert widths[frozenset((("005442ba00003080", 12), ("0008f10403960558", 1)))] == "1x"
    assert sorted(widths.values()) == ["1x", "1x", "4x", "4x", "4x", "4x", "4x"]


def test_lower_rate_of_the_far_end_line_is_kept_whichever_end_comes_first():
    far = ('\nvendid=0x2c9\ncaguid=0x24be05ffff980030\nCa\t2 "H-24be05ffff980030"\t\t# "stage114 mlx4_0"\n'
           '[1](24be05ffff980031) \t"S-f4521403001165a0"[1]\t\t# lid 105 lmc 0 "MF0;ib5:SX6036/U1" lid 104 {r}\n')
    for leaf_rate, ca_rate in (("4xQDR", "1xDDR"), ("1xDDR", "4xQDR")):
        fab = parse_ibnetdiscover(_LEAF.format(r1=leaf_rate, r2="4xQDR") + far.format(r=ca_rate), "x")
        lk = next(lk for lk in fab.links if lk.b_guid == "24be05ffff980030")
        assert (lk.width, lk.speed) == ("1x", "DDR")


def _cli(*args: str):
    from typer.testing import CliRunner

    from provisioner.cli.main import app

    return CliRunner().invoke(app, ["cabling", *args])


def test_ibnetdiscover_saved_as_topo_is_read(fixtures, tmp_path):
    r = _cli("import", "--ibnetdiscover", str(fixtures / "real" / "junousi-ibtopotool-1.topo"), "--json")
    assert r.exit_code == 0, r.output
    assert '"sharp_aggregation_links": 0' in r.stdout and r.stdout.count('"a_guid"') == 7
    # A real ibdm .topo is still refused by name.
    ibdm = tmp_path / "fabric.topo"
    ibdm.write_text("SX6036 sw1\n   P1 -4x-14G-> MT4099 h1 P1\n")
    r = _cli("import", "--ibnetdiscover", str(ibdm))
    assert r.exit_code == 2 and "ibdm topology" in r.output


def test_grouping_and_full_info_options_are_read():
    # Written here in the forms rdma-core's out_switch_port prints: '-g' adds "[ext N]" after a port
    # number, '-f' adds " s=.. w=.. v=.." at the end of the line.
    plain = parse_ibnetdiscover(_LEAF.format(r1="4xQDR", r2="4xQDR"), "plain.txt")
    grouped = _LEAF.format(r1="4xQDR", r2="4xQDR").replace("[1]\t", "[1][ext 1]\t").replace(
        "[2]\t", "[2][ext 2]\t")
    full = _LEAF.format(r1="4xQDR s=4 w=2 v=3", r2="4xQDR s=4 w=2 v=3")
    for text in (grouped, full):
        fab = parse_ibnetdiscover(text, "x.txt")
        assert [(lk.a_port, lk.b_guid, lk.width, lk.speed) for lk in fab.links] == \
            [(lk.a_port, lk.b_guid, lk.width, lk.speed) for lk in plain.links]


def test_ports_report_is_refused_with_the_right_advice(fixtures):
    r = _cli("import", "--ibnetdiscover", str(fixtures / "real" / "sckyzo-infiniband-exporter-ibnetdiscover-p.out"))
    assert r.exit_code == 2 and "'ibnetdiscover -p' ports report" in r.output
    assert "-g' for GUIDs" not in r.output and "plain, -g or -f" in r.output


def test_not_ibnetdiscover_hint_does_not_call_grouping_guids():
    with pytest.raises(CablingInputError) as exc:
        parse_ibnetdiscover("hello\n", "x.txt")
    assert "for GUIDs" not in str(exc.value)


def test_file_cut_inside_a_node_header_is_an_error_naming_the_line():
    text = _LEAF.format(r1="4xQDR", r2="4xQDR") + '\nvendid=0x2c9\nSwitch\t36 "S-f45214030011'
    with pytest.raises(CablingInputError) as exc:
        parse_ibnetdiscover(text, "cut.txt")
    assert exc.value.file == "cut.txt" and exc.value.line == 10 and "node header" in exc.value.message


def test_guid_of_more_than_64_bits_is_refused_at_import():
    text = _LEAF.format(r1="4xQDR", r2="4xQDR").replace('"H-24be05ffff982d50"', '"H-124be05ffff982d50"')
    with pytest.raises(CablingInputError) as exc:
        parse_ibnetdiscover(text, "g.txt")
    assert (exc.value.file, exc.value.line) == ("g.txt", 7) and "124be05ffff982d50" in exc.value.message
    header = _LEAF.format(r1="4xQDR", r2="4xQDR").replace('"S-f4521403001165a0"', '"S-1f4521403001165a0"')
    with pytest.raises(CablingInputError) as exc:
        parse_ibnetdiscover(header, "g.txt")
    assert exc.value.line == 5


# Written here in the form of a real 'iblinkinfo --switches-only' of a QM8700 HDR switch: the SHARP
# Aggregation Node (a CA inside the switch) appears only as the peer of port 41.
_SWITCHES_ONLY = (
    "Switch: 0x0c42a103008982a4 MF0;qm1:MQM8700/U1:\n"
    '           3    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>      20    1[  ] "cu07 HCA-1" ( )\n'
    '           3    2[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>       2    1[  ] "cu03 HCA-1" ( )\n'
    '           3    5[  ] ==(                Down/ Polling)==>             [  ] "" ( )\n'
    "           3   41[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>       4    1[  ] "
    '"Mellanox Technologies Aggregation Node" ( )\n'
)
_HDR_PLAN = """version: 1
fabric: {name: t, speed: HDR, width: 4x}
devices:
  - {name: qm1, kind: switch, ports: 41}
  - {name: cu07, kind: host, hcas: [HCA-1]}
  - {name: cu03, kind: host, hcas: [HCA-1]}
links:
  - {a: "cu07:HCA-1", b: "qm1:1"}
  - {a: "cu03:HCA-1", b: "qm1:2"}
"""


@pytest.mark.parametrize("text", [
    _SWITCHES_ONLY,
    # 'iblinkinfo | grep Up': no header, the switch known by its LID
    "\n".join(line for line in _SWITCHES_ONLY.splitlines() if "LinkUp" in line) + "\n",
])
def test_sharp_aggregation_node_seen_only_as_a_peer_is_not_a_switch(text):
    from cabling.asbuilt import as_built
    from cabling.discovery.iblinkinfo import parse_iblinkinfo
    from cabling.slurm import slurm_topology

    fab = parse_iblinkinfo(text, "sw.txt")
    res = resolve(fab)
    assert res.aggregation_links == 1 and len(res.links) == 2
    if "Switch:" in text:
        plan = parse_manifest(_HDR_PLAN, "plan.yaml")
        report = validate(plan, resolve(fab, plan))
        assert report.findings == [], [f.message for f in report.findings]
        built = as_built(fab)
        assert all("Aggregation" not in d.name for d in built.devices)
        assert "Aggregation" not in slurm_topology(built)


@pytest.mark.parametrize("desc", [
    "Quantum Mellanox Technologies", "SwitchIB Mellanox Technologies", "Infiniscale-IV Mellanox Technologies",
    "ISR9024 Voltaire", "Sun DCS 36 QDR switch localhost",  # the last: junousi ibtopotool tests/4.topo
])
def test_unique_vendor_default_switch_description_falls_back_to_its_guid(desc):
    from cabling.asbuilt import as_built
    from cabling.slurm import slurm_topology

    text = _LEAF.format(r1="4xQDR", r2="4xQDR").replace("MF0;ib5:SX6036/U1", desc)
    built = as_built(parse_ibnetdiscover(text, "x.txt"))
    assert {d.name for d in built.devices if d.kind == "switch"} == {"S-f4521403001165a0"}
    assert "SwitchName=S-f4521403001165a0 Nodes=stage[112,114]" in slurm_topology(built)


def test_configured_switch_name_is_kept():
    fab = parse_ibnetdiscover(_LEAF.format(r1="4xQDR", r2="4xQDR"), "x.txt")
    assert resolve(fab).names["f4521403001165a0"].device == "ib5"


@pytest.mark.parametrize("desc", ["nvidia-leaf01", "voltaire_core1"])
def test_a_host_name_holding_a_vendor_word_is_a_name(desc):
    text = _LEAF.format(r1="4xQDR", r2="4xQDR").replace("MF0;ib5:SX6036/U1", desc)
    assert resolve(parse_ibnetdiscover(text, "x.txt")).names["f4521403001165a0"].device == desc


@pytest.mark.parametrize("name", ["core sw", "sw=1", "a,b", "sw#1", "sw[1]"])
def test_slurm_topology_refuses_a_name_slurm_cannot_read(name):
    from cabling.slurm import slurm_topology

    plan = parse_manifest(
        f'version: 1\ndevices:\n  - {{name: h1, kind: host, hcas: [mlx5_0]}}\n  - {{name: "{name}", kind: switch}}\n'
        f'links:\n  - {{a: "h1:mlx5_0", b: "{name}:1"}}\n', "plan.yaml")
    with pytest.raises(CablingInputError) as exc:
        slurm_topology(plan)
    assert (exc.value.file, exc.value.line) == ("plan.yaml", 4) and repr(name) in exc.value.message


def test_node_name_map_follows_rdma_core():
    # Written here to the grammar of rdma-core util/node_name_map.c (parse_node_map_wrap, map_name).
    from cabling.discovery.nodemap import parse_node_name_map

    text = ('0xf4521403001165a0 "ib5-renamed"   # leaf in row 3\n'
            "0xf4521403001167a0 ib6-renamed\n"
            '0xf4521403001166a0 "ib4-first"\n'
            '0xf4521403001166a0 "ib4-second"\n'
            '0x24be05ffff980030 "stage114 mlx4_0"  #host\n')
    warnings: list[str] = []
    names = parse_node_name_map(text, "m.map", warnings)
    assert names == {"f4521403001165a0": "ib5-renamed", "f4521403001167a0": "ib6-renamed",
                     "f4521403001166a0": "ib4-first", "24be05ffff980030": "stage114 mlx4_0"}
    assert len(warnings) == 1 and warnings[0].startswith("m.map:4:") and "'ib4-first'" in warnings[0]


def test_node_name_map_with_a_byte_order_mark(tmp_path):
    from cabling.discovery.nodemap import load_node_name_map

    path = tmp_path / "bom.map"
    path.write_bytes(b'\xef\xbb\xbf0xf4521403001165a0 "ib5-bom"\r\n0xf4521403001167a0 "ib6"\r\n')
    assert load_node_name_map(path) == {"f4521403001165a0": "ib5-bom", "f4521403001167a0": "ib6"}
    topo = tmp_path / "bom.txt"
    topo.write_bytes(b"\xef\xbb\xbf" + _LEAF.format(r1="4xQDR", r2="4xQDR").split("\n", 4)[4].encode())
    assert len(load_ibnetdiscover(topo).links) == 2


def test_import_warns_of_a_guid_named_twice(tmp_path):
    nnm = tmp_path / "m.map"
    nnm.write_text('0xf4521403001165a0 "first"\n0xf4521403001165a0 "second"\n')
    topo = tmp_path / "t.txt"
    topo.write_text(_LEAF.format(r1="4xQDR", r2="4xQDR"))
    r = _cli("import", "--ibnetdiscover", str(topo), "--node-name-map", str(nnm), "-o", str(tmp_path / "a.yaml"))
    assert r.exit_code == 0 and "m.map:2: GUID 0xf4521403001165a0 is named again" in r.output
    assert "name: first" in (tmp_path / "a.yaml").read_text()


_PORT_LINE = ("           3    1[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>  {peer}  20    1[  ] "
              '"cu07 HCA-1" ( )\n')


@pytest.mark.parametrize(("text", "line"), [
    ("Switch: 0x10c42a103008982a4 MF0;qm1:MQM8700/U1:\n" + _PORT_LINE.format(peer="0x946dae0300000101"), 1),
    ("Switch: 0x0c42a103008982a4 MF0;qm1:MQM8700/U1:\n" + _PORT_LINE.format(peer="0x1946dae0300000101"), 2),
])
def test_iblinkinfo_guid_of_more_than_64_bits_is_refused(text, line):
    from cabling.discovery.iblinkinfo import parse_iblinkinfo

    assert len(parse_iblinkinfo(text.replace("0x1", "0x"), "l.txt").links) == 1  # the 16-digit form reads
    with pytest.raises(CablingInputError) as exc:
        parse_iblinkinfo(text, "l.txt")
    assert (exc.value.file, exc.value.line) == ("l.txt", line)
