"""Opening an inventory host's BMC: its credentials, the site's TLS and retry policy."""

from __future__ import annotations

from provisioner.bmc.factory import open_redfish
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.inventory import Host, Site
from provisioner.inventory.credentials import resolve_credentials
from provisioner.redfish.client import ClientOptions


def client_options(site: Site, host: Host) -> ClientOptions:
    """The Redfish connection policy for a host (site settings, per-host TLS overrides)."""
    redfish = site.settings.redfish
    return ClientOptions(
        verify_tls=host.bmc.verify_tls,
        ca_bundle=host.bmc.ca_bundle,
        timeout_s=redfish.timeout_s,
        retries=redfish.retries,
    )


def open_bmc(site: Site, host: Host) -> RedfishBMC:
    """The BMC of an inventory host, logged in; call ``close()`` (or use ``closing``) after."""
    creds = resolve_credentials(site, host.bmc.credentials)
    return open_redfish(
        host.bmc.url,
        creds.username,
        creds.password,
        client_options(site, host),
        name=f"{host.name} (BMC {host.bmc.address})",
        vendor_hint=None if host.bmc.vendor == "generic" else host.bmc.vendor,
        nic_rule=host.profile.provisioning_nic,
        provisioning_mac=host.provisioning_mac,
    )
