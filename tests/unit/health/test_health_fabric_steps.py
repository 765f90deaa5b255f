"""Steps of the fabric checks: how pcie.links sorts degraded links (on a synthetic switch tree
written by the project) and how firmware.versions reads its manifest entries."""

from __future__ import annotations

import pytest

from provisioner.health.checks.fabric import _judge_paths, _wanted
from provisioner.health.pcie import Link, PciDevice, Topology


def _bridge(addr: str, port_type: str, secondary: int, sta: Link) -> PciDevice:
    return PciDevice(addr, "PCI bridge", "PLX Technology PEX 89144", port_type=port_type,
                     cap=Link(32.0, 16), sta=sta, secondary_bus=secondary)


def _gpu(addr: str, sta: Link) -> PciDevice:
    return PciDevice(addr, "3D controller", "NVIDIA Corporation GH100 [H100 SXM5 80GB]",
                     vendor="10de", port_type="Endpoint", cap=Link(32.0, 16), sta=sta)


def test_shared_switch_link_is_judged_once_and_only_an_idle_gpus_own_link_is_spared():
    root = _bridge("0000:10:00.0", "Root Port", 0x11, Link(16.0, 8))
    upstream = _bridge("0000:11:00.0", "Upstream Port", 0x12, Link(16.0, 8))  # narrow and slow
    down_a = _bridge("0000:12:00.0", "Downstream Port", 0x13, Link(16.0, 16))
    down_b = _bridge("0000:12:01.0", "Downstream Port", 0x14, Link(16.0, 16))
    idle = _gpu("0000:13:00.0", Link(16.0, 16))  # own link downclocked, GPU idle
    busy = _gpu("0000:14:00.0", Link(16.0, 16))  # own link slow under load
    devices = [root, upstream, down_a, down_b, idle, busy]

    found = _judge_paths([idle, busy], Topology(devices), busy={busy.addr})

    # The switch uplink above both GPUs is reported once, against the first GPU below it.
    assert [(f.addr, f.what, d.addr) for f, d in found.width] == [(upstream.addr, "width", idle.addr)]
    # Its slow speed counts even though that GPU is idle: only a GPU's own link downclocks.
    assert [(f.addr, d.addr) for f, d in found.speed] == [(upstream.addr, idle.addr),
                                                        (busy.addr, busy.addr)]
    assert [(f.addr, d.addr) for f, d in found.idle_slow] == [(idle.addr, idle.addr)]
    assert [f.addr for f, _ in found.bad] == [upstream.addr, upstream.addr, busy.addr]


@pytest.mark.parametrize(("expected", "key", "want"), [
    ({"MT4129": "28.39.1002", "default": "28.40.1000"}, "MT4129", "28.39.1002"),  # by CA type
    ({"MT4129": "28.39.1002", "default": "28.40.1000"}, "MT4125", "28.40.1000"),  # fallback
    ({"MT4129": "28.39.1002", "default": "28.40.1000"}, None, "28.40.1000"),  # type unknown
    ({"MT4129": "28.39.1002"}, "MT4125", None),  # not in the manifest: not judged
    ("28.39.1002", "MT4125", "28.39.1002"),  # one version for every type
    (["28.39.1002", "28.39.2048"], None, ["28.39.1002", "28.39.2048"]),  # any of a list
])
def test_firmware_manifest_entry_by_type_with_default(expected, key, want):
    assert _wanted(expected, key) == want
