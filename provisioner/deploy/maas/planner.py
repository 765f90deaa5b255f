"""The MAAS dry run: what ``deploy`` (or a re-image) would change for each host, read from
MAAS without changing anything (`provision rack --dry-run` prints it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from provisioner.deploy.base import DeployRequest
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.commission import MAASCommissioning
from provisioner.deploy.maas.disks import choose_root_disk, describe_hint
from provisioner.deploy.maas.dry_run import HostPlan, MAASPlan
from provisioner.deploy.maas.errors import MAASError, MAASNotReady
from provisioner.deploy.maas.models import Machine
from provisioner.deploy.maas.settings import MAASSettings
from provisioner.deploy.maas.status import COMMISSION_FROM, HANDS_OFF, RELEASABLE, NodeStatus

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, RootDiskHint, Site


class MAASPlanner(MAASCommissioning):
    """The dry run over the same reads the deploy makes."""

    def plan(
        self,
        site: Site,
        requests: Sequence[DeployRequest],
        *,
        reimage: bool = False,
        erase: bool = False,
    ) -> MAASPlan:
        """What ``deploy`` (or ``release`` then ``deploy`` when ``reimage``) would change."""
        client, settings, _ = self._connect(site)
        user = self._whoami(client)
        existing_tags = set(client.tags())
        plan = MAASPlan(url=settings.url)
        try:
            self._preflight(client, settings, requests)
        except MAASNotReady as exc:
            plan.problems.append(exc.message)
        for req in requests:
            plan.hosts.append(
                self._plan_host(client, settings, req, user, existing_tags, reimage, erase)
            )
        return plan

    def _plan_host(
        self,
        client: MAASClient,
        settings: MAASSettings,
        req: DeployRequest,
        user: str,
        existing_tags: set[str],
        reimage: bool,
        erase: bool,
    ) -> HostPlan:
        host = req.host
        machine = self._find(client, req)
        hp = HostPlan(
            host=host.name,
            mac=req.mac,
            system_id=machine.system_id if machine else None,
            maas_status=machine.status_name if machine else "absent",
        )
        tags = self._host_tags(host, settings)
        os_text = f"deploy {settings.osystem}/{settings.distro_series}" + (
            f" kernel {settings.kernel}" if settings.kernel else ""
        )
        hint = host.root_disk or host.profile.root_disk
        layout = f"storage layout {settings.storage_layout}"
        if machine is None:
            hp.actions = [
                f"enlist {host.name} with MAC {req.mac}, power redfish at {host.bmc.address}",
                "commission",
                "tag " + ", ".join(t if t in existing_tags else f"{t} (new tag)" for t in tags),
            ]
            addr = host.addresses.get("provisioning")
            if settings.static_ip and addr is not None:
                hp.actions.append(f"static address {addr} on the boot interface")
            if hint:
                hp.actions.append(f"boot disk matching [{describe_hint(hint)}]")
            hp.actions += [layout, os_text]
            return hp
        status = machine.node_status
        if machine.owner and machine.owner != user and status in RELEASABLE:
            hp.blocked = f"MAAS machine {machine.system_id} is owned by {machine.owner!r}"
            return hp
        if status in HANDS_OFF or status is None:
            hp.blocked = f"MAAS machine {machine.system_id} is {machine.status_name!r}"
            return hp
        if status == NodeStatus.DEPLOYED and not reimage:
            return hp  # already deployed: nothing to do
        if status == NodeStatus.DEPLOYING and not reimage:
            hp.actions.append("wait for the deployment MAAS is running")
            return hp
        if machine.hostname != host.name:
            hp.actions.append(f"rename {machine.hostname!r} to {host.name!r}")
        if machine.power_type != "redfish":
            hp.actions.append(f"set power type redfish ({host.bmc.address})")
        elif self._power_differs(client, machine, req):
            hp.actions.append(f"update Redfish power parameters ({host.bmc.address})")
        if status in RELEASABLE:
            erase_text = f" and erase all its disks ({settings.erase_mode})" if erase else ""
            hp.actions.append(f"release{erase_text}")
        if status in COMMISSION_FROM:
            hp.actions.append("commission")
        missing = [t for t in tags if t not in machine.tag_names]
        if missing:
            hp.actions.append(
                "tag " + ", ".join(t if t in existing_tags else f"{t} (new tag)" for t in missing)
            )
        wanted = self._wanted_address(settings, host, machine)
        if wanted:
            hp.actions.append(f"static address {wanted[0]} on {wanted[1].name}")
        if hint:
            hp.actions.append(self._plan_disk(client, machine, host, hint))
        hp.actions += [layout, os_text]
        return hp

    def _plan_disk(
        self, client: MAASClient, machine: Machine, host: Host, hint: RootDiskHint
    ) -> str:
        if machine.node_status in (NodeStatus.NEW, NodeStatus.COMMISSIONING):
            return f"boot disk matching [{describe_hint(hint)}] (after commissioning)"
        try:
            dev = choose_root_disk(
                client.block_devices(machine.system_id), hint,
                system_id=machine.system_id, host=host.name,
            )
        except MAASError as exc:
            return f"FAIL: {exc.message}"
        return f"boot disk {dev.describe()}"
