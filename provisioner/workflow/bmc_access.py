"""Opening an inventory host's BMC: its credentials, the site's TLS and retry policy."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from provisioner.bmc.factory import open_redfish
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.inventory import Host, Site
from provisioner.inventory.credentials import resolve_credentials
from provisioner.redfish.client import ClientOptions
from provisioner.workflow.nic_choice import NicPolicy

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


def client_options(site: Site, host: Host, *, connections: int | None = None
                   ) -> ClientOptions:
    """The Redfish connection policy for a host (site settings, per-host TLS overrides);
    ``connections`` caps the site's requests in flight per BMC (a wide fan-out asks fewer)."""
    redfish = site.settings.redfish
    return ClientOptions(
        verify_tls=host.bmc.verify_tls,
        ca_bundle=host.bmc.ca_bundle,
        timeout_s=redfish.timeout_s,
        retries=redfish.retries,
        connections=min(redfish.connections, connections or redfish.connections),
    )


def check_credentials(site: Site, hosts: Sequence[Host]) -> None:
    """Resolve each credentials reference these hosts use, once, before any BMC is asked:
    one that cannot be (a variable not set, a missing file) is bad input for the whole run,
    not a failure of each host."""
    for ref in sorted({host.bmc.credentials for host in hosts}):
        resolve_credentials(site, ref)


def nic_policy(host: Host) -> NicPolicy:
    """How this host's provisioning NIC is chosen: its pinned MAC, else its profile's rule."""
    return NicPolicy(rule=host.profile.provisioning_nic, pinned_mac=host.provisioning_mac)


def open_bmc(site: Site, host: Host, *, connections: int | None = None) -> RedfishBMC:
    """The BMC of an inventory host, logged in; call ``close()`` (or use ``closing``) after."""
    warn_unverified_tls(site, host)
    creds = resolve_credentials(site, host.bmc.credentials)
    return open_redfish(
        host.bmc.url,
        creds.username,
        creds.password,
        client_options(site, host, connections=connections),
        name=f"{host.name} (BMC {host.bmc.address})",
        vendor_hint=None if host.bmc.vendor == "generic" else host.bmc.vendor,
        boot_port=nic_policy(host).choose,
        system_id=host.bmc.system,
    )
