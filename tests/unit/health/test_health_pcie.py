"""lspci -vvv parser and link/ACS judgement on a real HGX H100 recording and synthetic trees."""

from __future__ import annotations

from pathlib import Path

from provisioner.health.pcie import Topology, judge_link, parse_bandwidth_warnings, parse_lspci
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"


def _findings(devs):
    topo = Topology(devs)
    out = []
    for d in devs:
        if d.is_gpu or d.is_hca:
            for node in topo.path(d):
                out += judge_link(node, topo.parent(node))
    return out


def test_real_hgx_h100_links_are_full_despite_downgraded_flags():
    devs = parse_lspci(corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text())
    assert sum(d.is_gpu for d in devs) == 8
    assert sum(d.is_hca for d in devs) == 12  # 8 ConnectX-7 + 2x2 ConnectX-6 Dx functions
    # lspci flags 16 links "(downgraded)", but each is a Gen5 port with a Gen4 device behind
    # it or a BMC/NIC link: none is on a GPU/HCA path below what both ends can do.
    assert sum(bool(d.sta_downgraded) for d in devs) == 16
    assert _findings(devs) == []
    gpu = next(d for d in devs if d.addr == "0000:19:00.0")
    assert (gpu.cap.speed, gpu.cap.width, gpu.sta.speed, gpu.sta.width) == (32.0, 16, 32.0, 16)
    assert [p.addr for p in Topology(devs).path(gpu)] == [
        "0000:19:00.0", "0000:17:01.0", "0000:16:00.0", "0000:15:01.0"]


def test_real_hgx_acs_off_on_gpu_path_and_on_elsewhere():
    devs = parse_lspci(corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text())
    topo = Topology(devs)
    gpu_ports = {n.addr for d in devs if d.is_gpu or d.is_hca for n in topo.path(d)[1:]
                 if n.port_type == "Downstream Port"}
    assert gpu_ports and all(not next(d for d in devs if d.addr == a).acs_enabled for a in gpu_ports)
    # The storage switch (PMC-Sierra) keeps ACS on: harmless, it carries no GPU traffic.
    storage = next(d for d in devs if d.addr == "0000:82:00.0")
    assert storage.acs_enabled == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    hca = next(d for d in devs if d.addr == "0000:1a:00.0")
    assert hca.serial == "MT2340J88735"


def test_synthetic_narrow_gpu_link_and_acs():
    devs = parse_lspci((FIX / "lspci-vvv-nn-D.narrow-link-acs-on.txt").read_text())
    gpu = next(d for d in devs if d.addr == "0000:2a:00.0")
    assert gpu.vendor == "10de" and gpu.device == "2330" and gpu.is_gpu
    found = _findings(devs)
    assert [(f.addr, f.what, f.current, f.expected) for f in found] == [
        ("0000:2a:00.0", "width", 8, 16)]
    port = next(d for d in devs if d.addr == "0000:17:01.0")
    assert port.port_type == "Downstream Port" and port.acs_enabled


def test_synthetic_idle_gpu_speed_is_a_finding_for_the_check_to_judge():
    devs = parse_lspci((FIX / "lspci-vvv-nn-D.idle-gpu-downclocked.txt").read_text())
    found = _findings(devs)
    assert [(f.addr, f.what) for f in found] == [("0000:2a:00.0", "speed")]


def test_kernel_bandwidth_warning():
    (w,) = parse_bandwidth_warnings((FIX / "dmesg-iso.bad-host.log").read_text().splitlines())
    assert (w.device, w.at, w.width, w.capable_width) == ("0000:2a:00.0", "0000:17:01.0", 4, 16)
