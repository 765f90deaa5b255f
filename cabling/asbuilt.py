"""Turn a discovered fabric into a manifest (the as-built), so an existing fabric can be adopted."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from cabling.discovery.model import DiscoveredFabric
from cabling.errors import CablingInputError
from cabling.model import Device, Endpoint, Link, Manifest
from cabling.resolve import ResolvedFabric, resolve


def as_built(fab: DiscoveredFabric, name_map: dict[str, str] | None = None,
             res: ResolvedFabric | None = None) -> Manifest:
    """A manifest with every discovered device (with GUIDs) and link (with trained speed/width).

    Links of an ambiguous identity (a GUID two devices share) are left out, and so is that GUID.
    """
    res = res or resolve(fab, None, name_map)
    try:
        return _as_built(fab, res)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CablingInputError(
            f"the fabric reports a name a manifest cannot hold: {err['msg'].removeprefix('Value error, ')}",
            hint="fix the node description on that node, or name its GUID in a --node-name-map",
        ) from None


def _as_built(fab: DiscoveredFabric, res: ResolvedFabric) -> Manifest:
    # Switches that describe themselves alike keep their GUID names (those are unambiguous);
    # a GUID two devices share, or a host port two GUIDs claim, is left out.
    kept = [amb for amb in res.ambiguous if amb.kind == "duplicate_name" and amb.node_kind == "switch"]
    unsure = {g for amb in res.ambiguous if amb not in kept for g in amb.guids} | set(res.aggregation_nodes)
    devices: dict[str, Device] = {}
    for guid, nn in res.names.items():
        if guid in unsure:
            continue
        node = fab.nodes[guid]
        key = nn.device.casefold()
        dev = devices.get(key)
        if nn.kind == "ca":
            if dev is None:
                dev = devices[key] = Device(name=nn.device, kind="host")
            if nn.host_port and nn.host_port not in dev.hcas:
                dev.hcas.append(nn.host_port)
                if not guid.startswith(("lldp:", "lid-")):
                    dev.hca_guids[nn.host_port] = guid
        elif dev is None:
            is_guid = not guid.startswith(("lldp:", "lid-"))
            devices[key] = Device(name=nn.device, kind="switch", model=nn.model,
                                  ports=node.nports if node.nports and not nn.port_prefix else None,
                                  guid=guid if is_guid and not nn.port_prefix else None)
    found = res.links + [rl for amb in kept for rl in amb.links]
    links = [Link(a=Endpoint(device=rl.a.device, port=rl.a.port), b=Endpoint(device=rl.b.device, port=rl.b.port),
                  speed=rl.speed, width=rl.width) for rl in found]
    return Manifest(devices=list(devices.values()), links=links)


def fabric_json(fab: DiscoveredFabric, res: ResolvedFabric) -> dict[str, Any]:
    """The parsed nodes and links, as ``provision cabling import --json`` prints them."""
    sharp = set(res.aggregation_nodes)
    return {
        "source": fab.source,
        "nodes": [
            {"guid": n.guid, "kind": "aggregation_node" if n.guid in sharp else n.kind, "description": n.desc, "ports": n.nports, "lid": n.lid,
             "name": res.names[n.guid].device, "named_by": res.names[n.guid].named_by}
            for n in fab.nodes.values()
        ],
        "links": [
            {"a": str(rl.a), "b": str(rl.b), "a_guid": rl.a_guid, "a_port": rl.a_num, "b_guid": rl.b_guid,
             "b_port": rl.b_num, "width": rl.width, "speed": rl.speed, "state": rl.state}
            for rl in res.links
        ],
        "down_ports": [{"port": str(ep), "state": st} for ep, st in res.down.values()],
        "director_internal_links": res.internal_links,
        "sharp_aggregation_links": res.aggregation_links,
        "ambiguous": [
            {"kind": amb.kind, "identity": amb.identity, "guids": amb.guids, "descriptions": amb.descriptions,
             "links": [f"{rl.a} <-> {rl.b}" for rl in amb.links]}
            for amb in res.ambiguous
        ],
    }
