"""A 1-host UEFI (OVMF) lab: the BMC reports UEFI boot and a PXE override reaches provbr0."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import requests
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.inventory.credentials import resolve_credentials
from provisioner.lab import daemons
from provisioner.lab.netns import in_netns, netns_exists
from provisioner.lab.network import free_slot
from tests.support import machine
from tests.support.waiting import wait_until

pytestmark = pytest.mark.lab

NETNS = f"plabue{os.getpid() % 1000:03d}"
runner = CliRunner()


@pytest.fixture(scope="module")
def uefi_lab(tmp_path_factory):
    machine.require("root", "tun")
    machine.fail_if_missing(daemons.missing_tools("uefi"), "scripts/deps/20-lab.list")
    mp = pytest.MonkeyPatch()
    mp.setenv("PROVISIONER_LAB_NETNS", NETNS)
    mp.setenv("PROVISIONER_LAB_SLOT", str(free_slot(NETNS)))
    mp.setenv("PROVISIONER_INVENTORY", str(tmp_path_factory.mktemp("uefi-inventory")))
    mp.delenv("PROVISIONER_LAB_STATE_DIR", raising=False)
    runner.invoke(app, ["lab", "down"])
    res = runner.invoke(
        app, ["lab", "up", "--hosts", "1", "--disks", "2", "--firmware", "uefi", "--memory", "512"]
    )
    assert res.exit_code == 0, res.output
    yield
    res = runner.invoke(app, ["lab", "down"])
    mp.undo()
    assert res.exit_code == 0, res.output
    assert not netns_exists(NETNS)


def test_uefi_vm_pxe_boots_through_its_bmc(uefi_lab, tmp_path):
    site = load_site("lab")
    host = site.hosts[0]
    creds = resolve_credentials(site, host.bmc.credentials)
    kw = {
        "auth": (creds.username, creds.password.reveal()),
        "verify": str(site.resolve_path(site.settings.redfish.ca_bundle)),
        "timeout": 30,
    }
    system = (
        host.bmc.url
        + requests.get(f"{host.bmc.url}/redfish/v1/Systems", **kw).json()["Members"][0]["@odata.id"]
    )
    assert requests.get(system, **kw).json()["Boot"]["BootSourceOverrideMode"] == "UEFI"
    capture = tmp_path / "provbr0.txt"
    with capture.open("w") as fh:
        tcpdump = subprocess.Popen(
            in_netns(["tcpdump", "-l", "-n", "-i", "provbr0", "udp", "port", "67"], NETNS),
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "listening on" in capture.read_text(), "tcpdump to listen")
        boot = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
        assert requests.patch(system, json={"Boot": boot}, **kw).status_code in (200, 204)
        reset = f"{system}/Actions/ComputerSystem.Reset"
        assert requests.post(reset, json={"ResetType": "On"}, **kw).status_code in (200, 204)
        mac = site.hosts[0].profile.provisioning_nic.mac_prefix
        deadline = time.monotonic() + 180  # OVMF under TCG takes ~20 s to reach iPXE
        while f"Request from {mac}:01" not in capture.read_text():
            assert time.monotonic() < deadline, capture.read_text()
            time.sleep(1)
    finally:
        requests.post(
            f"{system}/Actions/ComputerSystem.Reset", json={"ResetType": "ForceOff"}, **kw
        )
        tcpdump.terminate()
        tcpdump.wait(timeout=10)
