"""``nvidia-smi topo -m`` affinity and placement on the hosts #34 names: NUMA affinity printed as
a range or a list, CPU affinity ranges and lists, padding cells, NIC columns beyond 16, B200 and
GB200 layouts; and the golden-host comparison of NUMA placement.

Real base: the 8x A100 / 10-NIC matrix (driver 525) and the 8x H800 matrix with its terminal
copy; written (tests/fixtures/health, see its README): an 8x B200 host with 18 NICs and a 4-GPU
GB200 tray (Grace: "GPU NUMA ID" filled)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provisioner.health.collector import Section
from provisioner.health.manifest import capture, compare, dump_manifest, load_manifest
from provisioner.health.nvlink import nvlink_spec
from provisioner.health.topo import parse_list, parse_topo
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
A100 = corpus_path("pcie-gpu", "topo-m-a100x8-10nic-gpu-compress-decompress",
                   "topo-m.525.105.17.a100-sxm-40g.10nic").read_text()
H800 = ("pcie-gpu", "nvidia-smi-q-nvlink-topo-h800x8-llm-action")


def spaced(tabbed: str) -> str:
    """The matrix as a terminal shows it (tabs expanded to 8 columns), ANSI removed."""
    return re.sub(r"\x1b\[[0-9;]*m", "", tabbed).expandtabs(8)


@pytest.mark.parametrize(("cell", "nodes"), [
    ("1", (1,)), ("6-7", (6, 7)), ("0,1", (0, 1)), ("0-1,4-5", (0, 1, 4, 5)),
    ("N/A", None), ("", None), ("7-6", None), ("0-99999999", None), ("\u0661", None),
])
def test_node_lists(cell, nodes):
    assert parse_list(cell) == nodes


@pytest.mark.parametrize("layout", [str, spaced])
def test_numa_affinity_range_and_list_are_read(layout):
    # The A100 matrix with GPU0/1 affine to nodes 2-3 and GPU6 to "5,7" (as NPS2 / SNC print).
    text = A100.replace("48-63,176-191\t3", "32-63,160-191\t2-3").replace(
        "80-95,208-223\t5\nGPU7", "80-95,112-127\t5,7\nGPU7")
    t = parse_topo(layout(text))
    assert t.numa_affinity["GPU0"] == (2, 3) and t.numa_affinity["GPU6"] == (5, 7)
    assert t.cpu_affinity["GPU0"] == "32-63,160-191" and t.numa_affinity["GPU4"] == (7,)


def test_padding_cells_and_na_affinity():
    # nvidia-smi pads with empty cells: "0-7<tab><tab>N/A<tab><tab>N/A".
    t = parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-7\t\tN/A\t\tN/A\n")
    assert t.cpu_affinity["GPU0"] == "0-7" and t.numa_affinity["GPU0"] is None
    t = parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0,2,4,6\t0\t\tN/A\n")
    assert t.cpu_affinity["GPU0"] == "0,2,4,6" and t.numa_affinity["GPU0"] == (0,)


@pytest.mark.parametrize("layout", [str, spaced])
def test_b200_with_eighteen_nic_columns(layout):
    t = parse_topo(layout((FIX / "topo-m.570.b200x8-18nic.txt").read_text()))
    assert len(t.gpus) == 8 and t.nics == [f"NIC{i}" for i in range(18)]
    assert t.nic_devices["NIC17"] == "mlx5_17" and t.nic_devices["NIC1"] == "mlx5_1"
    assert [t.nearest_nics(g) for g in t.gpus] == [("PIX", [f"mlx5_{i}"]) for i in range(8)]
    assert t.relation[("GPU7", "NIC17")] == "NODE" and t.nvlinks("GPU0", "GPU7") == 18
    assert t.numa_affinity["GPU5"] == (1,) and t.gpu_numa_id["GPU5"] is None
    assert t.cpu_affinity["GPU5"] == "56-111,168-223"


def test_gb200_tray_fills_gpu_numa_id():
    t = parse_topo((FIX / "topo-m.570.gb200x4-6nic.txt").read_text())
    assert [t.gpu_numa_id[g] for g in t.gpus] == [(2,), (10,), (18,), (26,)]
    assert [t.numa_affinity[g] for g in t.gpus] == [(0,), (0,), (1,), (1,)]
    assert t.nearest_nics("GPU2") == ("NODE", ["mlx5_2", "mlx5_3", "mlx5_5"])


def test_blackwell_nvlink_table():
    assert nvlink_spec("NVIDIA B200").links == 18 and nvlink_spec("NVIDIA B200").speed_gbs == 53.125
    assert nvlink_spec("NVIDIA GB200") == nvlink_spec("NVIDIA B300 SXM6 AC")


def _h800(topo: str) -> dict[str, Section]:
    return {"nvsmi": Section("nvsmi", 0, corpus_path(*H800, "nvidia-smi-q-i0.525.105.17.h800").read_text()),
            "topo": Section("topo", 0, topo)}


def test_golden_host_comparison_covers_numa_ranges(tmp_path):
    real = corpus_path(*H800, "topo-m.525.105.17.h800").read_text()
    golden = re.sub(r"32-63,96-127( +)1\b", r"32-63,96-127\g<1>1-2", real)  # GPU4-7: nodes 1, 2
    m = capture(_h800(golden), profile="hgx-h800", host="gold-01")
    assert m.gpus[4].numa == [1, 2] and m.gpus[0].numa == 0 and m.gpus[4].cpus == "32-63,96-127"
    path = tmp_path / "hgx-h800.yml"
    path.write_text(dump_manifest(m))
    m = load_manifest(path)
    assert compare(m, _h800(golden), "gpu-r01-u03") == []
    # The same host after a BIOS change folded the nodes: NUMA 1 only.
    devs = compare(m, _h800(real), "gpu-r01-u05")
    assert [(d.what, d.part) for d in devs] == [("gpu.numa", f"GPU{i}") for i in range(4, 8)]
    assert devs[0].expected == "NUMA node 1,2" and devs[0].observed == "NUMA node 1"


def test_golden_host_comparison_covers_cpu_affinity_and_gpu_numa_id():
    tray = (FIX / "topo-m.570.gb200x4-6nic.txt").read_text()
    m = capture({"topo": Section("topo", 0, tray)}, profile="gb200", host="gold-tray")
    assert [g.gpu_numa for g in m.gpus] == [2, 10, 18, 26]
    moved = tray.replace("72-143\t1\t\t26", "72-143\t1\t\t34").replace("\t0-71\t0\t\t10", "\t0-35\t0\t\t10")
    devs = compare(m, {"topo": Section("topo", 0, moved)}, "tray-07")
    assert sorted((d.what, d.part) for d in devs) == [("gpu.cpu_affinity", "GPU1"),
                                                      ("gpu.numa_id", "GPU3")]
