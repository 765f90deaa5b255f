"""Every GPU the host shows is judged, each fault is its own finding (ordered by the remedy it
needs), and every GPU finding and work order names the GPU by PCI address and PCIe slot.

Real recordings: the HGX H100 pair from leptonai/gpud (nvidia-smi -q of 535.161.08 and lspci -vvv
of the same board kind: the GPUs sit behind PEX890xx switch ports whose SltCap names the slot);
drivers 550/565/570 from thamada/gls (GPU Recovery Action; 570's deprecated reset status; a
GH200 with a past uncorrectable error; ten A40s). Faults are written into their values here."""

from __future__ import annotations

import re

import pytest

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.model import HostReport, RemedyKind, Status, judge
from provisioner.health.pcie import parse_lspci, pci_slots
from provisioner.health.ticket import render_text, work_order
from tests.conftest import corpus_path

GPUD = ("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud")
GLS = ("pcie-gpu", "nvidia-smi-q-thamada-gls")
NVSMI = corpus_path(*GPUD, "nvidia-smi-query.535.161.08.out.0.valid").read_text()
LSPCI = corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text()
HGX = Expectations(gpus=8, gpu_model="H100 80GB HBM3", nvswitch=True,
                   settings=HealthSettings(dcgm_exporter=False))


def run(expect: Expectations = HGX, **texts: str) -> dict:
    sections = {k: Section(k, 0, v) for k, v in texts.items()}
    return {r.id: r for r in run_checks(Context(host="gpu-r01-u03", sections=sections, expect=expect))}


def blocks(text: str) -> list[str]:
    return re.split(r"(?m)^(?=GPU [0-9A-Fa-f]{8}:)", text)


def edit(text: str, gpu: int, section: str, key: str, value: str) -> str:
    """Write ``value`` into ``section > key`` of GPU ``gpu``'s block (0 = first GPU)."""
    parts = blocks(text)
    block = parts[gpu + 1]
    head, _, tail = block.partition(f"    {section}\n")
    tail = re.sub(rf"(?m)^(\s+{re.escape(key)}\s*:\s).*$", lambda m: m.group(1) + value, tail, count=1)
    parts[gpu + 1] = head + f"    {section}\n" + tail
    return "".join(parts)


def test_slots_come_from_the_switch_port_above_each_gpu():
    slots = pci_slots(parse_lspci(LSPCI))
    # 19:00.0 sits below PEX port 17:01.0 ("Slot #28"); the port itself is "Physical Slot: 28".
    assert slots["0000:19:00.0"] == "28" and slots["0000:17:01.0"] == "28"
    gpus = [d.addr for d in parse_lspci(LSPCI) if d.is_gpu]
    assert all(g in slots for g in gpus) and len({slots[g] for g in gpus}) == 8


def test_the_kernels_slot_table_wins_over_lspci():
    sysfs = "slot 7-1 0000:19:00\nslot 28 0000:17:01\n"
    assert pci_slots(parse_lspci(LSPCI), sysfs)["0000:19:00.0"] == "7-1"


def test_every_gpu_finding_names_pci_address_and_slot_and_so_does_the_ticket():
    nvsmi = edit(NVSMI, 0, "ECC Mode", "Current", "Disabled")
    res = run(nvsmi=nvsmi, lspci=LSPCI)
    ecc = res["gpu.ecc"]
    assert ecc.status is Status.FAIL and ecc.remedy.kind is RemedyKind.REBOOT  # pending on
    (f,) = ecc.findings
    assert f.gpu.pci == "0000:19:00.0" and f.gpu.slot == "28" and f.gpu.index == 0
    assert f.part == "GPU at PCI 0000:19:00.0 slot 28 module 2 serial 1650124031592"
    rep = judge(HostReport(host="gpu-r01-u03", run_id="r1", started_at="2026-11-22T11:00:00+00:00",
                           duration_s=1.0, results=list(res.values())), 3, 0)
    wo = work_order(rep, site="dc1", location="rack r01 U3")
    item = next(i for i in wo.items if i.check == "gpu.ecc")
    assert (item.pci, item.slot, item.serial) == ("0000:19:00.0", "28", "1650124031592")
    assert "where: PCI 0000:19:00.0, PCIe slot 28" in render_text(wo)


def test_several_gpus_several_findings_ordered_by_the_remedy_they_need():
    # GPU 0 prints errors (reset), GPU 2 has ECC off for good (re-image), GPU 5 pending on
    # (reboot), GPU 7 had a DBE in the past (warning): all named in one run, worst first.
    nvsmi = edit(NVSMI, 0, "ECC Mode", "Current", "[GPU requires reset]")
    nvsmi = edit(nvsmi, 2, "ECC Mode", "Current", "Disabled")
    nvsmi = edit(nvsmi, 2, "ECC Mode", "Pending", "Disabled")
    nvsmi = edit(nvsmi, 5, "ECC Mode", "Current", "Disabled")
    nvsmi = edit(edit(nvsmi, 7, "ECC Errors", "DRAM Uncorrectable", "0"), 7, "    Aggregate",
                 "DRAM Uncorrectable", "2")
    r = run(nvsmi=nvsmi, lspci=LSPCI)["gpu.ecc"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REIMAGE
    got = [(f.remedy, f.status, f.gpu.pci) for f in r.findings]
    assert got == [(RemedyKind.REIMAGE, Status.FAIL, "0000:4c:00.0"),
                   (RemedyKind.REBOOT, Status.FAIL, "0000:bb:00.0"),
                   (RemedyKind.RESET_GPU, Status.FAIL, "0000:19:00.0"),
                   (RemedyKind.NONE, Status.WARN, "0000:db:00.0")]
    assert r.remedy.part == "GPU at PCI 0000:4c:00.0 slot 23 module 1 serial 1650124047722"


def test_ecc_off_on_every_gpu_pending_on_is_one_reboot():
    nvsmi = NVSMI
    for i in range(8):
        nvsmi = edit(nvsmi, i, "ECC Mode", "Current", "Disabled")
    r = run(nvsmi=nvsmi)["gpu.ecc"]
    assert r.remedy.kind is RemedyKind.REBOOT and len(r.findings) == 8
    assert r.summary == "ECC disabled on 8 GPU(s), enabled pending a reboot"


@pytest.mark.parametrize(("action", "remedy", "status"), [
    ("Reset", RemedyKind.RESET_GPU, Status.FAIL),
    ("Reboot", RemedyKind.REBOOT, Status.FAIL),
    ("Node Reboot", RemedyKind.REBOOT, Status.FAIL),
    ("Drain P2P", RemedyKind.RESET_GPU, Status.FAIL),
    ("Drain and Reset", RemedyKind.RESET_GPU, Status.FAIL),
    ("Recover IMEX Domain", RemedyKind.NONE, Status.WARN),
])
def test_gpu_recovery_action_of_driver_550_plus(action, remedy, status):
    h100 = corpus_path(*GLS, "nvidia-smi-q.565.57.01.h100-sxm-x8").read_text()
    exp = Expectations(gpus=8, gpu_model="H100", settings=HealthSettings(dcgm_exporter=False))
    assert run(exp, nvsmi=h100)["gpu.row_remap"].status is Status.PASS
    parts = blocks(h100)
    parts[4] = re.sub(r"(GPU Recovery Action\s+: ).*", lambda m: m.group(1) + action, parts[4])
    r = run(exp, nvsmi="".join(parts))["gpu.row_remap"]
    assert r.status is status and r.remedy.kind is remedy
    (f,) = r.findings
    assert f.gpu.pci == "0000:5d:00.0" and action in f.summary


def test_driver_570_deprecated_reset_status_is_no_value():
    text = corpus_path(*GLS, "nvidia-smi-q.570.124.06.rtx5090").read_text()
    exp = Expectations(gpus=1, settings=HealthSettings(dcgm_exporter=False))
    res = run(exp, nvsmi=text)
    # "Requested functionality has been deprecated" is neither "yes" nor an NVML error.
    assert res["gpu.row_remap"].status is Status.PASS, res["gpu.row_remap"].summary
    assert res["gpu.count"].status is Status.PASS
    reboot = text.replace("GPU Recovery Action                   : None",
                          "GPU Recovery Action                   : Reboot")
    assert run(exp, nvsmi=reboot)["gpu.row_remap"].remedy.kind is RemedyKind.REBOOT


def test_row_remap_pending_and_failure_each_named():
    nvsmi = edit(NVSMI, 1, "Remapped Rows", "Pending", "Yes")
    nvsmi = edit(nvsmi, 6, "Remapped Rows", "Remapping Failure Occurred", "Yes")
    r = run(nvsmi=nvsmi, lspci=LSPCI)["gpu.row_remap"]
    assert [(f.remedy, f.gpu.pci) for f in r.findings] == [
        (RemedyKind.REPAIR, "0000:cb:00.0"), (RemedyKind.RESET_GPU, "0000:3b:00.0")]
    assert r.remedy.kind is RemedyKind.REPAIR


def test_real_gh200_past_uncorrectable_error_warns():
    text = corpus_path(*GLS, "nvidia-smi-q.550.127.05.gh200").read_text()
    res = run(Expectations(gpus=1, settings=HealthSettings(dcgm_exporter=False)), nvsmi=text)
    assert res["gpu.ecc"].status is Status.WARN
    assert res["gpu.ecc"].findings[0].gpu.pci == "0000:dd:00.0"
    assert res["gpu.row_remap"].status is Status.PASS  # 1 row remapped, nothing pending


def test_gpus_beyond_the_profile_are_counted_and_still_judged():
    text = corpus_path(*GLS, "nvidia-smi-q.550.127.05.a40x10").read_text()
    text = edit(text, 9, "ECC Mode", "Current", "Disabled")
    text = edit(text, 9, "ECC Mode", "Pending", "Disabled")
    exp = Expectations(gpus=8, gpu_model="A40", settings=HealthSettings(dcgm_exporter=False))
    res = run(exp, nvsmi=text)
    count = res["gpu.count"]
    assert count.status is Status.WARN and "driver reports 10 GPUs, the profile expects 8" in count.summary
    ecc = res["gpu.ecc"]  # the tenth GPU, beyond the profile, is judged like the others
    assert ecc.status is Status.FAIL and ecc.findings[0].gpu.pci == "0000:d6:00.0"


def _nvlink_listing(gpus: int, inactive: dict[int, int] | None = None) -> str:
    """``nvidia-smi nvlink --status`` of H100 SXM GPUs (18 links at 26.562 GB/s), in the real
    listing's layout (tests/fixtures/health/nvlink-status.h100x8.18-links.txt)."""
    out = []
    for g in range(gpus):
        out.append(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000{g})")
        for ln in range(18):
            speed = "<inactive>" if (inactive or {}).get(g) == ln else "26.562 GB/s"
            out.append(f"\t Link {ln}: {speed}")
    return "\n".join(out) + "\n"


def test_nvlinks_of_a_gpu_beyond_the_profile_count_are_judged():
    nine = _nvlink_listing(9, inactive={8: 4})
    r = run(nvlink_status=nine, nvsmi=NVSMI)["gpu.nvlink"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.RESET_GPU
    (f,) = r.findings
    assert f.summary == "GPU 8: 17 of 18 links active (link 4 inactive)"
    assert run(nvlink_status=_nvlink_listing(9), nvsmi=NVSMI)["gpu.nvlink"].status is Status.PASS


def test_each_gpus_links_are_their_own_finding():
    listing = _nvlink_listing(8, inactive={1: 0, 6: 17}).replace(
        "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000003)\n\t Link 0: 26.562 GB/s",
        "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000003)\n\t Link 0: 13.281 GB/s")
    r = run(nvlink_status=listing, nvsmi=NVSMI, lspci=LSPCI)["gpu.nvlink"]
    assert [f.gpu.index for f in r.findings] == [1, 3, 6]
    assert r.findings[1].summary.startswith("GPU 3 (GPU at PCI 0000:5d:00.0 slot ")
    assert r.summary.startswith("2 GPU(s) with NVLinks inactive or missing; GPU 3 (GPU at PCI "
                                "0000:5d:00.0 slot 27 module 3 serial 1650124032506): link 0 at 13.281")


def test_each_fabric_port_and_pcie_link_is_its_own_finding():
    ibstat = corpus_path("ib", "ibstat-a100-h100-gpud", "ibstat.47.0.h100.all.active.0").read_text()
    blocks = ibstat.split("CA '")
    # Two real 400G RoCE rails go down: each is named with its port GUID, in rail order.
    for i, block in enumerate(blocks):
        if block.startswith(("mlx5_10'", "mlx5_3'")):
            blocks[i] = block.replace("State: Active", "State: Down", 1).replace(
                "Physical state: LinkUp", "Physical state: Polling", 1)
    exp = Expectations(gpus=8, gpu_model="H100 80GB HBM3", ib_ports=8, ib_rate_gbps=400,
                       settings=HealthSettings(dcgm_exporter=False, fabric_link_layer="Ethernet"))
    assert run(exp, ibstat=ibstat)["ib.ports"].status is Status.PASS
    r = run(exp, ibstat="CA '".join(blocks))["ib.ports"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    assert [f.part.split()[1] for f in r.findings] == ["mlx5_3/1", "mlx5_10/1"]
    assert all("port GUID 0x" in f.part for f in r.findings)
    # A GPU's link trained at x8 on the real HGX board: named by PCI address and slot.
    head, gpu = LSPCI.split("\n19:00.0 ", 1)
    lspci = head + "\n19:00.0 " + gpu.replace("LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)",
                                              "LnkSta:\tSpeed 32GT/s (ok), Width x8 (downgraded)", 1)
    links = run(nvsmi=NVSMI, lspci=lspci)["pcie.links"]
    assert links.status is Status.FAIL and len(links.findings) == 1
    assert links.findings[0].gpu.pci == "0000:19:00.0" and links.findings[0].gpu.slot == "28"
