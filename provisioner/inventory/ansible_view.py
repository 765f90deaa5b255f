"""The site as Ansible sees it: groups by rack and profile, host and group variables."""

from __future__ import annotations

import re
from typing import Any

from provisioner.inventory.model import Host, Site


def group_name(prefix: str, name: str) -> str:
    """An Ansible-safe group name (letters, digits, underscores)."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


def host_vars(site: Site, host: Host) -> dict[str, Any]:
    """Variables Ansible gets for one host (connection, placement, hardware expectations)."""
    hv: dict[str, Any] = {
        "provisioner_site": site.name,
        "provisioner_rack": host.rack,
        "provisioner_u": host.u,
        "provisioner_profile": host.profile.name,
        "provisioner_gpus": host.profile.gpus,
        "provisioner_gpu_model": host.profile.gpu_model,
        "provisioner_nvswitch": host.profile.nvswitch,
        "provisioner_ib_hcas": host.profile.ib_hcas,
        "provisioner_ib_rate_gbps": host.profile.ib_rate_gbps,
        "provisioner_bmc_address": host.bmc.address,
        "provisioner_bmc_vendor": host.bmc.vendor,
        "provisioner_addresses": {k: str(v) for k, v in host.addresses.items()},
        "ansible_user": site.settings.ssh_user,
    }
    if "provisioning" in host.addresses:
        hv["ansible_host"] = str(host.addresses["provisioning"])
    if site.settings.ssh_private_key:
        hv["ansible_ssh_private_key_file"] = str(site.resolve_path(site.settings.ssh_private_key))
    if host.provisioning_mac:
        hv["provisioner_provisioning_mac"] = host.provisioning_mac
    if site.settings.ntp_servers:
        hv["common_ntp_servers"] = list(site.settings.ntp_servers)
    if site.settings.apt_proxy:
        hv["common_apt_proxy"] = site.settings.apt_proxy
    hv.update(host.vars)
    return hv


def ansible_inventory(site: Site) -> dict[str, Any]:
    """The site in ``ansible-inventory --list`` shape (groups, children, hostvars)."""
    groups: dict[str, dict[str, Any]] = {}

    def group(name: str) -> dict[str, Any]:
        return groups.setdefault(name, {"hosts": [], "vars": {}, "children": []})

    site_group = group(group_name("site", site.name))
    site_group["vars"] = dict(site.vars)
    for rack in site.racks:
        g = group(group_name("rack", rack.name))
        g["vars"] = {"provisioner_rack_location": dict(rack.location)}
    for profile in site.profiles.values():
        g = group(group_name("profile", profile.name))
        g["vars"] = dict(profile.vars)
    hostvars: dict[str, dict[str, Any]] = {}
    for h in site.hosts:
        site_group["hosts"].append(h.name)
        group(group_name("rack", h.rack))["hosts"].append(h.name)
        group(group_name("profile", h.profile.name))["hosts"].append(h.name)
        if h.profile.gpus:
            group("gpu_hosts")["hosts"].append(h.name)
        hostvars[h.name] = host_vars(site, h)
    return {"groups": groups, "hostvars": hostvars}
