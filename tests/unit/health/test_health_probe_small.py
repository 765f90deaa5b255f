"""Smaller probe findings: ibstat's exit status, ASCII-only Xid codes, short Xid PCI addresses,
IB counters that went down or read garbage. Hostile lines are written here; the ibstat
recording is real (tests/fixtures/health/README.md)."""

from __future__ import annotations

from pathlib import Path

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations
from provisioner.health.ib import counter_deltas, parse_counters
from provisioner.health.model import Status
from provisioner.health.nvsmi import normalize_bus_id
from provisioner.health.xid import parse_kernel_log

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"


def test_ibstat_exit_255_after_8_active_cas_is_not_a_pass():
    text = (FIX / "ibstat.39.0.a100.ibpanic.exit-255.txt").read_text()
    expect = Expectations(ib_ports=8, ib_rate_gbps=200)
    res = {r.id: r for r in run_checks(Context(
        host="h1", sections={"ibstat": Section("ibstat", 255, text)}, expect=expect))}
    r = res["ib.ports"]
    assert r.status is Status.ERROR and "exited 255" in r.summary
    assert any("ibpanic" in e for e in r.evidence)
    ok = {r.id: r for r in run_checks(Context(
        host="h1", sections={"ibstat": Section("ibstat", 0, text)}, expect=expect))}
    assert ok["ib.ports"].status is Status.PASS


def test_xid_codes_are_ascii_digits_only():
    line = "NVRM: Xid (PCI:0000:9a:00): \u0667\u0669, pid=1, GPU has fallen off the bus."
    assert parse_kernel_log([line]) == []
    assert parse_kernel_log([line.replace("\u0667\u0669", "79")])[0].code == 79


def test_short_xid_pci_address_maps_to_the_gpu():
    events = parse_kernel_log(["NVRM: Xid (PCI:0000:9a): 79, pid=1, GPU has fallen off the bus."])
    assert events[0].bus_id == "0000:9a:00.0"
    assert normalize_bus_id("9a:00.0") == "0000:9a:00.0"  # lspci without -D, unchanged


def test_counter_going_down_or_reading_garbage_is_not_a_link_error():
    before = parse_counters("mlx5_0/1 link_downed 5\nmlx5_1/1 link_downed 0\nmlx5_2/1 symbol_error 3\n")
    after = parse_counters("mlx5_0/1 link_downed 0\nmlx5_1/1 link_downed 18446744073709551615\n"
                           "mlx5_2/1 symbol_error 4\n")
    assert counter_deltas(before, after) == {"mlx5_2/1": {"symbol_error": 1}}


def test_counters_with_non_ascii_digits_are_not_read():
    assert parse_counters("mlx5_0/1 link_downed \u0667\n") == {}


def test_non_ascii_digits_are_no_numbers_in_any_parser():
    # Written here: ARABIC-INDIC THREE and FULLWIDTH ONE/SIX match \d in Python.
    from provisioner.health.nvlink import parse_nvlink_status
    from provisioner.health.pcie import parse_lspci

    lspci = ("19:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n"
             "\t\tLnkSta:\tSpeed \u06632GT/s, Width x\uff11\uff16\n")
    (dev,) = parse_lspci(lspci)
    assert dev.sta.width is None and dev.sta.speed is None
    assert parse_nvlink_status("GPU \u0663: NVIDIA H100 (UUID: GPU-1)\n\t Link \u0663: 26.562 GB/s\n") == {}
