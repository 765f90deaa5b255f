"""Infer each discovered switch's planned name from the topology, and write a node-name-map.

Hosts name themselves (node descriptions), so a switch's host ports say which planned leaf
it is; named leaves then say which spine each of their uplinks reaches, and so on upward.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from cabling.discovery.model import DiscoveredFabric
from cabling.model import Endpoint, Manifest
from cabling.resolve import NodeName, endpoint, name_nodes

_BLADE_PORT = re.compile(r"^(L\d+/U\d+)/\d+$", re.IGNORECASE)


@dataclass
class NamingResult:
    """GUID -> planned name for matched switches, and what could not be matched and why."""

    names: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    ambiguous: dict[str, str] = field(default_factory=dict)
    unmatched: dict[str, str] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)
    internal: dict[str, str] = field(default_factory=dict)  # director spine blade GUID -> chassis


def infer_switch_names(fab: DiscoveredFabric, manifest: Manifest, name_map: dict[str, str] | None = None) -> NamingResult:
    """Match every discovered switch to a manifest switch by majority vote of its neighbours."""
    names = name_nodes(fab, manifest, name_map)
    devices = manifest.device_map()
    plan_peer: dict[tuple[str, str], Endpoint] = {}
    for lk in manifest.links:
        plan_peer[lk.a.key] = lk.b
        plan_peer[lk.b.key] = lk.a
    adj: dict[str, list[tuple[int | str, str, int | str]]] = defaultdict(list)
    for dl in fab.links:
        adj[dl.a_guid].append((dl.a_port, dl.b_guid, dl.b_port))
        adj[dl.b_guid].append((dl.b_port, dl.a_guid, dl.a_port))
    switches = [g for g, n in fab.nodes.items() if n.kind == "switch"]
    result = NamingResult(current={g: names[g].device for g in switches})
    known: dict[str, str] = {}  # guid -> manifest device name (hosts, and switches as they are named)
    for g, nn in names.items():
        dev = devices.get(nn.device.casefold())
        if fab.nodes[g].kind == "ca" and dev is not None and dev.kind == "host":
            known[g] = dev.name
    taken: dict[str, str] = {}
    pending = set(switches)
    while pending:
        progress = False
        votes_by: dict[str, Counter[str]] = {}
        for g in sorted(pending):
            votes: Counter[str] = Counter()
            for _port, peer, peer_port in adj[g]:
                if peer not in known:
                    continue
                pname = known[peer]
                ep = endpoint(replace(names[peer], device=pname), peer_port)
                target = plan_peer.get((pname.casefold(), ep.port.casefold()))
                if target is not None:
                    dev = devices.get(target.device.casefold())
                    if dev is not None and dev.kind == "switch":
                        # A director port (L16/U2/20) names one blade ASIC of the chassis.
                        bm = _BLADE_PORT.match(target.port)
                        votes[f"{dev.name}:{bm.group(1)}" if bm else dev.name] += 1
            if votes:
                votes_by[g] = votes
        claims: dict[str, list[str]] = defaultdict(list)
        for g, votes in votes_by.items():
            (top, n), *rest = votes.most_common(2)
            if rest and rest[0][1] == n:
                result.ambiguous[g] = f"neighbours point equally at {top} and {rest[0][0]}"
                continue
            claims[top].append(g)
        for name, guids in claims.items():
            if name in taken or len(guids) > 1:
                for g in guids:
                    others = [x for x in guids if x != g] + ([taken[name]] if name in taken else [])
                    result.ambiguous[g] = f"{name} is also claimed by switch 0x{', 0x'.join(others)}"
                    pending.discard(g)
                continue
            g = guids[0]
            votes = votes_by[g]
            total = sum(votes.values())
            device, _, blade = name.partition(":")
            model = devices[device.casefold()].model
            result.names[g] = f"{device}:{model + '/' if model else ''}{blade}" if blade else device
            result.evidence[g] = f"{votes[name]} of {total} neighbour links point at {name}"
            result.ambiguous.pop(g, None)
            names[g] = NodeName(device, "switch", port_prefix=f"{blade}/" if blade else "", named_by="topology")
            known[g] = device
            taken[name] = g
            pending.discard(g)
            progress = True
        if not progress:
            break
    for g in pending:
        if g in result.ambiguous:
            continue
        chassis = {known.get(peer) for _, peer, _ in adj[g]}
        if len(chassis) == 1 and None not in chassis and all(names[p].port_prefix for _, p, _ in adj[g]):
            # Director spine blades only reach the chassis' own leaf blades: cabling says which chassis,
            # not which slot, so they are named after the chassis (their links are inside it).
            device = str(chassis.pop())
            model = devices[device.casefold()].model
            result.internal[g] = device
            result.names[g] = f"{device}:{model + '/' if model else ''}spine-blade"
            result.evidence[g] = f"all {len(adj[g])} links go to leaf blades of director {device}"
        else:
            result.unmatched[g] = "no neighbour matches the manifest"
    return result
