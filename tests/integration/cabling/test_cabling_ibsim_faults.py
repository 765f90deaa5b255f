"""Every fault a technician makes or a fabric suffers, named with the fix, from what the real tools
print: ibnetdiscover alone, iblinkinfo alone, and both together.

Peer: ibsim 0.10 answering MADs for the plan's fabric as it is cabled (floor mistakes written into
its topology; cables pulled and switches powered off through its console while it runs), swept by
OpenSM 3.3 and read by infiniband-diags 44 (Debian 12). Plans are at HDR: ibsim 0.10 has no NDR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cabling.ibsim.netfile import BuiltFabric
from cabling.ibsim.simulator import Simulator
from cabling.manifest import dump_manifest, load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from tests.integration.cabling.ibsim_case import capture, fixes, kinds, need_stack, start, validate

# ibnetdiscover alone, iblinkinfo alone, ibnetdiscover with the ports that are down, and both whole.
USES = (("ibnetdiscover",), ("iblinkinfo",), ("ibnetdiscover", "iblinkinfo-d"), ("ibnetdiscover", "iblinkinfo"))
PLANS = {
    # 16 hosts x 8 HCAs, one scalable unit: 8 leaves (one per rail), 4 spines, 384 cables.
    "su1": PlanSpec(hosts=16, hcas=8, speed="HDR"),
    # radix 16: two scalable units, so every rail has two leaves; 8 spines, 256 cables.
    "su2": PlanSpec(hosts=16, hcas=8, radix=16, speed="HDR"),
    # radix 16 in three tiers: two pods (planes pod1, pod2) of 8 spines under 8 cores, 384 cables.
    "pods": PlanSpec(hosts=16, hcas=8, radix=16, tiers=3, speed="HDR"),
}


@dataclass
class Fault:
    """A fault: the plan, what was done on the floor (netfile) and live (console), what must be found."""

    plan: str
    floor: Callable[[BuiltFabric], object] | None
    live: Callable[[BuiltFabric, Simulator], object] | None
    check: Callable[[dict[str, Any], tuple[str, ...]], None]


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, Path]:
    need_stack()
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    for name, spec in PLANS.items():
        out[name] = folder / f"{name}.yaml"
        out[name].write_text(dump_manifest(plan_fat_tree(spec)))
    return out


def only(report: dict[str, Any], kind: str, n: int = 1) -> list[dict[str, Any]]:
    assert kinds(report) == {kind: n}, report["findings"][:4]
    return report["findings"]


def moved(report, use):
    (f,) = only(report, "moved")
    assert f["fix"] == "move the cable at gpu003 mlx5_0 from r005-l1 port 20 to r005-l1 port 3"


def swapped(report, use):
    only(report, "swapped")
    assert fixes(report)[0].startswith("swap the cables in r005-l1 ports 3 and 4 (")


def unplugged(report, use):
    # ibnetdiscover lists links only: the cable is missing; iblinkinfo also sees the port Polling.
    kind = "missing" if use == ("ibnetdiscover",) else "down"
    (f,) = only(report, kind)
    assert f["endpoints"] == ["gpu005:mlx5_1", "r005-l2:5"] and "cable C00021" in f["fix"]


def width_1x(report, use):
    (f,) = only(report, "degraded_width")
    assert f["data"] == {"found": "1x", "expected": "4x"} and "gpu004 mlx5_3 and r005-l4 port 4" in f["fix"]


def speed_edr(report, use):
    (f,) = only(report, "degraded_speed")
    assert f["data"] == {"found": "EDR", "expected": "HDR"} and "r005-l2 port 33 and r006-s1 port 9" in f["fix"]


def wrong_rail(report, use):
    (f,) = only(report, "moved")
    assert f["fix"] == "move the cable at gpu006 mlx5_2 from r005-l4 port 20 to r005-l3 port 6"
    assert f["data"]["wrong"] == "rail" and "wrong rail: r005-l4 is a rail-3 leaf" in f["message"]


def wrong_plane(report, use):
    (f,) = only(report, "swapped")
    assert f["data"]["wrong"] == "plane" and "wrong plane" in f["message"]
    assert set(f["data"]["ports"]) == {"r007-s1:1", "r008-s1:1"}


def leaf_absent(report, use):
    # One root cause naming the switch and what to check, its 48 cables under it (not 48 tasks).
    roots = [f for f in report["findings"] if f["kind"] == "device_down"]
    assert len(roots) == 1 and roots[0]["data"]["device"] == "r005-l8" and roots[0]["data"]["absent"]
    assert "check r005-l8's power first" in roots[0]["fix"]
    cables = [f for f in report["findings"] if f["kind"] in ("missing", "down")]
    assert len(cables) == 48 and all(f["data"]["cause"] == "switch r005-l8" for f in cables)
    assert report["findings"][0] is roots[0]
    expect = {"missing": 48} if use == ("ibnetdiscover",) else {"missing": 16, "down": 32}
    assert kinds(report) == {"device_down": 1, **expect}


def one_hca_down(report, use):
    # One HCA of a host is a cable-level finding, not a dark host.
    (f,) = only(report, "missing" if use == ("ibnetdiscover",) else "down")
    assert f["endpoints"] == ["gpu009:mlx5_4", "r005-l5:9"]


def host_off(report, use):
    roots = [f for f in report["findings"] if f["kind"] == "device_down"]
    assert [r["data"]["device"] for r in roots] == ["gpu011"] and roots[0]["data"]["absent"]
    assert "powered on" in roots[0]["fix"]
    assert sum(1 for f in report["findings"] if f["data"].get("cause") == "host gpu011") == 8


def flapped_back_not_active(report, use):
    # A port that went down and came back is Init until the subnet manager sweeps again:
    # ibnetdiscover shows the cable (it is there); iblinkinfo says it carries no traffic.
    if "iblinkinfo" not in use:
        assert report["findings"] == []
        return
    (f,) = only(report, "down")
    assert f["data"]["state"] == "initialize" and f["endpoints"] == ["gpu007:mlx5_0", "r005-l1:7"]


def default_description(report, use):
    # A switch still at its vendor description is named from its cables: one warning, cables checked.
    (f,) = only(report, "identity")
    assert f["severity"] == "warning" and report["exit_code"] == 0 and report["stats"]["matched_links"] == 384
    assert "r005-l5" in f["message"] and "MF0;r005-l5:QM9700" in f["fix"]


def rail_down(report, use):
    roots = [f for f in report["findings"] if f["kind"] in ("rail_down", "device_down")]
    assert [r["kind"] for r in roots] == ["rail_down", "device_down", "device_down"]
    rail = roots[0]
    assert rail["data"]["rail"] == "3" and sorted(rail["data"]["devices"]) == ["r003-l4", "r006-l4"]
    assert all(r["data"]["cause"] == "rail 3" for r in roots[1:])
    cables = [f for f in report["findings"] if f["kind"] in ("missing", "down")]
    assert len(cables) == 32 and {f["data"]["cause"] for f in cables} == {"switch r003-l4", "switch r006-l4"}


def plane_down(report, use):
    plane = [f for f in report["findings"] if f["kind"] == "plane_down"]
    assert len(plane) == 1 and plane[0]["data"]["plane"] == "pod2" and len(plane[0]["data"]["devices"]) == 8
    assert report["findings"][0] == plane[0]
    spines = [f for f in report["findings"] if f["kind"] == "device_down"]
    assert len(spines) == 8 and all(s["data"]["cause"] == "plane pod2" for s in spines)
    if use == ("ibnetdiscover",):
        # Without down ports, scalable unit 2 behind the dark spines is unreachable, not a root cause of
        # its own: its 8 leaves and 8 hosts are named as cut off, their cables under the plane.
        assert "16 device(s) behind it cannot be reached" in plane[0]["message"]
        assert kinds(report) == {"plane_down": 1, "device_down": 8, "missing": 192}
        assert all(f["data"]["cause"] for f in report["findings"][1:] if f["kind"] == "missing")


def _unlink_all(*node_ids: str) -> Callable[[BuiltFabric, Simulator], None]:
    def live(_b: BuiltFabric, sim: Simulator) -> None:
        for n in node_ids:
            sim.unlink(n)
    return live


def _flap(b: BuiltFabric, sim: Simulator) -> None:
    sim.unlink("r005-l1", 7)
    sim.relink("r005-l1", 7)


FAULTS = {
    "moved": Fault("su1", lambda b: b.move("gpu003:mlx5_0", "r005-l1:20"), None, moved),
    "swapped": Fault("su1", lambda b: b.swap("r005-l1:3", "r005-l1:4"), None, swapped),
    "unplugged": Fault("su1", None, lambda b, sim: sim.unlink("r005-l2", 5), unplugged),
    "1x-width": Fault("su1", lambda b: b.rate("gpu004:mlx5_3", width="1x"), None, width_1x),
    "lower-speed": Fault("su1", lambda b: b.rate("r005-l2:33", speed="EDR"), None, speed_edr),
    "wrong-rail": Fault("su1", lambda b: b.move("gpu006:mlx5_2", "r005-l4:20"), None, wrong_rail),
    "wrong-plane": Fault("pods", lambda b: b.swap("r007-s1:1", "r008-s1:1"), None, wrong_plane),
    "leaf-absent": Fault("su1", None, _unlink_all("r005-l8"), leaf_absent),
    "one-hca-down": Fault("su1", None, _unlink_all("gpu009/mlx5_4"), one_hca_down),
    "host-off": Fault("su1", None, _unlink_all(*(f"gpu011/mlx5_{k}" for k in range(8))), host_off),
    "flapped-back": Fault("su1", None, _flap, flapped_back_not_active),
    "default-description": Fault("su1", lambda b: b.describe("r005-l5", "Quantum Mellanox Technologies"), None,
                                 default_description),
    "rail-down": Fault("su2", None, _unlink_all("r003-l4", "r006-l4"), rail_down),
    "plane-down": Fault("pods", None, _unlink_all(*(f"r008-s{k}" for k in range(1, 9))), plane_down),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_is_named_with_its_fix_from_each_tool_and_both(plans, tmp_path, name):
    fault = FAULTS[name]
    built = BuiltFabric(load_manifest(plans[fault.plan]))
    if fault.floor is not None:
        fault.floor(built)
    with start(built, tmp_path / "sim") as sim:
        if fault.live is not None:
            fault.live(built, sim)
        out = capture(sim, tmp_path / "out", "ibnetdiscover", "iblinkinfo", "iblinkinfo-d")
    for use in USES:
        report = validate(plans[fault.plan], out, use, tmp_path / f"{'+'.join(use)}.json")
        try:
            fault.check(report, use)
        except AssertionError as exc:
            raise AssertionError(f"{name} from {' + '.join(use)}: {exc}") from None
