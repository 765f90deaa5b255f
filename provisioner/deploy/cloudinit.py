"""cloud-init NoCloud seed for a deployed host: hostname, SSH keys, static network, NTP, apt proxy.

The deploy ramdisk writes these three documents into the new root filesystem under
``/var/lib/cloud/seed/nocloud/`` so that the first boot from disk configures the host without
any metadata service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from netaddr import IPAddress, IPNetwork

from provisioner.exceptions import InputError


@dataclass(frozen=True)
class SeedSpec:
    """What the first boot of one host must set up."""

    hostname: str
    instance_id: str
    mac: str
    address: IPAddress
    network: IPNetwork
    gateway: IPAddress | None = None
    dns: tuple[str, ...] = ()
    ssh_user: str = "provision"
    ssh_authorized_keys: tuple[str, ...] = ()
    ntp_servers: tuple[str, ...] = ()
    apt_proxy: str | None = None
    phone_home_url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _check(spec: SeedSpec) -> None:
    if spec.address not in spec.network:
        raise InputError(
            f"host {spec.hostname}: address {spec.address} is outside its network {spec.network}",
            hint="fix networks.provisioning.cidr or the host's pinned address in the site file",
        )
    if not spec.ssh_authorized_keys:
        raise InputError(
            f"host {spec.hostname}: no SSH key to install, the host would be unreachable",
            hint="set settings.ssh_authorized_keys in the site file",
        )


def meta_data(spec: SeedSpec) -> str:
    """The NoCloud ``meta-data`` document."""
    return yaml.safe_dump(
        {"instance-id": spec.instance_id, "local-hostname": spec.hostname}, sort_keys=False
    )


def user_data_dict(spec: SeedSpec) -> dict[str, Any]:
    """The ``#cloud-config`` mapping (also embedded in autoinstall's ``user-data`` section)."""
    _check(spec)
    doc: dict[str, Any] = {
        "hostname": spec.hostname,
        "preserve_hostname": False,
        "manage_etc_hosts": True,
        "users": [
            {
                "name": spec.ssh_user,
                "shell": "/bin/bash",
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "lock_passwd": True,
                "ssh_authorized_keys": list(spec.ssh_authorized_keys),
            }
        ],
        "ssh_pwauth": False,
        "disable_root": True,
    }
    if spec.ntp_servers:
        doc["ntp"] = {"enabled": True, "servers": list(spec.ntp_servers)}
    if spec.apt_proxy:
        doc["apt"] = {"proxy": spec.apt_proxy}
    if spec.phone_home_url:
        # cloud-init's phone_home runs at the end of the first boot from disk: the backend
        # takes it as proof that the new OS runs (not the ramdisk, not an old install).
        doc["phone_home"] = {"url": spec.phone_home_url, "post": ["instance_id"], "tries": 10}
    doc.update(spec.extra)
    return doc


def user_data(spec: SeedSpec) -> str:
    """The NoCloud ``user-data`` document."""
    return "#cloud-config\n" + yaml.safe_dump(user_data_dict(spec), sort_keys=False)


def network_config_dict(spec: SeedSpec) -> dict[str, Any]:
    """Network config v2: the provisioning NIC, matched by MAC, with its static address."""
    _check(spec)
    eth: dict[str, Any] = {
        "match": {"macaddress": spec.mac.lower()},
        "set-name": "prov0",
        "addresses": [f"{spec.address}/{spec.network.prefixlen}"],
    }
    if spec.gateway is not None:
        # gateway4, not routes: cloud-init's ENI renderer (Debian) drops a v2 default route
        eth["gateway4"] = str(spec.gateway)
    if spec.dns:
        eth["nameservers"] = {"addresses": list(spec.dns)}
    return {"version": 2, "ethernets": {"prov0": eth}}


def network_config(spec: SeedSpec) -> str:
    """The NoCloud ``network-config`` document."""
    return yaml.safe_dump(network_config_dict(spec), sort_keys=False)


def seed_files(spec: SeedSpec) -> dict[str, str]:
    """All NoCloud seed documents by file name."""
    return {
        "meta-data": meta_data(spec),
        "user-data": user_data(spec),
        "network-config": network_config(spec),
    }
