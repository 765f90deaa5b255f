"""The MAAS machine of a host: found by its MACs (never by name alone), enlisted with Redfish
power settings when absent, and its name and power settings brought in line with the site."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.deploy.base import DeployRequest
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.errors import MAASError
from provisioner.deploy.maas.models import Machine
from provisioner.deploy.maas.session import log
from provisioner.deploy.maas.settings import MAASSettings
from provisioner.deploy.maas.status import RELEASABLE
from provisioner.deploy.maas.waiting import MAASWaiting
from provisioner.inventory.credentials import resolve_credentials
from provisioner.secrets import Secret

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Site


class MAASMachines(MAASWaiting):
    """Finding, enlisting and reconciling the machines of the named hosts only."""

    def _find(self, client: MAASClient, request: DeployRequest) -> Machine | None:
        """The MAAS machine owning the host's MACs; refuses when they belong to two machines."""
        macs = self._macs(request)
        found = client.machines(mac_addresses=macs)
        mine = [m for m in found if m.macs & set(macs)]
        if len({m.system_id for m in mine}) > 1:
            raise MAASError(
                f"{request.host.name}: its MACs {', '.join(macs)} belong to several MAAS "
                f"machines: {', '.join(m.describe() for m in mine)}",
                system_id=mine[0].system_id,
                hint="delete the stale machine in MAAS, or fix provisioning_mac in the site file",
            )
        return mine[0] if mine else None

    @staticmethod
    def _macs(request: DeployRequest) -> list[str]:
        macs = [request.mac.lower()]
        for m in request.macs:
            if str(m).lower() not in macs:
                macs.append(str(m).lower())
        return macs

    def _check_owner(self, client: MAASClient, machine: Machine, host: str) -> None:
        user = self._whoami(client)
        if machine.owner and machine.owner != user and machine.node_status in RELEASABLE:
            raise MAASError(
                f"{host}: MAAS machine {machine.describe()} is owned by {machine.owner!r}, "
                f"not by {user!r}: not touching it",
                system_id=machine.system_id,
                hint="release it in MAAS yourself if it is really free, then run again",
            )

    def _power_parameters(
        self, site: Site, host: Host, request: DeployRequest
    ) -> dict[str, str | Secret]:
        creds = resolve_credentials(site, host.bmc.credentials)
        address = host.bmc.address if not host.bmc.port else f"{host.bmc.address}:{host.bmc.port}"
        params: dict[str, str | Secret] = {
            "power_address": address,
            "power_user": creds.username,
            "power_pass": creds.password,
        }
        if request.system_id:
            params["node_id"] = request.system_id
        return params

    def _power_differs(
        self, client: MAASClient, machine: Machine, request: DeployRequest
    ) -> bool:
        """Whether MAAS's Redfish settings for the machine differ from the site's."""
        assert self._site is not None
        wanted = self._power_parameters(self._site, request.host, request)
        current = client.power_parameters(machine.system_id)
        return any(current.get(k) != v for k, v in wanted.items())

    def _enlist(
        self, client: MAASClient, settings: MAASSettings, site: Site, request: DeployRequest
    ) -> Machine:
        host = request.host
        clash = client.machines(hostnames=[host.name])
        if clash:
            m = clash[0]
            raise MAASError(
                f"{host.name}: MAAS already has a machine called {host.name} ({m.system_id}) "
                f"with other MACs ({', '.join(sorted(m.macs)) or 'none'}) than {request.mac}",
                system_id=m.system_id,
                hint="fix provisioning_mac in the site file, or delete the stale machine in MAAS",
            )
        return client.create_machine(
            hostname=host.name,
            mac_addresses=self._macs(request),
            architecture=settings.architecture,
            power_type="redfish",
            power_parameters=self._power_parameters(site, host, request),
            commission=True,
            domain=settings.domain,
        )

    def _reconcile(
        self, client: MAASClient, site: Site, request: DeployRequest, machine: Machine
    ) -> Machine:
        """Bring an existing machine's name and Redfish power settings in line with the site."""
        host = request.host
        fields: dict[str, str | Secret] = {}
        if machine.hostname != host.name:
            fields["hostname"] = host.name
        if machine.power_type != "redfish" or self._power_differs(client, machine, request):
            fields["power_type"] = "redfish"
            for k, v in self._power_parameters(site, host, request).items():
                fields[f"power_parameters_{k}"] = v
        if not fields:
            return machine
        log.info("%s: updating MAAS machine %s: %s", host.name, machine.system_id,
                 ", ".join(sorted(k for k in fields if k != "power_parameters_power_pass")))
        return client.update_machine(machine.system_id, fields)
