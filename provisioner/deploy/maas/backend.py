"""The MAAS deploy backend: the same `provision rack` on sites whose PXE, DHCP and DNS run in MAAS.

Per host: find the machine by its provisioning MAC (or enlist it with Redfish power settings),
commission it, tag it with its profile and rack, pin the root disk from the host's hint, set the
storage layout, deploy with the site's series, kernel and cloud-init user-data, and poll MAAS
until the machine is Deployed or failed. Release (optionally erasing) makes it ready for a
re-image. Only machines matching the named hosts' MACs are ever touched.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, ClassVar

from netaddr import IPAddress, IPNetwork

from provisioner.deploy.base import (
    DeployBackend,
    DeployOutcome,
    DeployRequest,
    ProgressFn,
    register_backend,
)
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.disks import choose_root_disk, describe_hint
from provisioner.deploy.maas.dry_run import HostPlan, MAASPlan
from provisioner.deploy.maas.errors import MAASError, MAASNotReady, MAASTimeout
from provisioner.deploy.maas.models import Interface, Machine
from provisioner.deploy.maas.poller import StatePoller
from provisioner.deploy.maas.settings import (
    MAASSettings,
    host_link_gbps,
    maas_settings,
    resolve_api_key,
)
from provisioner.deploy.maas.status import BUSY, RELEASABLE, NodeStatus
from provisioner.deploy.maas.userdata import encode, user_data
from provisioner.exceptions import DeployError, ProvisionerError
from provisioner.inventory.credentials import resolve_credentials
from provisioner.secrets import Secret

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, RootDiskHint, Site

log = logging.getLogger(__name__)

NVIDIA_PCI_VENDOR = "10de"


class GPUCountMismatch(MAASError):
    """Commissioning found fewer (or more) NVIDIA GPUs than the host's profile has."""


_TAG_BAD = re.compile(r"[^a-zA-Z0-9_-]")

# States from which the backend starts a commissioning itself.
_COMMISSION_FROM = frozenset(
    {NodeStatus.NEW, NodeStatus.FAILED_COMMISSIONING, NodeStatus.FAILED_TESTING}
)
# States the backend refuses to act on: a person has to look at the machine in MAAS.
_HANDS_OFF = frozenset(
    {
        NodeStatus.BROKEN,
        NodeStatus.MISSING,
        NodeStatus.RETIRED,
        NodeStatus.RESERVED,
        NodeStatus.RESCUE_MODE,
        NodeStatus.ENTERING_RESCUE_MODE,
        NodeStatus.EXITING_RESCUE_MODE,
        NodeStatus.FAILED_ENTERING_RESCUE_MODE,
        NodeStatus.FAILED_EXITING_RESCUE_MODE,
        NodeStatus.FAILED_RELEASING,
        NodeStatus.FAILED_DISK_ERASING,
    }
)


def tag_name(prefix: str, kind: str, value: str) -> str:
    """A MAAS tag name (letters, digits, ``-`` and ``_``), e.g. ``rack-r01``."""
    return _TAG_BAD.sub("_", f"{prefix}{kind}-{value}")


@register_backend
class MAASBackend(DeployBackend):
    """Drives a MAAS region through its REST API 2.0."""

    name = "maas"
    # MAAS powers hosts through its own Redfish driver: the workflow needs no BMC session.
    drives_power: ClassVar[bool] = False
    EVENTS_ON_FAILURE: ClassVar[int] = 5

    def __init__(
        self,
        site: Site | None = None,
        *,
        client: MAASClient | None = None,
        settings: MAASSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._site = site
        self._client = client
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._user: str | None = None
        self._known_tags: set[str] = set()
        self._state_poller: StatePoller | None = None
        self._lock = threading.Lock()

    def host_link_gbps(self, site: Site) -> float:
        """settings.maas.host_link_gbps (MAAS does not gate image streams: waves use it alone)."""
        return host_link_gbps(site)

    # -- set-up -------------------------------------------------------------------------

    def _connect(self, site: Site | None = None) -> tuple[MAASClient, MAASSettings, Site]:
        with self._lock:
            if site is not None:
                self._site = site
            if self._site is None:
                raise DeployError(
                    "the MAAS backend was used before prepare() was given the site",
                    hint="this is a bug in the caller: call prepare(site, requests) first",
                )
            if self._settings is None:
                self._settings = maas_settings(self._site)
            if self._client is None:
                s = self._settings
                verify: bool | str = s.verify_tls
                if s.verify_tls and s.ca_bundle:
                    verify = str(self._site.resolve_path(s.ca_bundle))
                self._client = MAASClient(
                    s.url,
                    resolve_api_key(self._site, s),
                    timeout_s=s.http_timeout_s,
                    retries=s.retries,
                    verify_tls=verify,
                )
            return self._client, self._settings, self._site

    def _whoami(self, client: MAASClient) -> str:
        if self._user is None:
            self._user = client.whoami()
        return self._user

    def _host_tags(self, host: Host, settings: MAASSettings) -> list[str]:
        return [
            tag_name(settings.tag_prefix, "profile", host.profile.name),
            tag_name(settings.tag_prefix, "rack", host.rack),
        ]

    def _ensure_tags(self, client: MAASClient, names: Collection[str]) -> None:
        with self._lock:
            missing = [n for n in names if n not in self._known_tags]
            if not missing:
                return
            existing = set(client.tags())
            for n in missing:
                if n not in existing:
                    client.create_tag(n, comment="managed by provisioner")
                    log.info("created MAAS tag %s", n)
                self._known_tags.add(n)

    # -- DeployBackend ------------------------------------------------------------------

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

    def _preflight(
        self, client: MAASClient, settings: MAASSettings, requests: Sequence[DeployRequest]
    ) -> None:
        """Refuse to start when every host would fail late (after a long commissioning)."""
        image = f"{settings.osystem}/{settings.distro_series}"
        arch = settings.architecture.split("/")[0]
        resources = client.boot_resources()
        if not any(r.name == image and r.architecture.split("/")[0] == arch for r in resources):
            have = sorted({r.name for r in resources if r.name.count("/") == 1
                           and not r.name.startswith(("grub", "pxelinux"))})
            raise MAASNotReady(
                f"MAAS at {settings.url} has no {arch} image {image} "
                f"(it has: {', '.join(have) or 'none'})",
                hint=f"select {image} for {arch} under Images in MAAS and wait for the sync, "
                "or change settings.maas.distro_series",
            )
        if not settings.static_ip:
            return
        addrs = {r.host.addresses["provisioning"] for r in requests
                 if r.host.addresses.get("provisioning") is not None}
        if not addrs:
            return
        nets = [IPNetwork(s.cidr) for s in client.subnets()]
        outside = sorted(str(a) for a in addrs if not any(a in n for n in nets))
        if outside:
            raise MAASNotReady(
                f"MAAS at {settings.url} has no subnet for the provisioning addresses "
                f"{', '.join(outside[:5])}{' ...' if len(outside) > 5 else ''}",
                hint="create the provisioning subnet in MAAS (same CIDR as "
                "networks.provisioning), or set settings.maas.static_ip: false",
            )

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
        if status in (NodeStatus.READY, NodeStatus.NEW) or status in _COMMISSION_FROM:
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

    # -- dry run ------------------------------------------------------------------------

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
        if status in _HANDS_OFF or status is None:
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
        if status in _COMMISSION_FROM:
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

    # -- the deploy sequence ------------------------------------------------------------

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
        if status is None or status in _HANDS_OFF:
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
            commissioned = running or status in _COMMISSION_FROM
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
                    str(request.extra.get("user_data") or user_data(site, host))
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

    # -- helpers ------------------------------------------------------------------------

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
        for m in request.extra.get("macs", []) or []:
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
        node_id = request.extra.get("redfish_system_id")
        if node_id:
            params["node_id"] = str(node_id)
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

    def _abort(
        self, client: MAASClient, system_id: str, host: str, phase: str, timeout_s: float
    ) -> None:
        """Stop MAAS's timed-out operation, so it does not go on behind the run's back and a
        retry starts from a clean state (MAAS returns the machine to its previous state)."""
        try:
            client.abort(system_id, comment=f"provisioner: {phase} of {host} timed out "
                                            f"after {timeout_s:.0f}s")
        except MAASError as exc:  # the timeout is the news; a failed abort is logged
            log.warning("%s: could not abort the %s of MAAS machine %s: %s",
                        host, phase, system_id, exc.message)

    def _report_events(
        self, client: MAASClient, system_id: str, host: str, phase: str, progress: ProgressFn
    ) -> None:
        """Pass MAAS's latest events of a failed machine on (the workflow records them)."""
        try:
            events = client.events(system_id, limit=self.EVENTS_ON_FAILURE)
        except MAASError as exc:  # the failure itself matters more than its events
            log.warning("%s: cannot read MAAS events of %s: %s", host, system_id, exc.message)
            return
        for event in reversed(events):
            progress(host, phase, f"MAAS event: {event.line()}")

    def _wait(
        self,
        client: MAASClient,
        system_id: str,
        host: str,
        *,
        phase: str,
        want: set[NodeStatus],
        timeout_s: float,
        progress: ProgressFn | None,
    ) -> Machine:
        """Poll until the machine reaches a ``want`` state; raise on a failure state or timeout."""
        assert self._settings is not None
        poller = self._poller(client)
        try:
            return self._poll(client, poller, system_id, host, phase=phase, want=want,
                              timeout_s=timeout_s, progress=progress)
        finally:
            poller.forget(system_id)

    def _poller(self, client: MAASClient) -> StatePoller:
        with self._lock:
            if self._state_poller is None:
                assert self._settings is not None
                # Slightly under the interval, so that each waiter sees a new read per round.
                self._state_poller = StatePoller(
                    client, max_age_s=self._settings.poll_interval_s * 0.9, clock=self._clock
                )
            return self._state_poller

    def _poll(
        self,
        client: MAASClient,
        poller: StatePoller,
        system_id: str,
        host: str,
        *,
        phase: str,
        want: set[NodeStatus],
        timeout_s: float,
        progress: ProgressFn | None,
    ) -> Machine:
        assert self._settings is not None
        deadline = self._clock() + timeout_s
        last: str | None = None
        fresh = True  # the first read follows an action: never a cached state
        while True:
            machine = poller.read(system_id, fresh=fresh)
            fresh = False
            status = machine.node_status
            shown = machine.status_name + (
                f": {machine.status_message}" if machine.status_message else ""
            )
            if progress is not None and shown != last:
                progress(host, phase, f"MAAS: {shown}")
            last = shown
            if status in want:
                return machine
            if status not in BUSY:
                detail = f": {machine.status_message}" if machine.status_message else ""
                if progress is not None:
                    self._report_events(client, system_id, host, phase, progress)
                raise MAASError(
                    f"{host}: MAAS machine {system_id} went to {machine.status_name!r} "
                    f"during {phase}{detail}",
                    system_id=system_id,
                    maas_message=machine.status_message,
                    hint=f"see the machine's events and logs in MAAS ({phase} log)",
                )
            if self._clock() >= deadline:
                if phase in ("commission", "deploy"):
                    self._abort(client, system_id, host, phase, timeout_s)
                raise MAASTimeout(
                    f"{host}: MAAS machine {system_id} still {machine.status_name!r} after "
                    f"{timeout_s:.0f}s of {phase}",
                    system_id=system_id,
                    hint=f"raise settings.maas.{phase}_timeout_s, or check the machine's "
                    "console in MAAS",
                )
            self._sleep(self._settings.poll_interval_s)
