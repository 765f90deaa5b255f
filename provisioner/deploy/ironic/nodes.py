"""A host's Ironic node: what its fields should be (from the site and our BMC discovery), found
by name or by the provisioning MAC's port, created when absent, brought in line when not, and its
ports set so the provisioning MAC is the only one that PXE boots."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioner.deploy.ironic import states
from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.errors import IronicConflict
from provisioner.deploy.ironic.hints import root_device
from provisioner.deploy.ironic.settings import conductor_group
from provisioner.inventory.credentials import resolve_credentials
from provisioner.secrets import Secret
from provisioner.settings.ironic import IronicSettings

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Site

log = logging.getLogger("provisioner.deploy.ironic")

OWNER_KEY = "provisioner_site"
HOST_KEY = "provisioner_host"
# Ports may change only in these states (Ironic answers 409 once a node is available).
PORTS_CHANGEABLE = frozenset({states.ENROLL, states.MANAGEABLE, states.INSPECT_FAILED})
# Interfaces and the driver may change only where no deployment is set up or running.
INTERFACES_CHANGEABLE = frozenset({states.ENROLL, states.MANAGEABLE, states.INSPECT_FAILED,
                                   states.AVAILABLE})


@dataclass
class NodeSpec:
    """The node fields the site asks for (the password apart: Ironic never shows it back)."""

    name: str
    fields: dict[str, Any]
    driver_info: dict[str, Any]
    password: Secret
    mac: str

    def create_body(self) -> dict[str, Any]:
        return {**self.fields, "name": self.name,
                "driver_info": {**self.driver_info, "redfish_password": self.password}}


@dataclass
class EnrolResult:
    """What enrolment did to one host's node."""

    host: str
    uuid: str
    created: bool = False
    changed: list[str] = field(default_factory=list)  # node fields / ports updated
    node: dict[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> str:
        if self.created:
            return "enrolled"
        return "updated " + ", ".join(self.changed) if self.changed else "unchanged"


def node_spec(site: Site, host: Host, mac: str, settings: IronicSettings,
              system_path: str | None = None) -> NodeSpec:
    """The fields of ``host``'s node: BMC by reference, interfaces, root-disk hints, group.
    ``system_path``: the ComputerSystem our discovery read (when the site names none)."""
    creds = resolve_credentials(site, host.bmc.credentials)
    info: dict[str, Any] = {
        "redfish_address": host.bmc.url,
        "redfish_username": creds.username,
        # basic auth on every request: no Redfish session to leak or to exhaust on the BMC
        "redfish_auth_type": "basic",
    }
    if host.bmc.system:
        info["redfish_system_id"] = f"/redfish/v1/Systems/{host.bmc.system}"
    elif system_path:
        info["redfish_system_id"] = system_path
    verify = settings.bmc_verify_ca
    info["redfish_verify_ca"] = host.bmc.verify_tls if verify is None else verify
    if settings.deploy_kernel and settings.deploy_ramdisk:
        info["deploy_kernel"] = settings.deploy_kernel
        info["deploy_ramdisk"] = settings.deploy_ramdisk
    fields: dict[str, Any] = {
        "driver": settings.driver,
        "boot_interface": settings.boot_interface,
        "deploy_interface": settings.deploy_interface,
        "inspect_interface": settings.inspect_interface,
        **{f"{k}_interface": v for k, v in sorted(settings.interfaces.items())},
        "resource_class": settings.resource_class or host.profile.name,
        # Never Ironic's automated cleaning: it erases metadata on every disk, and data disks
        # and ZFS pools must survive a re-image.
        "automated_clean": False,
        "properties": {"root_device": root_device(host.root_disk or host.profile.root_disk)},
        "extra": {OWNER_KEY: site.name, HOST_KEY: host.name, "rack": host.rack,
                  "u": host.u},
    }
    group = conductor_group(site, host, settings)
    if group is not None:
        fields["conductor_group"] = group
    return NodeSpec(name=host.name, fields=fields, driver_info=info,
                    password=creds.password, mac=mac.lower())


def find_node(client: IronicClient, site: Site, spec: NodeSpec) -> dict[str, Any] | None:
    """The host's node, by name or by its MAC's port; refuses nodes of another site or host."""
    by_name = client.find_node(spec.name)
    by_mac = None
    if spec.mac:
        ports = client.ports(address=spec.mac)
        if ports:
            by_mac = client.node(str(ports[0]["node_uuid"]))
    if by_name and by_mac and by_name["uuid"] != by_mac["uuid"]:
        raise IronicConflict(
            f"{spec.name}: Ironic node {by_name['uuid']} has its name but its MAC "
            f"{spec.mac} belongs to node {by_mac.get('name') or by_mac['uuid']}",
            node=by_name["uuid"],
            hint="delete the stale node in Ironic (`baremetal node delete`), or fix "
            "provisioning_mac in the site file")
    node = by_name or by_mac
    if node is None:
        return None
    owner = (node.get("extra") or {}).get(OWNER_KEY)
    if owner not in (None, site.name):
        raise IronicConflict(
            f"{spec.name}: Ironic node {node['uuid']} belongs to site {owner!r}, not "
            f"{site.name!r}: not touching it", node=node["uuid"],
            hint="two sites share this Ironic and a host name or MAC: rename one, or "
            "delete the node of the site that no longer has the host")
    return node


def _differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    return [k for k, v in wanted.items() if current.get(k) != v]


def update_ops(node: Mapping[str, Any], spec: NodeSpec, *, send_password: bool
               ) -> tuple[list[dict[str, Any]], list[str]]:
    """JSON-patch operations bringing ``node`` in line with ``spec``, and what they change."""
    ops: list[dict[str, Any]] = []
    changed: list[str] = []
    state = node.get("provision_state")
    if node.get("name") != spec.name:
        ops.append({"op": "replace", "path": "/name", "value": spec.name})
        changed.append("name")
    for key, value in spec.fields.items():
        if key in ("properties", "extra"):
            continue
        fixed = (key.endswith("_interface") or key == "driver") and (
            state not in INTERFACES_CHANGEABLE)
        if fixed and node.get(key) != value:
            log.info("%s: %s is %r, wanted %r: left until the node is not %s", spec.name,
                     key, node.get(key), value, state)
            continue
        if node.get(key) != value:
            ops.append({"op": "replace", "path": f"/{key}", "value": value})
            changed.append(key)
    info = node.get("driver_info") or {}
    info_changed = _differs(info, spec.driver_info)
    for key in info_changed:
        ops.append({"op": "add", "path": f"/driver_info/{key}", "value": spec.driver_info[key]})
    changed += [f"driver_info.{k}" for k in info_changed]
    if send_password or info_changed:
        ops.append({"op": "add", "path": "/driver_info/redfish_password",
                    "value": spec.password})
        if "driver_info.redfish_password" not in changed:
            changed.append("driver_info.redfish_password")
    root = spec.fields["properties"]["root_device"]
    props = node.get("properties") or {}
    if (props.get("root_device") or {}) != root:
        if root:
            ops.append({"op": "add", "path": "/properties/root_device", "value": root})
        else:
            ops.append({"op": "remove", "path": "/properties/root_device"})
        changed.append("properties.root_device")
    extra = node.get("extra") or {}
    for key, value in spec.fields["extra"].items():
        if extra.get(key) != value:
            ops.append({"op": "add", "path": f"/extra/{key}", "value": value})
            if "extra" not in changed:
                changed.append("extra")
    return ops, changed


def ports_ok(client: IronicClient, node_uuid: str, mac: str) -> bool:
    """Whether the MAC's port is on the node and is its only PXE-enabled port."""
    ports = client.ports(node=node_uuid)
    mine = [p for p in ports if str(p.get("address", "")).lower() == mac]
    others = [p for p in ports if p not in mine and p.get("pxe_enabled")]
    return bool(mine) and bool(mine[0].get("pxe_enabled")) and not others


def set_ports(client: IronicClient, node_uuid: str, mac: str, host: str) -> list[str]:
    """Make the MAC's port the node's only PXE-enabled one (node enroll/manageable only)."""
    changed = []
    ports = client.ports(node=node_uuid)
    mine = [p for p in ports if str(p.get("address", "")).lower() == mac]
    if not mine:
        elsewhere = client.ports(address=mac)
        if elsewhere:
            raise IronicConflict(
                f"{host}: MAC {mac} is a port of another Ironic node "
                f"({elsewhere[0].get('node_uuid')})", node=node_uuid,
                hint="delete that node's port or the stale node in Ironic")
        client.create_port(node_uuid, mac, pxe_enabled=True)
        changed.append(f"port {mac} (PXE)")
    elif not mine[0].get("pxe_enabled"):
        client.set_port_pxe(str(mine[0]["uuid"]), True, node=node_uuid)
        changed.append(f"port {mac} PXE on")
    for p in ports:
        if str(p.get("address", "")).lower() != mac and p.get("pxe_enabled"):
            # Only the provisioning NIC may PXE boot: a second port would get its own iPXE
            # config and a data NIC could boot the deploy ramdisk.
            client.set_port_pxe(str(p["uuid"]), False, node=node_uuid)
            changed.append(f"port {p.get('address')} PXE off")
    return changed


def enrol(client: IronicClient, site: Site, spec: NodeSpec, *, send_password: bool = False
          ) -> EnrolResult:
    """Create the host's node, or bring it in line; its ports too while the state allows."""
    node = find_node(client, site, spec)
    if node is None:
        node = client.create_node(spec.create_body())
        result = EnrolResult(host=spec.name, uuid=str(node["uuid"]), created=True)
        log.info("%s: enrolled as Ironic node %s", spec.name, result.uuid)
    else:
        result = EnrolResult(host=spec.name, uuid=str(node["uuid"]))
        # a node still in enroll failed (or never had) its BMC check: send the password anew,
        # so a corrected password file is picked up by the retry
        resend = send_password or node.get("provision_state") == states.ENROLL
        ops, changed = update_ops(node, spec, send_password=resend)
        if ops:
            node = client.patch_node(result.uuid, ops) or node
            result.changed = changed
            log.info("%s: updated Ironic node %s: %s", spec.name, result.uuid,
                     ", ".join(changed))
    if node.get("provision_state") in PORTS_CHANGEABLE:
        result.changed += set_ports(client, result.uuid, spec.mac, spec.name)
    result.node = node
    return result
