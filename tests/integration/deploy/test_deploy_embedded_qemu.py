"""End to end through the embedded backend with one real VM (qemu, TCG), in a throwaway netns.

The VM has three disks; the root-disk hint names the serial of the SCSI disk, which is enumerated
after a virtio disk (vda) holding a marker, so "the first disk" would be wrong. The test checks
that the image lands on the hinted disk after its sha256 was verified, that the host called back
and booted from disk with the injected SSH key, that the data disks are untouched and that dnsmasq
offered an address only to this host's MAC.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from provisioner.deploy.base import DeployRequest, backend_class
from provisioner.deploy.embedded.dnsmasq import parse_offers
from provisioner.inventory.loader import load_site
from tests.support import machine
from tests.support.qemu_lab import LINK_HOST, PROV_NET, Netns, QemuProcessBMC, QemuVM

# The lab end-to-end test (tests/integration/e2e) checks all of this through `provision rack` on
# three VMs (hinted disk, sha256-verified image, callback, SSH, data disks kept, DHCP only for the
# hosts named); this one drives the backend API directly with a process BMC, 4-5 minutes of TCG,
# so it runs in scripts/test-long rather than in every CI run.
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.longrun]

MAC = "52:54:00:e8:00:01"
HOST_IP = f"{PROV_NET}.100"
MARKER = b"PROVISIONER-DATA-MARKER-do-not-touch\n"


def _require() -> None:
    machine.require("root")
    machine.require_tools(["qemu-system-x86_64", "dnsmasq", "ip", "debootstrap", "ssh",
                           "ssh-keygen"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LINK_HOST if False else "127.0.0.1", 0))
        return int(s.getsockname()[1])


def _site(tmp: Path, netns: Netns, port: int, pubkey: str, serial: str) -> Path:
    d = tmp / "site"
    d.mkdir()
    (d / "site.yml").write_text(
        f"""\
site: deploytest
settings:
  deploy_backend: embedded
  ntp_servers: [{LINK_HOST}]
  ssh_user: provision
  ssh_authorized_keys: ["{pubkey}"]
  embedded:
    netns: {netns.name}
    interface: {netns.bridge}
    server_address: {PROV_NET}.1
    http_address: {LINK_HOST}
    http_port: {port}
    log_dir: {tmp / "deploy"}
    callback_timeout_s: 300
networks:
  provisioning:
    cidr: {PROV_NET}.0/24
    gateway: {PROV_NET}.1
    reserved: ["{PROV_NET}.1-{PROV_NET}.99"]
credentials:
  test-bmc: {{username: admin, password: {{env: DEPLOYTEST_UNUSED}}}}
profiles:
  vm:
    provisioning_nic: {{mac_prefix: "52:54:00:e8"}}
    root_disk: {{size_gb_min: 1}}
racks:
  - name: t1
    index: 1
    host_name_template: "dt-host{{u:02d}}"
    defaults: {{profile: vm, bmc: {{vendor: generic, credentials: test-bmc}}}}
    hosts:
      - u: 1
        bmc: {{address: 198.19.232.10}}
        provisioning_mac: "{MAC}"
        root_disk: {{serial: {serial}}}
"""
    )
    return d / "site.yml"


def _ssh(key: Path, cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "ssh", "-i", str(key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5",
            "-o", "BatchMode=yes", f"provision@{HOST_IP}", cmd,
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_image_deploy_to_hinted_disk_boots_and_answers_ssh(tmp_path: Path) -> None:
    _require()
    netns = Netns(name=f"pdep{os.getpid() % 100000}")
    key = tmp_path / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
    )
    disks = []
    for bus, serial, gib in (("virtio", "PDT-DATA0", 1), ("scsi", "PDT-ROOT", 3), ("virtio", "PDT-DATA1", 1)):
        path = tmp_path / f"{serial}.raw"
        with path.open("wb") as f:
            f.truncate(gib << 30)
        disks.append((bus, serial, path))
    with disks[0][2].open("r+b") as f:
        f.write(MARKER)
    vm = QemuVM(netns=netns, workdir=tmp_path, mac=MAC, disks=disks)
    bmc = QemuProcessBMC(vm)
    netns.up()
    backend = None
    try:
        site = load_site(_site(tmp_path, netns, _free_port(), key.with_suffix(".pub").read_text().strip(), "PDT-ROOT"))
        host = site.host("dt-host01")
        req = DeployRequest(host=host, mac=MAC, method="image", bmc=bmc, timeout_s=900)
        backend = backend_class("embedded")()
        backend.prepare(site, [req])
        phases: list[tuple[str, str]] = []
        t0 = time.monotonic()
        outcome = backend.deploy(req, lambda h, p, m: phases.append((p, m)))
        took = time.monotonic() - t0
        console = vm.console.read_text(errors="replace")
        assert outcome.ok, f"{outcome.reason}\n--- console tail ---\n{console[-3000:]}"
        print(f"deploy took {took:.0f} s, phases {outcome.phases}")

        # the ramdisk chose the hinted SCSI disk (sdX), not the first enumerated one (vda)
        assert "root disk: /dev/sd" in outcome.log, outcome.log
        image = backend.image  # type: ignore[attr-defined]
        assert f"sha256 verified: {image.sha256}" in outcome.log
        assert [p for p, _ in phases][:3] == ["pxe", "install", "reboot"]
        assert bmc.actions[:2] == ["boot:Pxe", "cycle"]
        assert "boot:Hdd" in bmc.actions

        # the host answers SSH with the injected key; / is on the hinted disk
        deadline = time.monotonic() + 180
        while True:
            r = _ssh(key, "hostname; lsblk -J -o NAME,SERIAL,MOUNTPOINT,SIZE")
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(5)
        assert r.returncode == 0, f"ssh failed: {r.stderr}\n{console[-2000:]}"
        hostname, _, blk = r.stdout.partition("\n")
        assert hostname.strip() == "dt-host01"
        devices = json.loads(blk)["blockdevices"]
        root_disk = next(
            d for d in devices if any(c.get("mountpoint") == "/" for c in d.get("children", []))
        )
        assert root_disk["serial"] == "PDT-ROOT"
        assert root_disk["size"] == "3G"
        # the root filesystem was grown to the disk
        df = _ssh(key, "df -BM --output=size / | tail -1").stdout.strip()
        assert int(df.rstrip("M")) > 2500, df
        ntp = _ssh(key, "cat /etc/systemd/timesyncd.conf.d/*.conf 2>/dev/null").stdout
        assert LINK_HOST in ntp
    finally:
        vm.stop()
        if backend is not None:
            backend.close()
        netns.down()

    # data disks untouched
    with disks[0][2].open("rb") as f:
        assert f.read(len(MARKER)) == MARKER
    with disks[2][2].open("rb") as f:
        assert f.read(1 << 20) == bytes(1 << 20)
    # only this MAC was ever offered an address
    offers = parse_offers((tmp_path / "deploy" / "dnsmasq.log").read_text())
    assert offers == {MAC: {HOST_IP}}
