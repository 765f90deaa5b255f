"""Generated dnsmasq configuration, iPXE scripts and cloud-init seed against golden files.

Regenerate after an intended change with PROVISIONER_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from netaddr import IPAddress, IPNetwork

from provisioner.deploy import cloudinit
from provisioner.deploy.embedded import ipxe
from provisioner.deploy.embedded.dnsmasq import (
    DnsmasqConfig,
    Reservation,
    parse_ignored,
    parse_offers,
    render_config,
    render_hosts,
)
from provisioner.exceptions import InputError
from tests.support import machine

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "deploy"
NET = IPNetwork("198.18.0.0/24")
BASE = "http://198.18.254.1:8080"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PROVISIONER_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from its golden file"


def _cfg(**kw: object) -> DnsmasqConfig:
    args: dict[str, object] = {
        "interface": "provbr0",
        "server_address": "198.18.0.1",
        "network": NET,
        "gateway": IPAddress("198.18.0.1"),
        "dns": (),
        "ipxe_boot_url": f"{BASE}/ipxe/boot.ipxe",
        "workdir": Path("/var/lib/provisioner-lab/deploy"),
    }
    args.update(kw)
    return DnsmasqConfig(**args)  # type: ignore[arg-type]


RES = [
    Reservation("52:54:00:18:00:02", IPAddress("198.18.0.101"), "lab-host02"),
    Reservation("52:54:00:18:00:01", IPAddress("198.18.0.100"), "lab-host01"),
]


def test_dnsmasq_config_static_only() -> None:
    golden("dnsmasq.conf", render_config(_cfg()))


def test_dnsmasq_config_with_dynamic_pool_and_dns() -> None:
    text = render_config(
        _cfg(dynamic_range="198.18.0.200,198.18.0.250", dns=("198.18.0.1",), gateway=None)
    )
    golden("dnsmasq-dynamic.conf", text)
    assert "dhcp-ignore=tag:!known" not in text


def test_dnsmasq_hosts_file() -> None:
    golden("dhcp-hosts", render_hosts(RES, NET))


def test_dnsmasq_accepts_the_generated_config(tmp_path: Path) -> None:
    machine.require_tools(["dnsmasq"], "scripts/deps/50-deploy.list")
    cfg = _cfg(workdir=tmp_path)
    cfg.conf_path.write_text(render_config(cfg))
    cfg.hosts_path.write_text(render_hosts(RES, NET))
    r = subprocess.run(
        ["dnsmasq", "--test", f"--conf-file={cfg.conf_path}"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "syntax check OK" in r.stderr


@pytest.mark.parametrize(
    ("res", "message"),
    [
        ([Reservation("52:54:00:18:00:01", IPAddress("10.0.0.5"), "h1")], "outside 198.18.0.0/24"),
        ([Reservation("52:54:00:18:00:01", IPAddress("198.18.0.5"), "bad_name")], "not a valid DHCP"),
        (
            [
                Reservation("52:54:00:18:00:01", IPAddress("198.18.0.5"), "h1"),
                Reservation("52:54:00:18:00:01", IPAddress("198.18.0.6"), "h2"),
            ],
            "share the MAC",
        ),
    ],
)
def test_bad_reservations_are_refused(res: list[Reservation], message: str) -> None:
    with pytest.raises(InputError, match=message):
        render_hosts(res, NET)


def test_dnsmasq_log_parsing() -> None:
    text = (GOLDEN / "dnsmasq-log-dhcp.log").read_text()
    assert parse_offers(text) == {"52:54:00:18:00:01": {"198.18.0.100"}}
    assert parse_ignored(text) == {"52:54:00:18:00:07"}


def test_ipxe_scripts() -> None:
    golden("chain.ipxe", ipxe.chain_script(BASE))
    golden(
        "image-lab-host01.ipxe",
        ipxe.image_script(
            base_url=BASE,
            host="lab-host01",
            mac="52:54:00:18:00:01",
            address=IPAddress("198.18.0.100"),
            network=NET,
            gateway=IPAddress("198.18.0.1"),
            key="KEY-lab-host01",
        ),
    )
    golden(
        "autoinstall-gpu-r01-u03.ipxe",
        ipxe.autoinstall_script(
            base_url=BASE,
            host="gpu-r01-u03",
            kernel_url="http://10.10.0.3/ubuntu/noble/vmlinuz",
            initrd_url="http://10.10.0.3/ubuntu/noble/initrd",
            iso_url="http://10.10.0.3/ubuntu/noble/ubuntu-24.04.1-live-server-amd64.iso",
            key="KEY-gpu-r01-u03",
        ),
    )
    golden("local-boot.ipxe", ipxe.local_boot_script("lab-host01"))


def test_ipxe_refuses_values_that_break_the_command_line() -> None:
    with pytest.raises(InputError, match="kernel command line"):
        ipxe.autoinstall_script(
            base_url=BASE, host="h", kernel_url="k", initrd_url="i", iso_url="http://x/a b.iso",
            key="k",
        )


SEED = cloudinit.SeedSpec(
    hostname="lab-host01",
    instance_id="lab-host01-0123456789ab",
    mac="52:54:00:18:00:01",
    address=IPAddress("198.18.0.100"),
    network=NET,
    gateway=IPAddress("198.18.0.1"),
    dns=("198.18.0.1",),
    ssh_user="provision",
    ssh_authorized_keys=("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests provision@lab",),
    ntp_servers=("198.18.254.1",),
    apt_proxy="http://198.18.254.1:3142",
    phone_home_url=f"{BASE}/phone-home/lab-host01/TOKEN",
)


def test_cloudinit_seed() -> None:
    files = cloudinit.seed_files(SEED)
    golden("seed-meta-data", files["meta-data"])
    golden("seed-user-data", files["user-data"])
    golden("seed-network-config", files["network-config"])


def test_seed_refuses_an_unreachable_host() -> None:
    from dataclasses import replace

    with pytest.raises(InputError, match="no SSH key"):
        cloudinit.user_data(replace(SEED, ssh_authorized_keys=()))
    with pytest.raises(InputError, match="outside its network"):
        cloudinit.network_config(replace(SEED, address=IPAddress("10.0.0.1")))
