"""Real fabric dumps (and variations of their formats written here) that the cabling parsers once
read wrongly: each test names the behaviour it pins. Provenance: tests/fixtures/cabling/real/PROVENANCE.md."""

from __future__ import annotations

import pytest

from cabling.diff import validate
from cabling.discovery.ibnetdiscover import load_ibnetdiscover, parse_ibnetdiscover
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
