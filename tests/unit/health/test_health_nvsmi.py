"""nvidia-smi -q parser on real recordings (corpus) and on our own synthetic bad GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.health.errors import ParseError
from provisioner.health.nvsmi import normalize_bus_id, parse_nvsmi
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
NVSMI = ("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud")


def test_real_8x_h100_is_healthy():
    rep = parse_nvsmi(corpus_path(*NVSMI, "nvidia-smi-query.535.161.08.out.0.valid").read_text())
    assert rep.attached == 8 and len(rep.gpus) == 8 and not rep.truncated
    assert rep.driver_version == "535.161.08"
    g = rep.gpus[0]
    assert g.bus_id == "0000:19:00.0" and g.serial == "1650124031592" and g.module_id == 2
    assert all(x.product == "NVIDIA H100 80GB HBM3" for x in rep.gpus)
    assert all(x.ecc_current and x.uncorrectable_volatile == 0 for x in rep.gpus)
    assert all(x.remap_failure is False and x.remap_pending is False for x in rep.gpus)
    assert (g.pcie_gen_current, g.width_current) == (5, 16)
    # This real host had its power-brake signal asserted: a genuine throttle reason.
    assert "HW Power Brake Slowdown" in g.throttle_active


def test_real_truncated_output_is_detected():
    rep = parse_nvsmi(corpus_path(*NVSMI, "nvidia-smi-query.535.183.01.out.0.invalid").read_text())
    assert rep.attached == 8 and len(rep.gpus) == 1 and rep.truncated


def test_real_a10_with_pending_row_remap():
    rep = parse_nvsmi(corpus_path(*NVSMI, "nvidia-smi-query.535.129.03.out.0.valid.a10").read_text())
    (g,) = rep.gpus
    assert g.remap_pending is True and g.remap_uncorrectable == 4 and g.remap_failure is False


def test_real_titan_v_has_no_row_remapper_and_older_ecc_layout():
    rep = parse_nvsmi(corpus_path(*NVSMI, "nvidia-smi-query.560.35.03.out.0.valid").read_text())
    (g,) = rep.gpus
    assert g.remap_pending is None and g.ecc_current is None
    assert (g.pcie_gen_current, g.pcie_gen_max) == (1, 3)  # idle downclock


def test_real_consumer_gpus_have_ecc_off():
    rep = parse_nvsmi(corpus_path(*NVSMI, "nvidia-smi-query.535.154.05.out.0.valid").read_text())
    assert len(rep.gpus) == 8 and all(g.ecc_current is False for g in rep.gpus)


def test_synthetic_bad_gpu():
    rep = parse_nvsmi((FIX / "nvidia-smi-q.h100x2.one-bad.txt").read_text())
    good, bad = rep.gpus
    assert good.label() == "GPU at PCI 0000:18:00.0 module 1 serial 1654922006536"
    assert bad.bus_id == "0000:2a:00.0"
    assert bad.remap_failure and bad.remap_pending and bad.reset_required
    assert bad.uncorrectable_volatile == 2 and bad.ecc_current is False and bad.ecc_pending
    assert "HW Thermal Slowdown" in bad.throttle_active and good.utilization_pct == 97


def test_not_nvidia_smi_output_is_a_parse_error():
    with pytest.raises(ParseError, match="Attached GPUs"):
        parse_nvsmi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


@pytest.mark.parametrize(
    ("raw", "want"),
    [("00000000:19:00.0", "0000:19:00.0"), ("PCI:0000:9b:00", "0000:9b:00.0"),
     ("1a:00.0", "0000:1a:00.0"), ("0000:3B:00.1", "0000:3b:00.1")],
)
def test_bus_ids_normalize(raw, want):
    assert normalize_bus_id(raw) == want


H800 = ("pcie-gpu", "nvidia-smi-q-nvlink-topo-h800x8-llm-action")


def test_real_525_driver_spells_ecc_mode_ecc_and_its_ecc_off_is_read():
    """Drivers up to 525 print "Ecc Mode"; 535+ print "ECC Mode": both are the same field."""
    rep = parse_nvsmi(corpus_path(*H800, "nvidia-smi-q-i0.525.105.17.h800").read_text())
    assert rep.driver_version == "525.105.17" and rep.attached == 8 and len(rep.gpus) == 1
    (g,) = rep.gpus
    assert g.product == "NVIDIA H800" and g.module_id == 5 and g.serial == "1651323018291"
    assert g.ecc_current is False and g.ecc_pending is False
    assert (g.pcie_gen_current, g.pcie_gen_max, g.width_current, g.width_max) == (5, 5, 16, 16)
    assert g.fabric_state == "Completed" and g.remap_failure is False
    assert g.throttle_active == ["Idle"]  # "Clocks Throttle Reasons" on 525


@pytest.mark.parametrize("spelling", ["ECC Mode", "Ecc Mode", "ecc  mode"])
def test_ecc_mode_spellings_are_one_field(spelling):
    text = FIX.parent.joinpath("health", "nvidia-smi-q.525.h800.ecc-on.txt").read_text()
    rep = parse_nvsmi(text.replace("    Ecc Mode\n", f"    {spelling}\n"))
    assert rep.gpus[0].ecc_current is True and rep.gpus[0].uncorrectable_volatile == 0
