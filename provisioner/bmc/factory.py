"""Opening a host's BMC from the inventory: credentials, TLS policy, vendor class."""

from __future__ import annotations

import logging
import threading

from provisioner.bmc.nic_select import NicRuleLike
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.bmc.vendors import detect_vendor, vendor_class
from provisioner.inventory import Host, Site
from provisioner.inventory.credentials import resolve_credentials
from provisioner.redfish.client import ClientOptions, RedfishClient
from provisioner.secrets import Secret

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()  # (host, BMC URL): one warning per host per command
_warned_lock = threading.Lock()


def warn_unverified_tls(site: Site, host: Host) -> bool:
    """Warn (once per host per process) that this BMC's certificate is not checked; True if so."""
    if host.bmc.verify_tls:
        return False
    key = (host.name, host.bmc.url)
    with _warned_lock:
        if key in _warned:
            return True
        _warned.add(key)
    log.warning(
        "warning: %s: TLS certificate of BMC %s is NOT verified (verify_tls: false in %s): "
        "anyone on the BMC network can pose as it and receive its password; give the site a "
        "ca_bundle instead",
        host.name, host.bmc.url, site.path,
    )
    return True


def client_options(site: Site, host: Host) -> ClientOptions:
    """The Redfish connection policy for a host (site settings, per-host TLS overrides)."""
    redfish = site.settings.redfish
    return ClientOptions(
        verify_tls=host.bmc.verify_tls,
        ca_bundle=host.bmc.ca_bundle,
        timeout_s=redfish.timeout_s,
        retries=redfish.retries,
    )


def bmc_for_client(
    client: RedfishClient,
    *,
    vendor_hint: str | None = None,
    nic_rule: NicRuleLike | None = None,
    provisioning_mac: str | None = None,
) -> RedfishBMC:
    """Wrap a logged-in client in the vendor class its System's Manufacturer calls for.

    What the BMC says it is wins over the inventory's hint (a mislabelled rack stays safe);
    the hint decides only where the BMC does not say.
    """
    probe = RedfishBMC(client)
    system = probe.system()
    vendor = detect_vendor(client.root, system) or vendor_hint
    bmc = vendor_class(vendor)(client, nic_rule=nic_rule, provisioning_mac=provisioning_mac)
    bmc._system_path, bmc._system, bmc._system_at = probe._system_path, system, probe._system_at
    return bmc


def open_redfish(
    url: str,
    username: str,
    password: Secret,
    options: ClientOptions | None = None,
    *,
    name: str = "",
    vendor_hint: str | None = None,
    nic_rule: NicRuleLike | None = None,
    provisioning_mac: str | None = None,
) -> RedfishBMC:
    """Log in to a BMC by URL and return its vendor implementation (closes on failure)."""
    client = RedfishClient(url, username, password, options, name=name)
    try:
        client.login()
        return bmc_for_client(
            client, vendor_hint=vendor_hint, nic_rule=nic_rule, provisioning_mac=provisioning_mac
        )
    except BaseException:
        client.close()
        raise


def open_bmc(site: Site, host: Host) -> RedfishBMC:
    """The BMC of an inventory host, logged in; call ``close()`` (or use ``closing``) after."""
    warn_unverified_tls(site, host)
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
