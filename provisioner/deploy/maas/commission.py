"""Commissioning a MAAS machine and setting up the Ready machine before a deploy: GPU count
check, managed tags, the pinned provisioning address and the root disk and storage layout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netaddr import IPAddress, IPNetwork

from provisioner.deploy.base import DeployRequest, ProgressFn
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.disks import choose_root_disk
from provisioner.deploy.maas.errors import MAASError
from provisioner.deploy.maas.machines import MAASMachines
from provisioner.deploy.maas.models import Interface, Machine
from provisioner.deploy.maas.settings import MAASSettings
from provisioner.deploy.maas.status import NodeStatus

if TYPE_CHECKING:
    from provisioner.inventory.model import Host

NVIDIA_PCI_VENDOR = "10de"


class GPUCountMismatch(MAASError):
    """Commissioning found fewer (or more) NVIDIA GPUs than the host's profile has."""


class MAASCommissioning(MAASMachines):
    """Commissioning, and the set-up of a Ready machine (tags, address, disks)."""

    def _commission(
        self,
        client: MAASClient,
        settings: MAASSettings,
        system_id: str,
        name: str,
        progress: ProgressFn,
        *,
        start: bool,
    ) -> Machine:
        """Start commissioning (unless MAAS already runs it) and wait for Ready."""
        if start:
            client.commission(system_id, testing_scripts=settings.commissioning_testing_scripts)
            progress(name, "commission", "commissioning started")
        return self._wait(client, system_id, name, phase="commission",
                          want={NodeStatus.READY}, timeout_s=settings.commission_timeout_s,
                          progress=progress)

    def _check_gpus(
        self,
        client: MAASClient,
        settings: MAASSettings,
        host: Host,
        system_id: str,
        progress: ProgressFn,
    ) -> None:
        """Fail a host whose commissioning found fewer NVIDIA GPUs than its profile has."""
        expected = host.profile.gpus
        if not settings.check_gpus or expected <= 0:
            return
        # MAAS counts every PCI display controller as a GPU, the BMC's VGA included.
        gpus = [
            d for d in client.node_devices(system_id, hardware_type="gpu")
            if d.vendor_id.lower() == NVIDIA_PCI_VENDOR
        ]
        if len(gpus) != expected:
            seen = ", ".join(sorted(d.pci_address or "?" for d in gpus)) or "none"
            raise GPUCountMismatch(
                f"{host.name}: MAAS commissioning of {system_id} found {len(gpus)} NVIDIA GPU(s), "
                f"profile {host.profile.name} has {expected} (PCI addresses: {seen})",
                system_id=system_id,
                hint="reseat or replace the missing GPU and run again, or put the host in "
                "maintenance (`provision maintenance`)",
            )
        progress(host.name, "commission", f"{len(gpus)} NVIDIA GPUs: {gpus[0].product_name}")

    def _configure_ready(
        self,
        client: MAASClient,
        settings: MAASSettings,
        request: DeployRequest,
        machine: Machine,
        progress: ProgressFn,
    ) -> None:
        host = request.host
        sid = machine.system_id
        tags = self._host_tags(host, settings)
        self._ensure_tags(client, tags)
        for t in tags:
            if t not in machine.tag_names:
                client.tag_machines(t, add=[sid])
        # A host moved to another rack or profile keeps no stale tag of the kinds we manage.
        ours = (f"{settings.tag_prefix}profile-", f"{settings.tag_prefix}rack-")
        for t in machine.tag_names:
            if t.startswith(ours) and t not in tags:
                client.tag_machines(t, remove=[sid])
        self._pin_address(client, settings, host, machine, progress)
        hint = host.root_disk or host.profile.root_disk
        root_id: int | None = None
        if hint is not None:
            dev = choose_root_disk(client.block_devices(sid), hint, system_id=sid, host=host.name)
            root_id = dev.id
            if machine.boot_disk is None or machine.boot_disk.id != dev.id:
                client.set_boot_disk(sid, dev.id)
            progress(host.name, "storage", f"root disk {dev.describe()}")
        client.set_storage_layout(sid, layout=settings.storage_layout, root_device=root_id)

    def _wanted_address(
        self, settings: MAASSettings, host: Host, machine: Machine
    ) -> tuple[str, Interface] | None:
        """The planned address to pin on the boot interface, unless it is there already."""
        addr = host.addresses.get("provisioning")
        iface = machine.boot_interface
        if not settings.static_ip or addr is None or iface is None:
            return None
        if any(link.mode == "static" and link.ip_address == str(addr) for link in iface.links):
            return None
        return str(addr), iface

    def _pin_address(
        self,
        client: MAASClient,
        settings: MAASSettings,
        host: Host,
        machine: Machine,
        progress: ProgressFn,
    ) -> None:
        wanted = self._wanted_address(settings, host, machine)
        if wanted is None:
            return
        addr, iface = wanted
        sid = machine.system_id
        subnets = [s for s in client.subnets() if IPAddress(addr) in IPNetwork(s.cidr)]
        if not subnets:
            raise MAASError(
                f"{host.name}: MAAS has no subnet containing its provisioning address {addr}",
                system_id=sid,
                hint="create the provisioning subnet in MAAS, or set settings.maas.static_ip: "
                "false to let MAAS choose addresses",
            )
        subnet = max(subnets, key=lambda s: IPNetwork(s.cidr).prefixlen)
        for link in iface.links:
            client.unlink_subnet(sid, iface.id, link.id)
        client.link_subnet(sid, iface.id, subnet_id=subnet.id, ip_address=addr)
        progress(host.name, "storage", f"static address {addr} on {iface.name} ({subnet.cidr})")
