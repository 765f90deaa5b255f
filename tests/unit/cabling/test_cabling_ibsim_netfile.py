"""The simulator's topology file written from a plan (the tests' ibsim peer reads it)."""

from __future__ import annotations

import pytest

from cabling.errors import CablingInputError
from cabling.ibsim.netfile import BuiltFabric, GuidLayout
from cabling.manifest import parse_manifest

PLAN = """version: 1
fabric: {speed: HDR, width: 4x}
devices:
  - {name: h1, kind: host, hcas: [mlx5_0, mlx5_1], hca_guids: {mlx5_0: "0x946dae0300000101"}}
  - {name: h2, kind: host, hcas: [mlx5_0, mlx5_1]}
  - {name: l0, kind: switch, role: leaf, rail: 0, ports: 8, model: QM8790, guid: "0x0002c90300000a01"}
  - {name: l1, kind: switch, role: leaf, rail: 1, ports: 8}
links:
  - {a: "h1:mlx5_0", b: "l0:1"}
  - {a: "h2:mlx5_0", b: "l0:2"}
  - {a: "h1:mlx5_1", b: "l1:1"}
  - {a: "h2:mlx5_1", b: "l1:2"}
  - {a: "l0:8", b: "l1:8"}
"""


def built(layout: GuidLayout | None = None) -> BuiltFabric:
    return BuiltFabric(parse_manifest(PLAN, "plan.yaml"), layout)


def test_netfile_carries_the_plans_guids_descriptions_and_rates():
    text = built().netfile()
    assert 'switchguid=0x0002c90300000a01\nSwitch\t8 "l0"\t\t# "MF0;l0:QM8790/U1" enhanced port 0' in text
    assert 'caguid=0x946dae0300000101\nCa\t1 "h1/mlx5_0"\t\t# "h1 mlx5_0"' in text
    assert '[1]\t"h1/mlx5_0"[1]\t\t# "h1 mlx5_0" lid 0 4xHDR' in text
    assert '[8]\t"l1"[8]\t\t# "MF0;l1:MQM8790/U1" lid 0 4xHDR' in text


def test_floor_mistakes_change_the_cabling_as_built():
    b = built()
    b.swap("l0:1", "l0:2")
    b.move("h2:mlx5_1", "l1:5")
    b.rate("l0:8", width="1x", speed="EDR")
    b.describe("l1", "Quantum Mellanox Technologies")
    text = b.netfile()
    assert '[1]\t"h2/mlx5_0"[1]' in text and '[2]\t"h1/mlx5_0"[1]' in text
    assert '[5]\t"h2/mlx5_1"[1]' in text and '[2]\t"h2/mlx5_1"' not in text
    assert text.count("lid 0 1xEDR") == 2  # both ends of the cable: a link trains at what both allow
    assert '# "Quantum Mellanox Technologies" enhanced port 0' in text
    with pytest.raises(CablingInputError, match="already holds a cable"):
        b.move("h1:mlx5_1", "l1:5")


def test_hcas_of_a_host_can_share_a_system_image_guid():
    b = built(GuidLayout(host_sysimg=True))
    assert b.sysimg_guid("h1", "mlx5_0") == b.sysimg_guid("h1", "mlx5_1") != b.sysimg_guid("h2", "mlx5_0")
    assert b.netfile().count(f"sysimgguid=0x{b.sysimg_guid('h1', 'mlx5_0')}") == 2
    assert b.port_guid("h1", "mlx5_0") == "946dae0300000102"


def test_a_speed_ibsim_cannot_simulate_is_refused_naming_the_fix():
    with pytest.raises(CablingInputError, match="--speed HDR"):
        BuiltFabric(parse_manifest(PLAN.replace("HDR", "NDR"), "plan.yaml")).netfile()
