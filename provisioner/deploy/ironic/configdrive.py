"""The config drive Ironic writes at the end of the root disk: our cloud-init user-data (the
same as the embedded backend's NoCloud seed), the host's name, and its static provisioning
address as OpenStack network_data.json (cloud-init's ConfigDrive datasource reads all three)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from provisioner.deploy import cloudinit

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Site


def seed_spec(site: Site, host: Host, mac: str) -> cloudinit.SeedSpec | None:
    """The host's first-boot settings; None when it has no planned provisioning address."""
    from provisioner.deploy.embedded.backend import authorized_keys

    net = site.networks.get("provisioning")
    address = host.addresses.get("provisioning")
    if net is None or address is None:
        return None
    s = site.settings
    return cloudinit.SeedSpec(
        hostname=host.name, instance_id=f"{host.name}-{uuid.uuid4().hex[:12]}", mac=mac,
        address=address, network=net.cidr, gateway=net.gateway, dns=tuple(net.dns),
        ssh_user=s.ssh_user, ssh_authorized_keys=authorized_keys(site),
        ntp_servers=tuple(s.ntp_servers), apt_proxy=s.apt_proxy,
    )


def network_data(spec: cloudinit.SeedSpec) -> dict[str, Any]:
    """OpenStack network_data.json: the provisioning NIC by MAC with its static address."""
    network: dict[str, Any] = {
        "id": "provisioning", "link": "prov0", "type": "ipv4",
        "ip_address": str(spec.address), "netmask": str(spec.network.netmask), "routes": [],
    }
    if spec.gateway is not None:
        network["routes"] = [{"network": "0.0.0.0", "netmask": "0.0.0.0",
                              "gateway": str(spec.gateway)}]
    return {
        "links": [{"id": "prov0", "type": "phy", "ethernet_mac_address": spec.mac.lower()}],
        "networks": [network],
        "services": [{"type": "dns", "address": a} for a in spec.dns],
    }


def config_drive(site: Site, host: Host, mac: str, user_data: str | None = None
                 ) -> dict[str, Any]:
    """The ``configdrive`` of a deploy or rebuild request (Ironic builds the ISO from it);
    ``user_data`` replaces the site's own cloud-config."""
    spec = seed_spec(site, host, mac)
    meta = {"hostname": host.name, "name": host.name,
            "meta": {"site": site.name, "rack": host.rack, "u": str(host.u),
                     "profile": host.profile.name}}
    if spec is None:
        # no planned address (DHCP): the user and keys still come through

        from provisioner.deploy.maas.userdata import user_data as site_user_data

        return {"user_data": user_data or site_user_data(site, host), "meta_data": meta}
    meta["public_keys"] = {str(i): k for i, k in enumerate(spec.ssh_authorized_keys)}
    return {"user_data": user_data or cloudinit.user_data(spec), "meta_data": meta,
            "network_data": network_data(spec)}
