"""ibstat, IB counters and NVLink parsers on real recordings and synthetic cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.health.checks.fabric import fabric_ports
from provisioner.health.errors import ParseError
from provisioner.health.ib import counter_deltas, parse_counters, parse_ibstat
from provisioner.health.nvlink import parse_nvlink_errors, parse_nvlink_status
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
IBSTAT = ("ib", "ibstat-a100-h100-gpud")


def test_real_h100_ib_ports_all_active_at_400():
    ports = parse_ibstat(corpus_path(*IBSTAT, "ibstat.47.0.h100.some.down.0").read_text())
    assert len(ports) == 12
    fabric = fabric_ports(ports, "InfiniBand", 400)
    assert len(fabric) == 8 and all(p.active and p.rate == 400 for p in fabric)
    assert fabric[0].firmware == "28.39.1002" and fabric[0].ca_type == "MT4129"
    # The ConnectX-6 Dx Ethernet ports that are down are not compute-fabric ports.
    assert {p.name for p in ports if not p.active} == {"mlx5_2/1", "mlx5_7/1", "mlx5_8/1"}


def test_real_roce_host_with_two_fabric_ports_down():
    ports = parse_ibstat(corpus_path(*IBSTAT, "ibstat.47.0.h100.some.down.1").read_text())
    fabric = fabric_ports(ports, "Ethernet", 400)
    assert len(fabric) == 8  # the 400G ConnectX-7 ports, down ones included
    assert sorted(p.name for p in fabric if not p.active) == ["mlx5_11/1", "mlx5_5/1"]


def test_real_a100_host():
    ports = parse_ibstat(corpus_path(*IBSTAT, "ibstat.47.0.a100.all.active.0").read_text())
    assert ports and all(p.active for p in ports)


def test_synthetic_port_at_wrong_rate_is_not_counted_good():
    ports = parse_ibstat((FIX / "ibstat.ndr-one-port-200g.txt").read_text())
    assert [(p.name, p.rate) for p in ports] == [("mlx5_0/1", 400), ("mlx5_1/1", 200)]
    assert len(fabric_ports(ports, "InfiniBand", 400)) == 2


def test_ibstat_garbage_is_a_parse_error():
    with pytest.raises(ParseError, match="ibstat"):
        parse_ibstat("ibpanic: [12] main: stat of IB device 'mlx5_0' failed")


def test_counter_deltas():
    before = parse_counters((FIX / "ib-counters.0.txt").read_text())
    after = parse_counters((FIX / "ib-counters.1.txt").read_text())
    assert counter_deltas(before, after) == {"mlx5_0/1": {"symbol_error": 4},
                                             "mlx5_1/1": {"link_downed": 1}}


def test_real_nvlink_status_a100():
    status = parse_nvlink_status(corpus_path(
        "pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud", "nvidia-smi.nvlink.status.a100").read_text())
    assert len(status) == 8 and all(len(v) == 12 for v in status.values())
    assert all(ln.speed_gbs == 25.0 for v in status.values() for ln in v)


def test_synthetic_nvlink_inactive_and_errors():
    status = parse_nvlink_status((FIX / "nvlink-status.h100x2.one-inactive.txt").read_text())
    assert [(ln.gpu, ln.link) for v in status.values() for ln in v if ln.speed_gbs is None] == [(1, 1)]
    errs = parse_nvlink_errors((FIX / "nvlink-errors.1.txt").read_text())
    assert errs["gpu0/link1/CRC Errors"] == 9 and len(errs) == 6
