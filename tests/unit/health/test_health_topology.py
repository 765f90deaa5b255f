"""nvidia-smi topo -m parsing, NVLink expectations and the host topology manifest on real hosts.

Real recordings: the 8x H800 host (driver 525, 4 NICs) and the 8x A100 host with 10 NICs; the
8x H100 host's nvidia-smi -q / lspci -vvv / ibstat (gpud). Files under tests/fixtures/health
are written by the project (see its README). Deviations are injected into copies of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.exceptions import InventoryError
from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.errors import ParseError
from provisioner.health.manifest import capture, compare, dump_manifest, load_manifest
from provisioner.health.model import RemedyKind, Status
from provisioner.health.nvlink import nvlink_spec
from provisioner.health.topo import parse_topo
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
H800 = ("pcie-gpu", "nvidia-smi-q-nvlink-topo-h800x8-llm-action")
A100 = ("pcie-gpu", "topo-m-a100x8-10nic-gpu-compress-decompress", "topo-m.525.105.17.a100-sxm-40g.10nic")
H100 = ("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud")


def secs(**texts: str) -> dict[str, Section]:
    return {k: Section(k, 0, v) for k, v in texts.items()}


def run(sections, expect):
    return {r.id: r for r in run_checks(Context(host="h1", sections=sections, expect=expect))}


# --- topo -m -------------------------------------------------------------------------------

def test_real_h800_topo_nearest_nic_numa_and_nvlinks():
    t = parse_topo(corpus_path(*H800, "topo-m.525.105.17.h800").read_text())
    assert t.gpus == [f"GPU{i}" for i in range(8)] and t.nics == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert t.nic_devices["NIC3"] == "mlx5_3"
    assert t.nearest_nics("GPU1") == ("PIX", ["mlx5_0"])
    assert t.nearest_nics("GPU0") == ("NODE", ["mlx5_0", "mlx5_1"])
    assert t.nearest_nics("GPU7") == ("PIX", ["mlx5_2", "mlx5_3"])
    assert t.numa_affinity == {f"GPU{i}": (i // 4,) for i in range(8)}
    assert t.cpu_affinity["GPU4"] == "32-63,96-127" and t.nvlinks("GPU0", "GPU5") == 8


def test_real_terminal_truncated_topo_gives_the_same_placement():
    full = parse_topo(corpus_path(*H800, "topo-m.525.105.17.h800").read_text())
    cut = parse_topo(corpus_path(*H800, "topo-m.truncated-columns.h800").read_text())
    assert [cut.nearest_nics(g) for g in cut.gpus] == [full.nearest_nics(g) for g in full.gpus]
    assert cut.numa_affinity == full.numa_affinity


def test_real_a100_with_ten_nics():
    t = parse_topo(corpus_path(*A100).read_text())
    assert len(t.nics) == 10 and t.nic_devices["NIC9"] == "mlx5_9"
    assert t.nearest_nics("GPU6") == ("PXB", ["mlx5_6", "mlx5_7"])
    assert t.numa_affinity["GPU4"] == (7,) and t.nvlinks("GPU3", "GPU4") == 12


def test_written_535_layout_with_ansi_header_and_gpu_numa_id_column():
    t = parse_topo((FIX / "topo-m.535.h100x8-10nic.txt").read_text())
    assert len(t.gpus) == 8 and len(t.nics) == 10 and t.nic_devices["NIC8"] == "mlx5_bond_0"
    assert [t.nearest_nics(g)[0] for g in t.gpus] == ["PIX"] * 8
    assert t.numa_affinity["GPU5"] == (1,) and t.cpu_affinity["GPU0"] == "0-55,112-167"


def test_old_driver_names_nic_columns_by_device_and_empty_cpu_affinity():
    # Written: a pre-470 layout (no NIC Legend, columns named mlx5_N) with an empty CPU cell.
    text = ("\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV12\tPIX\tSYS\t\t0\n"
            "GPU1\tNV12\t X \tSYS\tPIX\t\t1\n"
            "mlx5_0\tPIX\tSYS\t X \tSYS\t\t\n"
            "mlx5_1\tSYS\tPIX\tSYS\t X \t\t\n")
    t = parse_topo(text)
    assert t.nearest_nics("GPU1") == ("PIX", ["mlx5_1"])
    assert t.cpu_affinity["GPU0"] is None and t.numa_affinity["GPU1"] == (1,)


def test_not_topo_output_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")


# --- NVLink against the model table ----------------------------------------------------------

def test_model_table():
    assert nvlink_spec("NVIDIA H800").links == 8
    assert nvlink_spec("NVIDIA H100 80GB HBM3").links == 18
    assert nvlink_spec("NVIDIA A100-SXM4-80GB").speed_gbs == 25.0
    assert nvlink_spec("NVIDIA H100 PCIe") is None
    assert nvlink_spec("NVIDIA H200 NVL") is None and nvlink_spec("NVIDIA H200").links == 18
    assert nvlink_spec("NVIDIA H800 PCIe") is None


H800_EXP = Expectations(gpus=8, gpu_model="H800", nvswitch=True,
                        settings=HealthSettings(dcgm_exporter=False))


def _nvlink(text: str, expect=H800_EXP):
    return run(secs(nvlink_status=text), expect)["gpu.nvlink"]


def test_real_h800_listing_of_three_gpus_is_named():
    r = _nvlink(corpus_path(*H800, "nvlink-status.525.105.17.h800").read_text())
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REBOOT
    assert "only 3 of 8 GPUs listed by nvlink --status (missing index 2, 3, 4, 5, 6)" in r.summary


def test_full_h800_passes_and_each_injected_nvlink_fault_is_named():
    full = (FIX / "nvlink-status.525.h800x8.full.txt").read_text()
    assert _nvlink(full).status is Status.PASS
    blocks = re.split(r"(?m)^(?=GPU \d+:)", full)
    four = blocks.copy()
    four[3] = "\n".join(four[3].splitlines()[:5]) + "\n"  # GPU 2: header + links 0-3
    r = _nvlink("".join(four))
    assert r.status is Status.FAIL and "GPU 2: 4 of 8 links active" in r.evidence
    assert r.remedy.kind is RemedyKind.RESET_GPU and r.remedy.part == "GPU 2"
    assert [f.summary for f in r.findings] == ["GPU 2: 4 of 8 links active"]
    none = blocks.copy()
    none[6] = none[6].splitlines()[0] + "\n"  # GPU 5 lists no link at all
    assert "GPU 5: no active NVLink (expected 8)" in _nvlink("".join(none)).evidence
    half = full.replace("GPU 6: NVIDIA H800 (UUID: GPU-00000000-0000-0000-0000-000000000006)\n"
                        "         Link 0: 26.562 GB/s",
                        "GPU 6: NVIDIA H800 (UUID: GPU-00000000-0000-0000-0000-000000000006)\n"
                        "         Link 0: 13.281 GB/s")
    r = _nvlink(half)
    assert r.status is Status.FAIL
    assert "GPU 6: link 0 at 13.281 GB/s (expected 26.562)" in r.evidence


def test_real_a100_nvlink_status_passes_the_model_table():
    text = corpus_path(*H100, "nvidia-smi.nvlink.status.a100").read_text()
    exp = Expectations(gpus=8, gpu_model="A100-SXM4", nvswitch=True,
                       settings=HealthSettings(dcgm_exporter=False))
    r = _nvlink(text, exp)
    assert r.status is Status.PASS, r.evidence
    assert r.threshold["links_per_gpu"]["7"] == 12


def test_unknown_model_is_judged_against_the_hosts_own_gpus():
    full = (FIX / "nvlink-status.525.h800x8.full.txt").read_text().replace("H800", "Z900")
    exp = Expectations(gpus=8, gpu_model=None, nvswitch=True, settings=HealthSettings(dcgm_exporter=False))
    assert _nvlink(full, exp).status is Status.PASS
    lost = re.sub(r"(GPU 3: .*\n(?:\s+Link \d: .*\n){6})(?:\s+Link \d: .*\n){2}", r"\1", full)
    assert "GPU 3: 6 of 8 links active" in _nvlink(lost, exp).evidence


# --- the topology manifest ---------------------------------------------------------------------

def _h800_host(**edits: str) -> dict[str, Section]:
    texts = {
        "nvsmi": corpus_path(*H800, "nvidia-smi-q-i0.525.105.17.h800").read_text(),
        "topo": corpus_path(*H800, "topo-m.525.105.17.h800").read_text(),
        "nvlink_status": (FIX / "nvlink-status.525.h800x8.full.txt").read_text(),
    }
    texts.update(edits)
    return secs(**texts)


def _h100_host(**edits: str) -> dict[str, Section]:
    texts = {
        "nvsmi": corpus_path(*H100, "nvidia-smi-query.535.161.08.out.0.valid").read_text(),
        "lspci": corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text(),
        "ibstat": corpus_path("ib", "ibstat-a100-h100-gpud", "ibstat.47.0.h100.all.active.0").read_text(),
        "topo": (FIX / "topo-m.535.h100x8-10nic.txt").read_text(),
        "nvlink_status": (FIX / "nvlink-status.h100x8.18-links.txt").read_text(),
    }
    texts.update(edits)
    return secs(**texts)


def test_h800_golden_host_matches_itself_and_round_trips_yaml(tmp_path):
    m = capture(_h800_host(), profile="hgx-h800", host="gold-01")
    assert len(m.gpus) == 8 and m.gpus[0].model == "NVIDIA H800" and m.driver == "525.105.17"
    assert m.gpus[1].nearest_nic.relation == "PIX" and m.gpus[1].nearest_nic.devices == ["mlx5_0"]
    assert m.gpus[5].nvlink.links == 8 and m.gpus[5].numa == 1
    path = tmp_path / "topology" / "hgx-h800.yml"
    path.parent.mkdir()
    path.write_text(dump_manifest(m))
    again = load_manifest(path)
    assert again == m
    assert compare(again, _h800_host(), "gpu-r01-u03") == []


def test_h800_injected_deviations_are_each_named():
    m = capture(_h800_host(), profile="hgx-h800", host="gold-01")
    topo = corpus_path(*H800, "topo-m.525.105.17.h800").read_text()
    # GPU1's NIC moved to a slot across the CPU socket: PIX -> SYS.
    lines = topo.splitlines()
    lines[2] = lines[2].replace("PIX", "SYS", 1)
    devs = compare(m, _h800_host(topo="\n".join(lines)), "bad-01")
    assert [d.what for d in devs] == ["nic.relation"]
    assert devs[0].part == "GPU1" and devs[0].expected == "PIX to mlx5_0"
    assert devs[0].remedy is RemedyKind.REPAIR and "across the CPU socket" in devs[0].action
    # A half-speed link and a GPU with 4 of its 8 links.
    nv = (FIX / "nvlink-status.525.h800x8.full.txt").read_text()
    blocks = re.split(r"(?m)^(?=GPU \d+:)", nv)
    blocks[4] = "\n".join(blocks[4].splitlines()[:5]) + "\n"
    blocks[2] = blocks[2].replace("Link 7: 26.562", "Link 7: 13.281")
    devs = compare(m, _h800_host(nvlink_status="".join(blocks)), "bad-02")
    assert sorted((d.what, d.part) for d in devs) == [("nvlink.links", "GPU3"), ("nvlink.speed", "GPU1")]


def test_h100_golden_host_with_pcie_and_nics():
    m = capture(_h100_host(), profile="hgx-h100", host="gold-h100")
    assert len(m.gpus) == 8 and m.gpus[0].bus_id == "0000:19:00.0"
    assert {p.role for p in m.pcie.values()} == {"gpu", "nic", "bridge"}
    assert m.nics and all(n.link_layer for n in m.nics.values())
    assert compare(m, _h100_host(), "gpu-r02-u05") == []


def _drop_gpu(nvsmi: str, bus: str) -> str:
    head, *blocks = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", nvsmi)
    kept = [b for b in blocks if not b.startswith(f"GPU 0000{bus.upper()}")]
    return head.replace(": 8\n", f": {len(kept)}\n", 1) + "".join(kept)


def test_h100_missing_gpu_and_narrow_link_and_acs_are_named():
    m = capture(_h100_host(), profile="hgx-h100", host="gold-h100")
    nvsmi = corpus_path(*H100, "nvidia-smi-query.535.161.08.out.0.valid").read_text()
    lspci = corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text()
    gpu_addr = m.gpus[3].bus_id
    assert gpu_addr is not None
    devs = compare(m, _h100_host(nvsmi=_drop_gpu(nvsmi, gpu_addr)), "bad-h100")
    assert ("gpu.missing", f"GPU3 (PCI {gpu_addr})") in [(d.what, d.part) for d in devs]
    bridge = next(a for a, p in m.pcie.items() if p.role == "bridge" and p.acs is False)
    blocks = re.split(r"(?m)^(?=[0-9a-f]{2}:[0-9a-f]{2}\.\d )", lspci)  # recorded without -D
    i = next(k for k, b in enumerate(blocks) if b.startswith(bridge[5:] + " "))
    blocks[i] = blocks[i].replace("ReqRedir- CmpltRedir-", "ReqRedir+ CmpltRedir+")
    devs = compare(m, _h100_host(lspci="".join(blocks)), "bad-h100")
    assert [(d.what, d.remedy) for d in devs] == [("pcie.acs", RemedyKind.REBOOT)]


def test_check_runs_against_the_profiles_manifest():
    m = capture(_h800_host(), profile="hgx-h800", host="gold-01")
    exp = Expectations(gpus=8, gpu_model="H800", nvswitch=True, topology=m,
                       settings=HealthSettings(dcgm_exporter=False))
    assert run(_h800_host(), exp)["host.topology"].status is Status.PASS
    bad_topo = corpus_path(*H800, "topo-m.525.105.17.h800").read_text().replace(
        "GPU7    NV8     NV8     NV8     NV8     NV8     NV8     NV8      X      SYS     SYS     PIX     PIX",
        "GPU7    NV8     NV8     NV8     NV8     NV8     NV8     NV8      X      SYS     SYS     SYS     SYS")
    r = run(_h800_host(topo=bad_topo), exp)["host.topology"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    assert r.evidence[0].startswith("nic.relation: GPU7: expected PIX to mlx5_2, mlx5_3, found SYS")
    assert run(_h800_host(), H800_EXP)["host.topology"].status is Status.NOT_APPLICABLE


def test_bad_manifest_names_file_and_key(tmp_path):
    p = tmp_path / "x.yml"
    p.write_text("profile: p\ngpus:\n  - index: -1\n")
    with pytest.raises(InventoryError) as e:
        load_manifest(p)
    assert "x.yml" in str(e.value) and "gpus.0.index" in str(e.value)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="GPUNIC0123 \tXSYPHBODEmlx5_V:-,\n", max_size=40), max_size=12))
def test_topo_parser_only_ever_raises_parse_error(lines):
    text = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n" + "\n".join(lines)
    t = parse_topo(text)  # a header is there: whatever follows must not crash
    for g in t.gpus:
        t.nearest_nics(g)
    with pytest.raises(ParseError):
        parse_topo("\n".join(line.replace("0", "1") for line in lines))


def test_h100_nic_firmware_mode_and_a_narrow_gpu_link_are_named():
    m = capture(_h100_host(), profile="hgx-h100", host="gold-h100")
    ibstat = corpus_path("ib", "ibstat-a100-h100-gpud", "ibstat.47.0.h100.all.active.0").read_text()
    first_ca = ibstat.split("CA '", 2)[1].split("'", 1)[0]
    blocks = ibstat.split("CA '")
    blocks[1] = blocks[1].replace("Firmware version: 28.39.1002", "Firmware version: 28.36.1010", 1)
    blocks[1] = blocks[1].replace("Link layer: Ethernet", "Link layer: InfiniBand", 1)
    devs = compare(m, _h100_host(ibstat="CA '".join(blocks)), "bad-h100")
    got = {(d.what, d.part): d for d in devs}
    fw = got[("nic.firmware", first_ca)]
    assert (fw.expected, fw.observed, fw.remedy) == ("28.39.1002", "28.36.1010", RemedyKind.REIMAGE)
    assert got[("nic.mode", first_ca)].expected == "Ethernet"
    gpu = m.gpus[2].bus_id
    assert gpu is not None and m.pcie[gpu].width == 16
    lspci = corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text()
    parts = re.split(r"(?m)^(?=[0-9a-f]{2}:[0-9a-f]{2}\.\d )", lspci)
    i = next(k for k, b in enumerate(parts) if b.startswith(gpu[5:] + " "))
    parts[i] = re.sub(r"(LnkSta:\t[^\n]*Width )x16", r"\1x8", parts[i])
    devs = compare(m, _h100_host(lspci="".join(parts)), "bad-h100")
    assert [(d.what, d.part, d.observed) for d in devs] == [("pcie.width", f"gpu at PCI {gpu}", "x8")]


def test_a_missing_tool_is_not_reported_as_missing_hardware():
    m = capture(_h100_host(), profile="hgx-h100", host="gold-h100")
    sections = _h100_host()
    sections["lspci"] = Section("lspci", 127, "")
    sections["ibstat"] = Section("ibstat", 127, "")
    assert compare(m, sections, "h") == []
    exp = Expectations(gpus=8, gpu_model="H100", nvswitch=True, topology=m,
                       settings=HealthSettings(dcgm_exporter=False))
    r = run(sections, exp)["host.topology"]
    assert r.status is Status.WARN and r.observed["not_compared"] == ["lspci", "ibstat"]


def test_doubts_about_the_golden_host_itself():
    from provisioner.health.manifest import golden_doubts

    assert golden_doubts(capture(_h800_host(), profile="p", host="g")) == []
    nv = (FIX / "nvlink-status.525.h800x8.full.txt").read_text()
    blocks = re.split(r"(?m)^(?=GPU \d+:)", nv)
    blocks[1] = blocks[1].replace("Link 3: 26.562", "Link 3: 13.281")  # GPU 0 ([0] is "")
    blocks[5] = "\n".join(blocks[5].splitlines()[:7]) + "\n"  # GPU 4: 6 links
    doubts = golden_doubts(capture(_h800_host(nvlink_status="".join(blocks)), profile="p", host="g"))
    assert "GPU0: a link at 13.281 GB/s (expected 26.562)" in doubts
    assert "GPU4: 6 NVLinks, the other GPUs have 8" in doubts  # no model for GPUs 1-7 (-i 0)
    assert len(doubts) == 2


def test_renumbered_buses_are_one_deviation_not_every_device_missing():
    m = capture(_h100_host(), profile="hgx-h100", host="gold-h100")
    # Shift every bus number of the golden host's addresses: as after a BIOS change.
    moved = m.model_copy(update={
        "pcie": {f"0001{a[4:]}": p for a, p in m.pcie.items()},
        "gpus": [g.model_copy(update={"bus_id": f"0001{g.bus_id[4:]}"}) for g in m.gpus]})
    devs = compare(moved, _h100_host(), "h")
    assert [d.what for d in devs] == ["pcie.renumbered"] and devs[0].remedy is RemedyKind.REPAIR


def test_a_manifest_that_is_an_alias_bomb_is_refused(tmp_path):
    p = tmp_path / "bomb.yml"
    bomb = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    bomb += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    p.write_text("\n".join(bomb) + "\nprofile: p\n")
    with pytest.raises(InventoryError, match="aliases expand to more than") as e:
        load_manifest(p)
    assert "bomb.yml" in str(e.value)
