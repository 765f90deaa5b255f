"""The address plan: deterministic, collision-free, reserved ranges honoured, insertion-stable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from netaddr import IPAddress, IPNetwork

from provisioner.inventory import load_site
from provisioner.inventory.addressing import PlanError, build_pool, parse_range
from tests.support.site_files import EXAMPLE

REPO = Path(__file__).resolve().parents[3]


def plan(path: Path | str) -> dict[str, dict[str, str]]:
    return {h.name: {k: str(v) for k, v in h.addresses.items()} for h in load_site(path).hosts}


PLAN_IN_A_PROCESS = (
    "import json, sys\n"
    "from provisioner.inventory import load_site\n"
    "json.dump({h.name: {k: str(v) for k, v in h.addresses.items()}"
    " for h in load_site('example').hosts}, sys.stdout)\n"
)


@pytest.mark.parametrize("hash_seed", ["0", "1", "4242"])
def test_plan_is_stable_across_runs(hash_seed: str) -> None:
    """Each run of `provision` is a new process with its own string-hash seed: the plan must
    not depend on it (no set or dict order of strings decides an address)."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", PLAN_IN_A_PROCESS], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert json.loads(out) == plan("example")


def test_plan_is_collision_free_and_outside_reserved() -> None:
    site = load_site("example")
    for net_name, net in site.networks.items():
        addrs = [h.addresses[net_name] for h in site.hosts]
        assert len(set(addrs)) == len(addrs)
        reserved = [parse_range(r) for r in net.reserved]
        for a in addrs:
            assert a in net.cidr
            assert a != net.gateway
            assert not any(a in r for r in reserved)


def test_inserting_a_host_renumbers_nobody(tmp_path: Path) -> None:
    before = plan("example")
    text = EXAMPLE.read_text().replace("      - u: 5\n", "      - u: 5\n      - u: 37\n", 1)
    (tmp_path / "site.yml").write_text(text)
    after = plan(tmp_path / "site.yml")
    assert set(after) - set(before) == {"gpu-r01-u37"}
    for name, addrs in before.items():
        assert after[name] == addrs, name


def test_adding_a_rack_renumbers_nobody(tmp_path: Path) -> None:
    before = plan("example")
    extra = (
        "  - name: r00\n    index: 3\n    host_name_template: \"gpu-{rack}-u{u:02d}\"\n"
        "    defaults: {profile: hgx-h100, bmc: {vendor: dell, credentials: idrac}}\n"
        "    hosts:\n      - u: 3\n"
    )
    text = EXAMPLE.read_text().replace("racks:\n", "racks:\n" + extra, 1)
    (tmp_path / "site.yml").write_text(text)
    after = plan(tmp_path / "site.yml")
    for name, addrs in before.items():
        assert after[name] == addrs, name
    assert after["gpu-r00-u03"]["provisioning"] not in {a["provisioning"] for a in before.values()}


def test_slot_arithmetic() -> None:
    site = load_site("example")
    h = site.host("gpu-r02-u33")
    # pool starts after the reserved .1-.63 (and the network address): U1 of rack 1 = .64
    # rack 2, U33: slot 64 + 32 = 96 -> 10.10.0.64 + 96
    assert h.addresses["provisioning"] == IPAddress("10.10.0.160")


def test_pool_skips_reserved_ranges_and_gateway() -> None:
    pool = build_pool(IPNetwork("10.0.0.0/28"), IPAddress("10.0.0.1"), ["10.0.0.4-10.0.0.6"])
    assert [str(pool.nth(i)) for i in range(pool.size)] == [
        "10.0.0.2",
        "10.0.0.3",
        "10.0.0.7",
        "10.0.0.8",
        "10.0.0.9",
        "10.0.0.10",
        "10.0.0.11",
        "10.0.0.12",
        "10.0.0.13",
        "10.0.0.14",
    ]
    with pytest.raises(IndexError):
        pool.nth(10)


def test_reserved_outside_network_is_refused() -> None:
    with pytest.raises(PlanError, match="not inside"):
        build_pool(IPNetwork("10.0.0.0/28"), None, ["10.0.1.0/30"])
    with pytest.raises(PlanError, match="is not an address"):
        parse_range("10.0.0.300")
