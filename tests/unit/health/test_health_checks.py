"""Each check judged on collected sections: real recordings (tests/fixtures/corpus) and outputs
written by the project in the same formats (tests/fixtures/health, see its README), good and bad."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.health.checks import CHECK_IDS, run_checks
from provisioner.health.checks.base import Context
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.model import RemedyKind, Status
from provisioner.health.nvsmi import parse_nvsmi
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
GPU_CHECKS = ("gpu.count", "gpu.ecc", "gpu.row_remap", "gpu.xid", "gpu.nvlink", "gpu.throttle",
              "gpu.gpudirect", "docker.gpu", "pcie.links", "pcie.acs", "ib.ports", "ib.counters",
              "nvswitch.sxid")


def fx(name: str) -> str:
    return (FIX / name).read_text()


def secs(**texts: str | tuple[int, str]) -> dict[str, Section]:
    out = {}
    for name, v in texts.items():
        rc, text = v if isinstance(v, tuple) else (0, v)
        out[name] = Section(name, rc, text)
    return out


H100 = Expectations(gpus=2, gpu_model="H100", nvswitch=True, ib_ports=2, ib_rate_gbps=400,
                    settings=HealthSettings(dcgm_exporter=False))
NO_GPU = Expectations()


def run(sections, expect=H100, deep=False):
    ctx = Context(host="h1", sections=sections, expect=expect, deep=deep)
    return {r.id: r for r in run_checks(ctx)}


def test_host_without_gpus_reports_not_applicable_never_pass():
    res = run(secs(nvsmi=(127, ""), lspci="", kernel_log="", kernel_errors="", modules="",
                   df=fx("df-P-B1.one-full.txt").replace("98%", "10%").replace(
                       "14600000000000 400000000000", "1000 14999999999000"),
                   zpool=(127, "")), NO_GPU)
    for cid in GPU_CHECKS:
        assert res[cid].status is Status.NOT_APPLICABLE, cid
    assert res["firmware.versions"].status is Status.NOT_APPLICABLE
    assert res["zfs.docker"].status is Status.NOT_APPLICABLE
    assert res["disk.usage"].status is Status.PASS
    assert res["kernel.log"].status is Status.PASS
    assert set(res) == set(CHECK_IDS) - {"gpu.dcgm_diag", "gpu.matmul", "gpu.nvlink_bw"}


def test_good_h100_host_from_real_and_synthetic_outputs():
    exp = Expectations(gpus=8, gpu_model="H100 80GB HBM3", nvswitch=True, ib_ports=8,
                       ib_rate_gbps=400, settings=HealthSettings(dcgm_exporter=False),
                       firmware={"gpu_vbios": "96.00.74.00.0D", "hca_firmware": {"MT4129": "28.39.1002"}})
    nvsmi = corpus_path("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud",
                        "nvidia-smi-query.535.161.08.out.0.valid").read_text()
    lspci = corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text()
    ibstat = corpus_path("ib", "ibstat-a100-h100-gpud", "ibstat.47.0.h100.some.down.0").read_text()
    res = run(secs(nvsmi=nvsmi, lspci=lspci, ibstat=ibstat, modules="nvidia_peermem 16384 0 - Live\n",
                   kernel_log="", ib_counters_0=fx("ib-counters.0.txt"),
                   ib_counters_1=fx("ib-counters.0.txt")), exp)
    for cid in ("gpu.count", "gpu.ecc", "gpu.row_remap", "gpu.xid", "pcie.links", "pcie.acs",
                "ib.ports", "ib.counters", "gpu.gpudirect", "firmware.versions"):
        assert res[cid].status is Status.PASS, (cid, res[cid].summary)
    assert res["pcie.links"].observed["devices"] == 20
    # Real recording: the power-brake slowdown was asserted on this host.
    assert res["gpu.throttle"].status is Status.WARN
    assert "HW Power Brake Slowdown" in res["gpu.throttle"].summary


def test_truncated_nvidia_smi_fails_gpu_count():
    exp = Expectations(gpus=8, settings=HealthSettings(dcgm_exporter=False))
    nvsmi = corpus_path("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud",
                        "nvidia-smi-query.535.183.01.out.0.invalid").read_text()
    r = run(secs(nvsmi=nvsmi), exp)["gpu.count"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REBOOT
    assert "1 GPU(s) (8 attached)" in r.summary


def test_bad_gpu_is_named_with_serial_and_the_right_remedies():
    res = run(secs(nvsmi=fx("nvidia-smi-q.h100x2.one-bad.txt"),
                   lspci=fx("lspci-vvv-nn-D.narrow-link-acs-on.txt"),
                   kernel_log=fx("dmesg-iso.bad-host.log"),
                   nvlink_status=fx("nvlink-status.h100x2.one-inactive.txt"),
                   nvlink_errors_0=fx("nvlink-errors.0.txt"), nvlink_errors_1=fx("nvlink-errors.1.txt")))
    bad = "GPU at PCI 0000:2a:00.0 module 2 serial 1654922007777"
    assert res["gpu.count"].status is Status.PASS
    ecc = res["gpu.ecc"]
    assert ecc.status is Status.FAIL and ecc.remedy.kind is RemedyKind.RESET_GPU and ecc.remedy.part == bad
    remap = res["gpu.row_remap"]
    assert remap.status is Status.FAIL and remap.remedy.kind is RemedyKind.REPAIR and remap.remedy.part == bad
    xid = res["gpu.xid"]
    assert xid.status is Status.FAIL and xid.remedy.kind is RemedyKind.REPAIR
    assert xid.remedy.part == bad and "64" in xid.summary and "Row Remapper" in xid.evidence[1]
    # The other GPU's application Xid is its own finding, after the repair.
    assert [(f.remedy, f.status) for f in xid.findings] == [
        (RemedyKind.REPAIR, Status.FAIL), (RemedyKind.NONE, Status.WARN)]
    sxid = res["nvswitch.sxid"]
    assert sxid.status is Status.FAIL and sxid.remedy.kind is RemedyKind.REBOOT
    links = res["pcie.links"]
    assert links.status is Status.FAIL and links.remedy.kind is RemedyKind.REPAIR
    assert bad in (links.remedy.part or "") and "0000:2a:00.0: width 8 < 16" in links.evidence
    acs = res["pcie.acs"]
    assert acs.status is Status.FAIL and acs.observed["acs_enabled"] == {
        "0000:17:01.0": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]}
    nv = res["gpu.nvlink"]
    assert nv.status is Status.FAIL and nv.observed["inactive"] == ["gpu1/link1"]
    assert nv.observed["rising_counters"] == {"gpu0/link1/CRC Errors": 4}
    thr = res["gpu.throttle"]  # nvidia-smi fallback (dcgm-exporter not expected here)
    assert thr.status is Status.WARN and "HW Thermal Slowdown" in thr.summary
    assert res["gpu.gpudirect"].status is Status.FAIL


def test_idle_gpu_link_downclock_is_not_a_fault_but_busy_one_is():
    idle = run(secs(nvsmi=fx("nvidia-smi-q.h100x2.one-bad.txt"),
                    lspci=fx("lspci-vvv-nn-D.idle-gpu-downclocked.txt")))["pcie.links"]
    assert idle.status is Status.PASS and idle.observed["idle_slow"] == ["0000:2a:00.0 2.5 GT/s (idle)"]
    busy = run(secs(nvsmi=fx("nvidia-smi-q.h100x2.good.txt"),
                    lspci=fx("lspci-vvv-nn-D.idle-gpu-downclocked.txt")))["pcie.links"]
    assert busy.status is Status.FAIL and busy.observed["slow"] == ["0000:2a:00.0 2.5 < 32 GT/s"]


def test_links_under_load_from_deep_run_take_precedence():
    res = run(secs(nvsmi=fx("nvidia-smi-q.h100x2.one-bad.txt"),
                   lspci=fx("lspci-vvv-nn-D.idle-gpu-downclocked.txt"),
                   lspci_loaded=fx("lspci-vvv-nn-D.idle-gpu-downclocked.txt"),
                   nvsmi_loaded=fx("nvidia-smi-q.h100x2.good.txt")))
    assert res["pcie.links"].status is Status.FAIL


def test_gpu_missing_from_bus_is_a_repair():
    r = run(secs(nvsmi=fx("nvidia-smi-q.h100x2.good.txt"),
                 lspci=fx("lspci-vvv-nn-D.gpu-missing.txt")))["gpu.count"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    assert "1 of 2 GPUs on the PCIe bus" in r.summary


def test_driver_missing_means_reimage():
    r = run(secs(nvsmi=(127, "")))["gpu.count"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REIMAGE


def test_xid79_needs_reboot_and_serial_comes_from_the_kernel_log():
    r = run(secs(nvsmi=(127, ""), kernel_log=fx("dmesg-T.xid79.log")))["gpu.xid"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REBOOT
    assert r.remedy.part == "GPU at PCI 0000:18:00.0 serial 1654922006536"


def test_real_application_xids_warn_only():
    r = run(secs(kernel_log=corpus_path("pcie-gpu", "dmesg-nvrm-xid-gpud",
                                        "dmesg.decode.iso.xid13.log").read_text()))["gpu.xid"]
    assert r.status is Status.WARN and r.remedy.kind is RemedyKind.NONE


def test_ib_ports_wrong_rate_and_rising_counters():
    res = run(secs(ibstat=fx("ibstat.ndr-one-port-200g.txt"), ib_counters_0=fx("ib-counters.0.txt"),
                   ib_counters_1=fx("ib-counters.1.txt")))
    ports = res["ib.ports"]
    assert ports.status is Status.FAIL and ports.remedy.kind is RemedyKind.REPAIR
    assert "mlx5_1/1" in ports.remedy.part and "0xa088c20300000002" in ports.remedy.part
    ctr = res["ib.counters"]
    assert ctr.status is Status.FAIL and "mlx5_1/1" in ctr.summary
    assert ctr.observed["rising"]["mlx5_0/1"] == {"symbol_error": 4}


def test_real_roce_ports_down():
    exp = Expectations(gpus=0, ib_ports=8, ib_rate_gbps=400,
                       settings=HealthSettings(fabric_link_layer="Ethernet"))
    ibstat = corpus_path("ib", "ibstat-a100-h100-gpud", "ibstat.47.0.h100.some.down.1").read_text()
    r = run(secs(ibstat=ibstat), exp)["ib.ports"]
    assert r.status is Status.FAIL and r.observed["active_at_rate"] == 6
    assert set(r.observed["bad"]) == {"mlx5_5/1", "mlx5_11/1"}


def test_firmware_off_manifest():
    exp = Expectations(gpus=2, ib_ports=2, ib_rate_gbps=400,
                       firmware={"gpu_vbios": ["96.00.99.00.01"], "hca_firmware": {"MT4129": "28.42.1000"}})
    r = run(secs(nvsmi=fx("nvidia-smi-q.h100x2.good.txt"), ibstat=fx("ibstat.ndr-one-port-200g.txt")),
            exp)["firmware.versions"]
    assert r.status is Status.FAIL and r.remedy.part == "HCA mlx5_1"
    assert r.evidence == ["mlx5_1 (MT4129): firmware 28.39.1002, expected 28.42.1000"]


def test_disk_zfs_docker():
    full = run(secs(df=fx("df-P-B1.one-full.txt"), zpool=fx("zpool-list.degraded.txt")),
               Expectations(settings=HealthSettings(zfs=True)))
    assert full["disk.usage"].status is Status.FAIL and "/var/lib/docker 97.3%" in full["disk.usage"].summary
    assert full["zfs.docker"].status is Status.FAIL and full["zfs.docker"].remedy.kind is RemedyKind.REPAIR
    ok = run(secs(zpool=fx("zpool-list.online.txt"), docker_info=fx("docker-info.zfs.json")),
             Expectations(settings=HealthSettings(zfs=True)))["zfs.docker"]
    assert ok.status is Status.PASS and ok.observed["docker_driver"] == "zfs"
    overlay = run(secs(zpool=fx("zpool-list.online.txt"),
                       docker_info=fx("docker-info.zfs.json").replace('"zfs"', '"overlay2"')),
                  Expectations(settings=HealthSettings(zfs=True)))["zfs.docker"]
    assert overlay.status is Status.FAIL and overlay.remedy.kind is RemedyKind.REIMAGE
    assert run(secs(df="Filesystem 1-blocks\n"), NO_GPU)["disk.usage"].status is Status.PASS
    assert run(secs(df="garbage"), NO_GPU)["disk.usage"].status is Status.ERROR


def test_dcgm_exporter_reasons_and_absence():
    exp = Expectations(gpus=2)
    r = run(secs(dcgm=fx("dcgm-exporter.metrics.txt")), exp)["gpu.throttle"]
    assert r.status is Status.WARN
    assert r.observed["reasons"]["00000000:2A:00.0"] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert r.observed["reasons"]["00000000:18:00.0"] == ["SW Power Cap"]
    down = run(secs(dcgm=(7, "curl: (7) Failed to connect to 127.0.0.1 port 9400")), exp)["gpu.throttle"]
    assert down.status is Status.FAIL and down.remedy.kind is RemedyKind.REIMAGE


def test_kernel_log_allow_list():
    text = fx("dmesg-iso.bad-host.log")
    r = run(secs(kernel_errors=text), NO_GPU)["kernel.log"]
    # Xid/SXid/bandwidth lines are judged by their own checks; ACPI noise is allowed by default.
    assert r.status is Status.WARN and len(r.evidence) == 4
    assert any("Machine check" in e for e in r.evidence)
    allowed = run(secs(kernel_errors=text), Expectations(settings=HealthSettings(
        kernel_log_allow=["Machine check events", "loading NVIDIA", "NVRM: GPU"])))["kernel.log"]
    assert allowed.status is Status.PASS
    bad_re = run(secs(kernel_errors=text), Expectations(settings=HealthSettings(
        kernel_log_allow=["("])))["kernel.log"]
    assert bad_re.status is Status.ERROR and "kernel_log_allow" in bad_re.summary


def test_dcgm_diag_deep():
    res = run(secs(dcgm_diag=(226, fx("dcgmi-diag-r2.one-fail.json"))), deep=True)
    r = res["gpu.dcgm_diag"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.REPAIR
    assert r.evidence[0] == ("dcgmi diag PCIe failed on GPU 1: GPU 1 host-to-device bandwidth "
                             "3.9 GB/s is below 19.0 GB/s")
    assert "gpu.dcgm_diag" not in run(secs())


def test_docker_gpu_container():
    exp = Expectations(gpus=2, settings=HealthSettings(docker_gpu_image="nvcr.io/nvidia/cuda:12.4.1-base"))
    ok = run(secs(docker_gpu="GPU 0: NVIDIA H100 (UUID: a)\nGPU 1: NVIDIA H100 (UUID: b)"), exp)
    assert ok["docker.gpu"].status is Status.PASS
    bad = run(secs(docker_gpu=(125, "could not select device driver \"\" with capabilities: [[gpu]]")), exp)
    assert bad["docker.gpu"].status is Status.FAIL


@pytest.mark.parametrize("mode", ["peermem", "dmabuf"])
def test_gpudirect_modes(mode):
    exp = Expectations(gpus=2, ib_ports=2, settings=HealthSettings(gpudirect=mode))
    r = run(secs(modules="nvidia 1 0 - Live\nnvidia_peermem 1 0 - Live\n", meta="kernel=6.8.0-49-generic"), exp)
    assert r["gpu.gpudirect"].status is Status.PASS
    old = run(secs(modules="nvidia 1 0 - Live\n", meta="kernel=5.4.0-200-generic"), exp)
    assert old["gpu.gpudirect"].status is Status.FAIL


def test_transceiver_firmware_from_mlxlink():
    exp = Expectations(gpus=0, ib_ports=2, ib_rate_gbps=400,
                       firmware={"transceiver_firmware": {"MMA4Z00-NS400": "47.171.0"}})
    r = run(secs(transceivers=fx("mlxlink-m.two-ports.txt")), exp)["firmware.versions"]
    assert r.status is Status.FAIL
    assert r.remedy.part == "transceiver in mlx5_1 (MMA4Z00-NS400 serial MT2301FT00002)"
    assert len(r.observed) == 2
    no_tool = run(secs(transceivers=(127, "")), exp)["firmware.versions"]
    assert no_tool.status is Status.FAIL and "mlxlink" in no_tool.evidence[0]


def test_lspci_without_root_is_an_error_not_a_pass():
    # What lspci -vvv prints for a non-root user: the header, no capability list.
    text = "\n".join(ln if "Capabilities" not in ln else "\tCapabilities: <access denied>"
                     for ln in fx("lspci-vvv-nn-D.narrow-link-acs-on.txt").splitlines()
                     if not ln.startswith("\t\t"))
    res = run(secs(lspci=text, nvsmi=fx("nvidia-smi-q.h100x2.good.txt")))
    assert res["pcie.links"].status is Status.ERROR and "root" in res["pcie.links"].summary
    assert res["pcie.acs"].status is Status.ERROR


def test_fabric_manager_log_sxids_warn():
    fm = corpus_path("pcie-gpu", "dmesg-nvrm-xid-gpud", "fabricmanager.log").read_text()
    r = run(secs(kernel_log="", fabricmanager_log=fm))["nvswitch.sxid"]
    assert r.status is Status.WARN and r.observed["events"] == {"12028@0000:86:00.0": 1}


def test_real_a10_pending_row_remap_needs_a_gpu_reset():
    nvsmi = corpus_path("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud",
                        "nvidia-smi-query.535.129.03.out.0.valid.a10").read_text()
    exp = Expectations(gpus=1, gpu_model="A10", settings=HealthSettings(dcgm_exporter=False))
    res = run(secs(nvsmi=nvsmi), exp)
    r = res["gpu.row_remap"]
    assert r.status is Status.FAIL and r.remedy.kind is RemedyKind.RESET_GPU
    assert r.remedy.part == "GPU at PCI 0000:07:00.0 module 1 serial 1324521052681"
    assert res["gpu.count"].status is Status.PASS and res["gpu.ecc"].status is Status.PASS


def test_real_consumer_gpus_fail_ecc():
    nvsmi = corpus_path("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud",
                        "nvidia-smi-query.535.154.05.out.0.valid").read_text()
    exp = Expectations(gpus=8, gpu_model="H100", settings=HealthSettings(dcgm_exporter=False))
    res = run(secs(nvsmi=nvsmi), exp)
    assert res["gpu.ecc"].status is Status.FAIL and res["gpu.ecc"].remedy.kind is RemedyKind.REIMAGE
    assert res["gpu.count"].status is Status.FAIL and "are not H100" in res["gpu.count"].summary


def test_kernel_log_folds_repeated_messages():
    text = corpus_path("pcie-gpu", "dmesg-nvrm-xid-gpud", "dmesg.0.log").read_text()
    r = run(secs(kernel_errors=text), NO_GPU)["kernel.log"]
    # The real log: 30 identical nvidia-peermem errors with different timestamps (its Xid lines
    # are judged by gpu.xid, not here).
    assert r.status is Status.WARN and r.observed == {"lines": 30, "distinct": 1}
    assert r.evidence[0].startswith("30x ") and "nv_get_p2p_free_callback" in r.evidence[0]




def test_ecc_off_on_a_525_driver_fails_instead_of_not_applicable():
    exp = Expectations(gpus=1, gpu_model="H800", settings=HealthSettings(dcgm_exporter=False))
    real = corpus_path("pcie-gpu", "nvidia-smi-q-nvlink-topo-h800x8-llm-action",
                       "nvidia-smi-q-i0.525.105.17.h800").read_text()
    # `-i 0` printed one of the 8 attached GPUs: say so, so gpu.count is not the point here.
    real = real.replace("Attached GPUs                             : 8",
                        "Attached GPUs                             : 1")
    ecc = run(secs(nvsmi=real), exp)["gpu.ecc"]
    assert ecc.status is Status.FAIL and ecc.remedy.kind is RemedyKind.REIMAGE
    assert ecc.remedy.part == "GPU at PCI 0000:18:00.0 module 5 serial 1651323018291"
    pending = run(secs(nvsmi=fx("nvidia-smi-q.525.h800.ecc-pending-on.txt").replace(
        ": 8\n", ": 1\n", 1)), exp)["gpu.ecc"]
    assert pending.status is Status.FAIL and pending.remedy.kind is RemedyKind.REBOOT
    good = run(secs(nvsmi=fx("nvidia-smi-q.525.h800.ecc-on.txt")), exp)["gpu.ecc"]
    assert good.status is Status.PASS


def test_ecc_off_pending_on_with_a_470_layout_asks_for_a_reboot():
    exp = Expectations(gpus=2, gpu_model="A100", settings=HealthSettings(dcgm_exporter=False))
    res = run(secs(nvsmi=fx("nvidia-smi-q.470.a100x2.one-ecc-off-pending-on.txt")), exp)
    ecc = res["gpu.ecc"]
    assert ecc.status is Status.FAIL and ecc.remedy.kind is RemedyKind.REBOOT
    assert ecc.remedy.part == "GPU at PCI 0000:2a:00.0 serial 1651323018292"  # no Module ID on 470
    assert res["gpu.count"].status is Status.PASS
    g = parse_nvsmi(fx("nvidia-smi-q.470.a100x2.one-ecc-off-pending-on.txt")).gpus[0]
    assert (g.pcie_gen_max, g.width_max, g.module_id, g.fabric_state) == (5, 16, None, None)
