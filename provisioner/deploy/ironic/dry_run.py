"""What an Ironic run would change, host by host (`provision rack --dry-run` prints it): read
from Ironic with the same lookups the deploy makes, nothing written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioner.deploy.base import DeployRequest
from provisioner.deploy.ironic import states
from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.nodes import NodeSpec, find_node, ports_ok, update_ops
from provisioner.exceptions import ProvisionerError
from provisioner.settings.ironic import IronicSettings

if TYPE_CHECKING:
    from provisioner.inventory.model import Site


@dataclass
class HostPlan:
    """The actions the backend would take for one host, in order."""

    host: str
    mac: str
    uuid: str | None  # None: no node yet
    state: str  # Ironic's provision state, or "absent"
    actions: list[str] = field(default_factory=list)
    blocked: str | None = None  # why the backend would refuse to touch this host


@dataclass
class IronicPlan:
    """A dry run against one Ironic: nothing was changed to compute it."""

    url: str
    hosts: list[HostPlan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``--json`` output)."""
        return {"backend": "ironic", "url": self.url, "problems": self.problems,
                "hosts": [{"host": h.host, "mac": h.mac, "uuid": h.uuid, "state": h.state,
                           "actions": h.actions, "blocked": h.blocked} for h in self.hosts]}

    def render(self) -> str:
        """Plain text, one block per host."""
        out = [f"Ironic {self.url}: dry run, nothing changed"]
        out.extend(f"PROBLEM: {p}" for p in self.problems)
        for h in self.hosts:
            out.append(f"{h.host} [{h.mac}] node {h.uuid or 'new'} ({h.state})")
            if h.blocked:
                out.append(f"  - refuse: {h.blocked}")
            elif not h.actions:
                out.append("  - no change")
            else:
                out.extend(f"  - {a}" for a in h.actions)
        return "\n".join(out)


def _tail(settings: IronicSettings, site: Site, *, inspected: bool) -> list[str]:
    """manage is done: inspect (when asked and never done), provide, deploy."""
    out = []
    if settings.inspect and not inspected:
        out.append(f"inspect ({settings.inspect_interface}), compare with the site")
    out.append("provide (no cleaning)")
    image = site.settings.image
    what = (settings.ramdisk.ramdisk_url if settings.deploy_interface == "ramdisk"
            and settings.ramdisk else (image.url if image and image.url else "?"))
    out.append(f"deploy {what} ({settings.deploy_interface})"
               + (" with a config drive" if settings.config_drive else ""))
    return out


def plan_host(client: IronicClient, site: Site, settings: IronicSettings, spec: NodeSpec,
              request: DeployRequest, *, reimage: bool) -> HostPlan:
    """One host's plan from its node as Ironic has it now."""
    hp = HostPlan(host=spec.name, mac=spec.mac, uuid=None, state="absent")
    try:
        node = find_node(client, site, spec)
    except ProvisionerError as exc:
        hp.blocked = exc.message
        return hp
    if node is None:
        group = spec.fields.get("conductor_group")
        hp.actions = [f"enrol ({spec.fields['driver']}, BMC "
                      f"{spec.driver_info['redfish_address']}"
                      + (f", conductor group {group}" if group else "") + ")",
                      f"port {spec.mac} (the only PXE port)", "manage (Ironic checks the BMC)",
                      *_tail(settings, site, inspected=False)]
        return hp
    state = str(node.get("provision_state"))
    hp.uuid, hp.state = str(node["uuid"]), state
    if node.get("maintenance"):
        hp.blocked = f"in maintenance: {node.get('maintenance_reason') or 'no reason given'}"
        return hp
    if state in states.HANDS_OFF:
        hp.blocked = f"{state}: a person holds or uses the node"
        return hp
    _, changed = update_ops(node, spec, send_password=False)
    if changed:
        hp.actions.append("update " + ", ".join(changed))
    inspected = bool(node.get("inspection_finished_at"))
    if state in states.BUSY:
        hp.actions.append(f"wait for Ironic's {state}, then go on from where it ends")
    elif state in (states.ENROLL, states.INSPECT_FAILED, states.CLEAN_FAILED):
        hp.actions += ["manage", *_tail(settings, site, inspected=inspected)]
    elif state == states.MANAGEABLE:
        hp.actions += _tail(settings, site, inspected=inspected)
    elif state == states.AVAILABLE:
        if not ports_ok(client, hp.uuid, spec.mac):
            hp.actions += ["manage (to fix ports)", "provide"]
        hp.actions += _tail(settings, site, inspected=True)[-1:]
    elif state == states.DEPLOY_FAILED:
        hp.actions.append(f"deploy again (failed before: {node.get('last_error') or '?'})")
    elif state == states.ACTIVE:
        if reimage:
            hp.actions.append("rebuild (root disk only)")
        elif not changed:
            hp.actions = []
    elif state == states.ERROR:
        hp.actions += ["undeploy again", *_tail(settings, site, inspected=True)[-1:]]
    else:
        hp.blocked = f"{state}: not a state this backend drives"
    return hp


def plan(client: IronicClient, site: Site, settings: IronicSettings,
         specs: Sequence[tuple[NodeSpec, DeployRequest]], *, reimage: bool) -> IronicPlan:
    """What a run would change for each host."""
    out = IronicPlan(url=settings.url)
    try:
        newest = client.max_version()
        if newest < settings.api_version:
            out.problems.append(f"Ironic serves API up to {newest[0]}.{newest[1]}, older than "
                                f"{settings.microversion}")
    except ProvisionerError as exc:
        out.problems.append(exc.message)
        return out
    for spec, request in specs:
        out.hosts.append(plan_host(client, site, settings, spec, request, reimage=reimage))
    return out
