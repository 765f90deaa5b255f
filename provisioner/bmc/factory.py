"""Opening a BMC by URL: log in, then wrap the session in the vendor class the BMC reports."""

from __future__ import annotations

from provisioner.bmc.base import BootPortChooser
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.bmc.vendors import detect_vendor, vendor_class
from provisioner.redfish.client import ClientOptions, RedfishClient
from provisioner.secrets import Secret


def bmc_for_client(
    client: RedfishClient,
    *,
    vendor_hint: str | None = None,
    boot_port: BootPortChooser | None = None,
    system_id: str | None = None,
) -> RedfishBMC:
    """Wrap a logged-in client in the vendor class its System's Manufacturer calls for.

    What the BMC says it is wins over the inventory's hint (a mislabelled rack stays safe);
    the hint decides only where the BMC does not say.
    """
    probe = RedfishBMC(client, system_id=system_id)
    system = probe.system()
    vendor = detect_vendor(client.root, system) or vendor_hint
    bmc = vendor_class(vendor)(client, boot_port=boot_port, system_id=system_id)
    bmc._system_path, bmc._system, bmc._system_at = probe._system_path, system, probe._system_at
    bmc._system_members = probe._system_members
    return bmc


def open_redfish(
    url: str,
    username: str,
    password: Secret,
    options: ClientOptions | None = None,
    *,
    name: str = "",
    vendor_hint: str | None = None,
    boot_port: BootPortChooser | None = None,
    system_id: str | None = None,
) -> RedfishBMC:
    """Log in to a BMC by URL and return its vendor implementation (closes on failure)."""
    client = RedfishClient(url, username, password, options, name=name)
    try:
        client.login()
        return bmc_for_client(
            client, vendor_hint=vendor_hint, boot_port=boot_port, system_id=system_id,
        )
    except BaseException:
        client.close()
        raise
