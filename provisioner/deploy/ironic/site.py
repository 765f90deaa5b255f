"""Site-level Ironic use cases: enrol a site's hosts (how a site moves from the embedded backend
to Ironic without enrolling by hand: idempotent), show their nodes, and undeploy hosts."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provisioner.deploy.base import DeployRequest, ProgressFn
from provisioner.deploy.ironic.backend import IronicBackend
from provisioner.deploy.ironic.nodes import HOST_KEY, OWNER_KEY, EnrolResult
from provisioner.deploy.ironic.poller import FIELDS
from provisioner.exceptions import ProvisionerError

# Nodes enrolled at once: Ironic's API and conductor take these in their stride (the
# benchmark enrols 1,000), the BMCs each see one request at a time.
ENROL_PARALLEL = 32

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Site
    from provisioner.state.store import StateStore


@dataclass
class HostEnrolment:
    """One host's enrolment: its result, or why it failed."""

    host: str
    mac: str
    result: EnrolResult | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"host": self.host, "mac": self.mac, "ok": self.error is None,
                "uuid": r.uuid if r else None, "action": r.action if r else None,
                "provision_state": (r.node.get("provision_state") if r else None),
                "error": self.error}


def known_mac(host: Host, store: StateStore | None) -> tuple[str, str]:
    """The host's provisioning MAC and where it comes from (the inventory, or discovery)."""
    if host.provisioning_mac:
        return host.provisioning_mac, "inventory"
    if store is not None:
        mac = store.get(host.name).facts.get("provisioning_mac")
        if mac:
            return str(mac).lower(), "discovery"
    return "", "none"


def enrol_hosts(site: Site, hosts: Sequence[Host], store: StateStore | None, *,
                manage: bool = True, send_password: bool = False,
                progress: ProgressFn | None = None,
                backend: IronicBackend | None = None) -> list[HostEnrolment]:
    """Enrol each host's node (create or bring in line; a second run changes nothing), up to
    ENROL_PARALLEL at once: Ironic checks each BMC in a few seconds, a rack's in parallel."""
    backend = backend or IronicBackend(site)
    items = [HostEnrolment(host=h.name, mac=known_mac(h, store)[0]) for h in hosts]

    def one(pair: tuple[Host, HostEnrolment]) -> HostEnrolment:
        host, item = pair
        if not item.mac:
            item.error = ("no provisioning MAC known: run `provision discover` first, or pin "
                          "provisioning_mac in the site file")
            return item
        request = DeployRequest(host=host, mac=item.mac)
        try:
            item.result = backend.enrol(request, manage=manage, send_password=send_password,
                                        progress=progress)
        except ProvisionerError as exc:
            item.error = exc.message
        return item

    with ThreadPoolExecutor(max_workers=max(1, min(ENROL_PARALLEL, len(items))),
                            thread_name_prefix="enrol") as pool:
        return list(pool.map(one, zip(hosts, items, strict=True)))


def site_nodes(site: Site, backend: IronicBackend | None = None) -> list[dict[str, Any]]:
    """The Ironic nodes of this site's hosts (one list call), in inventory order."""
    backend = backend or IronicBackend(site)
    nodes = backend.client.nodes((*FIELDS, "extra", "driver"))
    mine = {str((n.get("extra") or {}).get(HOST_KEY)): n for n in nodes
            if (n.get("extra") or {}).get(OWNER_KEY) == site.name}
    rows = []
    for host in site.hosts:
        n = mine.get(host.name)
        rows.append({"host": host.name, "uuid": n.get("uuid") if n else None,
                     "provision_state": n.get("provision_state") if n else "absent",
                     "target": n.get("target_provision_state") if n else None,
                     "power": n.get("power_state") if n else None,
                     "maintenance": bool(n.get("maintenance")) if n else False,
                     "conductor_group": n.get("conductor_group") if n else None,
                     "last_error": (n.get("maintenance_reason") or n.get("last_error"))
                     if n else None})
    return rows


def undeploy_hosts(site: Site, hosts: Sequence[Host], store: StateStore | None, *,
                   progress: ProgressFn | None = None,
                   backend: IronicBackend | None = None) -> list[tuple[str, str, bool]]:
    """Undeploy each host's node (``deleted``, no cleaning); (host, what happened, ok)."""
    backend = backend or IronicBackend(site)
    out = []
    for host in hosts:
        mac, _ = known_mac(host, store)
        try:
            out.append((host.name, backend.undeploy(DeployRequest(host=host, mac=mac),
                                                    progress), True))
        except ProvisionerError as exc:
            out.append((host.name, exc.message, False))
    return out
