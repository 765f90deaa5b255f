"""`provision boot pxe` + `provision power cycle` make a libvirt VM PXE-boot, seen on the wire.

Uses the virtual lab (libvirt/qemu TCG VMs, one sushy-emulator per VM over TLS with its own
credentials) in its own namespace and address slot; the DHCP request of the VM's provisioning
NIC is captured with tcpdump on the lab's provisioning bridge.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.lab import daemons
from provisioner.lab.netns import in_netns
from provisioner.lab.plan import LabPlan
from tests.support import machine
from tests.support.waiting import wait_until

pytestmark = pytest.mark.lab

NETNS = "plabrf"
SLOT = "13"
runner = CliRunner()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    machine.require("root", "tun")
    machine.fail_if_missing(daemons.missing_tools(), "scripts/deps/20-lab.list")
    mp = pytest.MonkeyPatch()
    mp.setenv("PROVISIONER_LAB_NETNS", NETNS)
    mp.setenv("PROVISIONER_LAB_SLOT", SLOT)
    mp.setenv("PROVISIONER_INVENTORY", str(tmp_path_factory.mktemp("rf-lab-inventory")))
    mp.setenv("PROVISIONER_STATE_DIR", str(tmp_path_factory.mktemp("rf-lab-state")))
    mp.delenv("PROVISIONER_LAB_STATE_DIR", raising=False)
    runner.invoke(app, ["lab", "down"])  # a previous run killed half-way
    res = runner.invoke(app, ["lab", "up", "--hosts", "1", "--disks", "2", "--memory", "384"])
    assert res.exit_code == 0, res.output
    yield LabPlan.from_env(hosts=1, disks=2, memory_mib=384)
    runner.invoke(app, ["lab", "down"])
    mp.undo()


def _capture(out: Path) -> subprocess.Popen:
    fh = out.open("w")
    proc = subprocess.Popen(
        in_netns(["tcpdump", "-l", "-n", "-i", "provbr0", "udp", "port", "67"], NETNS),
        stdout=fh, stderr=subprocess.STDOUT,
    )
    wait_until(lambda: "listening on" in out.read_text(), "tcpdump to listen")
    return proc


def test_discover_then_pxe_boot_through_the_cli(lab, tmp_path):
    host = lab.host(1)
    res = runner.invoke(app, ["discover", "--site", "lab", "--json"])
    assert res.exit_code == 0, res.output
    (found,) = json.loads(res.stdout)
    assert found["facts"]["provisioning_mac"] == host.provisioning_mac
    assert found["facts"]["extra"]["auth"] == "basic"  # sushy-emulator has no sessions
    assert len(found["facts"]["drives"]) == 2

    capture = tmp_path / "provbr0.txt"
    tcpdump = _capture(capture)
    try:
        res = runner.invoke(app, ["boot", "pxe", host.name, "--site", "lab"])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["power", "cycle", host.name, "--site", "lab"])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["power", "status", host.name, "--site", "lab", "--json"])
        assert json.loads(res.stdout)[0]["detail"] == "On"
        want = f"Request from {host.provisioning_mac}"
        deadline = time.monotonic() + 120
        while want not in capture.read_text():
            assert time.monotonic() < deadline, capture.read_text()
            time.sleep(0.5)
    finally:
        runner.invoke(app, ["power", "off", host.name, "--site", "lab"])
        tcpdump.terminate()
        tcpdump.wait(timeout=10)
    res = runner.invoke(app, ["power", "status", host.name, "--site", "lab", "--json"])
    assert json.loads(res.stdout)[0]["detail"] == "Off"
