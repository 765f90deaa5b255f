"""HPE iLO 5/6/7."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import BootTarget, NicPort
from provisioner.bmc.firmware_methods import FirmwareQuirks
from provisioner.bmc.redfish_bmc import NETWORK_TARGETS, RedfishBMC
from provisioner.bmc.vendors.hpe_adapters import (
    adapter_locations,
    boot_entry_locations,
    port_link,
)
from provisioner.exceptions import BMCError
from provisioner.redfish.errors import BMCUnsupported

# UEFI device path endings of a port's PXE (IPv4) and HTTP boot (IPv4 + URI) entries.
PATH_SUFFIX = {BootTarget.PXE: "/IPv4(0.0.0.0)", BootTarget.HTTP: "/IPv4(0.0.0.0)/Uri()"}


class HpeBMC(RedfishBMC):
    """iLO takes the boot mode from the BIOS BootMode attribute, not from the override.

    Sending BootSourceOverrideMode is refused there, so it is never sent; UEFI HTTP boot on a
    Legacy-mode host fails early with a clear message instead. PATCHes carry the ETag (If-Match)
    iLO hands out, which the generic code already does.

    A plain Pxe override lets the UEFI boot order pick any PXE-capable port; iLO lists each
    port's entries in ``UefiTargetBootSourceOverride@Redfish.AllowableValues`` (device paths
    with the MAC), so a network boot is aimed at the provisioning port with ``UefiTarget``.
    """

    vendor: ClassVar[str] = "hpe"
    # iLO 5 flashes what the package holds (no Targets in its SimpleUpdate), and its
    # HttpPushUri (/cgi-bin/uploadFile) is a web-form upload with a session key, not the
    # DMTF push: firmware goes by SimpleUpdate from our server.
    # Its SimpleUpdate answers without a task: the flash shows in the UpdateService's
    # Oem.Hpe.State, which is waited on before anything else (a host reset mid-flash).
    firmware_quirks: ClassVar[FirmwareQuirks] = FirmwareQuirks(
        targets_in_image=True, standard_http_push=False, progress_oem="Hpe",
        progress_busy=frozenset({"Uploading", "Verifying", "Writing", "Updating",
                                 "Activating", "Flashing"}),
        progress_failed=frozenset({"Error"}))

    def annotate_ports(self, ports: list[NicPort]) -> list[NicPort]:
        """Location (OCP, LOM, slot) and link from iLO's BaseNetworkAdapters (iLO 5), else
        from the names iLO gives the ports' UEFI boot entries (iLO 6/7)."""
        ports = self._base_adapter_facts(ports)
        where = boot_entry_locations(self.boot_options())
        return [rp.with_location(port, where.get(port.mac)) for port in ports]

    def _base_adapter_facts(self, ports: list[NicPort]) -> list[NicPort]:
        links = rp.obj(rp.obj(rp.obj(self.system().get("Oem")).get("Hpe")).get("Links"))
        collection = rp.odata_id(links.get("NetworkAdapters"))
        if not collection:
            return ports
        where: dict[str, tuple[str, str, str | None]] = {}
        link: dict[str, bool] = {}
        for adapter in self._each_member(collection, "HPE BaseNetworkAdapter"):
            where.update(adapter_locations(adapter))
            link.update(port_link(adapter))
        out = []
        for port in ports:
            port = rp.with_location(port, where.get(port.mac))
            if port.link_up is None and port.mac in link:
                port = replace(port, link_up=link[port.mac])
            out.append(port)
        return out

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        if target == BootTarget.HTTP and current not in (None, "UEFI"):
            raise BMCUnsupported(
                f"UEFI HTTP boot needs UEFI mode but the host is in {current} mode",
                bmc=self.name,
                path=self.system_path(),
                hint="set the BIOS BootMode to Uefi (iLO: System Configuration > Boot Options)",
            )
        return None

    def boot_override(self, target: BootTarget, enabled: str, boot: dict[str, Any]
                      ) -> dict[str, Any]:
        path = self._port_device_path(target, boot)
        if path is None:
            return super().boot_override(target, enabled, boot)
        return {
            "BootSourceOverrideTarget": "UefiTarget",
            "UefiTargetBootSourceOverride": path,
            "BootSourceOverrideEnabled": enabled,
        }

    def _port_device_path(self, target: BootTarget, boot: dict[str, Any]) -> str | None:
        if target not in NETWORK_TARGETS:
            return None
        paths = rp.allowable_values(boot, "UefiTargetBootSourceOverride") or []
        targets = rp.allowable_values(boot, "BootSourceOverrideTarget") or []
        if not paths or "UefiTarget" not in targets:
            return None
        try:
            mac = self.provisioning_port().mac.replace(":", "").upper()
        except BMCError as exc:  # the caller's choice failing, or the BMC's ports unread
            self.warnings.append(f"network boot not aimed at a port: {exc}")
            return None
        matches = [p for p in paths if f"MAC({mac}," in p.upper() and p.endswith(
            PATH_SUFFIX[target])]
        if len(matches) != 1:
            self.warnings.append(
                f"{len(matches)} UEFI boot entries for {target.value} on the provisioning "
                "port: left to the boot order"
            )
            return None
        return matches[0]
