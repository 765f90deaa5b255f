"""The MAAS deploy backend: the same `provision rack` on sites whose PXE, DHCP and DNS run in MAAS.

Per host: find the machine by its provisioning MAC (or enlist it with Redfish power settings),
commission it, tag it with its profile and rack, pin the root disk from the host's hint, set the
storage layout, deploy with the site's series, kernel and cloud-init user-data, and poll MAAS
until the machine is Deployed or failed. Release (optionally erasing) makes it ready for a
re-image. Only machines matching the named hosts' MACs are ever touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from provisioner.deploy.base import (
    DeployBackend,
    DeployOutcome,
    DeployRequest,
    ProgressFn,
    register_backend,
)
from provisioner.deploy.maas.commission import GPUCountMismatch
from provisioner.deploy.maas.errors import MAASError
from provisioner.deploy.maas.planner import MAASPlanner
from provisioner.deploy.maas.session import log, tag_name
from provisioner.deploy.maas.settings import host_link_gbps
from provisioner.deploy.maas.status import COMMISSION_FROM, HANDS_OFF, RELEASABLE, NodeStatus
from provisioner.deploy.maas.userdata import encode, user_data
from provisioner.exceptions import ProvisionerError

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

__all__ = ["GPUCountMismatch", "MAASBackend", "tag_name"]


@register_backend
class MAASBackend(MAASPlanner, DeployBackend):
    """Drives a MAAS region through its REST API 2.0 (the parts: see session.py)."""

    name = "maas"
    # MAAS powers hosts through its own Redfish driver: the workflow needs no BMC session.
    drives_power: ClassVar[bool] = False

    def host_link_gbps(self, site: Site) -> float:
        """settings.maas.host_link_gbps (MAAS does not gate image streams: waves use it alone)."""
        return host_link_gbps(site)

    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        """Check the key and the region, and create the profile and rack tags."""
        client, settings, _ = self._connect(site)
        version = client.version()
        user = self._whoami(client)
        log.info("MAAS %s at %s as %s", version.get("version", "?"), settings.url, user)
        self._preflight(client, settings, requests)
        tags: set[str] = set()
        for r in requests:
            tags.update(self._host_tags(r.host, settings))
        self._ensure_tags(client, sorted(tags))

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        """Enlist/commission/deploy one host; a failure becomes an outcome, never an exception."""
        outcome = DeployOutcome(host=request.host.name, ok=False)
        try:
            self._deploy(request, progress, outcome)
        except ProvisionerError as exc:
            outcome.reason = exc.message
            outcome.log += f"\n{exc}"
            log.warning("%s", exc.message)
        return outcome

    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        """Release the host's machine in MAAS and wait until it is Ready again.

        With ``erase`` MAAS wipes every disk of that machine (settings.maas.erase_mode);
        machines of other hosts are never looked at.
        """
        client, settings, _ = self._connect()
        host = request.host.name
        machine = self._find(client, request)
        if machine is None:
            log.info("%s: not in MAAS, nothing to release", host)
            return
        self._check_owner(client, machine, host)
        status = machine.node_status
        if status in (NodeStatus.READY, NodeStatus.NEW) or status in COMMISSION_FROM:
            return
        if status in (NodeStatus.RELEASING, NodeStatus.DISK_ERASING):
            pass  # already on its way to Ready
        elif status in RELEASABLE:
            client.release(
                machine.system_id,
                erase=erase,
                quick_erase=erase and settings.erase_mode == "quick",
                secure_erase=erase and settings.erase_mode == "secure",
                comment=f"provisioner: re-image {host}",
            )
        else:
            raise MAASError(
                f"{host}: MAAS machine {machine.describe()} cannot be released",
                system_id=machine.system_id,
                hint="wait for MAAS to finish its current operation, or abort it in MAAS",
            )
        self._wait(
            client,
            machine.system_id,
            host,
            phase="release",
            want={NodeStatus.READY},
            timeout_s=settings.release_timeout_s,
            progress=None,
        )

    def close(self) -> None:
        """Nothing runs locally for MAAS; drop the connection state."""
        self._known_tags.clear()

    def _deploy(self, request: DeployRequest, progress: ProgressFn, outcome: DeployOutcome) -> None:
        client, settings, site = self._connect()
        host = request.host
        name = host.name
        phases = outcome.phases

        start = self._clock()
        machine = self._find(client, request)
        if machine is None:
            machine = self._enlist(client, settings, site, request)
            progress(name, "enlist", f"enlisted as MAAS machine {machine.system_id}")
        else:
            self._check_owner(client, machine, name)
            machine = self._reconcile(client, site, request, machine)
            progress(name, "enlist", f"found MAAS machine {machine.describe()}")
        sid = machine.system_id
        phases["enlist"] = self._clock() - start
        outcome.log += f"MAAS machine {sid}\n"

        status = machine.node_status
        if status == NodeStatus.DEPLOYED:
            progress(name, "deploy", f"MAAS machine {sid} is already deployed")
            outcome.ok = True
            outcome.reason = "already deployed in MAAS"
            return
        if status is None or status in HANDS_OFF:
            raise MAASError(
                f"{name}: MAAS machine {machine.describe()}: not touching it",
                system_id=sid,
                hint="look at the machine in MAAS (mark it fixed, abort, or release it), "
                "then run again",
            )
        if status != NodeStatus.DEPLOYING:
            if status in (NodeStatus.ALLOCATED, NodeStatus.FAILED_DEPLOYMENT):
                # Left over from an earlier attempt: back to Ready so the storage can be set.
                start = self._clock()
                client.release(sid, comment=f"provisioner: retry deploy of {name}")
                machine = self._wait(client, sid, name, phase="release", want={NodeStatus.READY},
                                     timeout_s=settings.release_timeout_s, progress=progress)
                phases["release"] = self._clock() - start
                status = machine.node_status
            if status in (NodeStatus.RELEASING, NodeStatus.DISK_ERASING):
                machine = self._wait(client, sid, name, phase="release", want={NodeStatus.READY},
                                     timeout_s=settings.release_timeout_s, progress=progress)
                status = machine.node_status
            start = self._clock()
            running = status in (NodeStatus.COMMISSIONING, NodeStatus.TESTING)
            commissioned = running or status in COMMISSION_FROM
            if commissioned:
                machine = self._commission(client, settings, sid, name, progress, start=not running)
            try:
                self._check_gpus(client, settings, host, sid, progress)
            except GPUCountMismatch:
                if commissioned:
                    raise
                # MAAS's inventory is from an older commissioning: the GPU may be back.
                progress(name, "commission", "GPU count differs: commissioning again")
                machine = self._commission(client, settings, sid, name, progress, start=True)
                self._check_gpus(client, settings, host, sid, progress)
            phases["commission"] = self._clock() - start

            start = self._clock()
            self._configure_ready(client, settings, request, machine, progress)
            phases["storage"] = self._clock() - start

            start = self._clock()
            client.deploy(
                sid,
                osystem=settings.osystem,
                distro_series=settings.distro_series,
                hwe_kernel=settings.kernel,
                user_data_b64=encode(
                    request.user_data or user_data(site, host)
                ),
            )
            progress(name, "deploy", f"deploying {settings.osystem}/{settings.distro_series}")
        else:
            start = self._clock()
        timeout = settings.deploy_timeout_s or request.timeout_s
        machine = self._wait(client, sid, name, phase="deploy", want={NodeStatus.DEPLOYED},
                             timeout_s=timeout, progress=progress)
        phases["deploy"] = self._clock() - start
        outcome.ok = True
        outcome.log += f"deployed: {machine.describe()}\n"
