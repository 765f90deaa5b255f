"""Infer each discovered switch's planned name from the topology, and write a node-name-map.

Hosts name themselves (node descriptions), so a switch's host ports say which planned leaf
it is; named leaves then say which spine each of their uplinks reaches, and so on upward.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from cabling.discovery.model import DiscoveredFabric
from cabling.model import Device, Endpoint, Manifest
from cabling.resolve import NodeName, endpoint, name_nodes, vendor_default_switch

_BLADE_PORT = re.compile(r"^(L\d+/U\d+)/\d+$", re.IGNORECASE)
Adjacent = tuple[int | str, str, int | str]  # a node's port, the peer's GUID, the peer's port


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
    switches = [g for g, n in fab.nodes.items() if n.kind == "switch"]
    namer = _Namer(names, devices, _plan_peers(manifest), _adjacency(fab), _known_hosts(fab, names, devices),
                   NamingResult(current={g: names[g].device for g in switches}))
    pending = set(switches)
    while pending and namer.vote_round(pending):
        pass  # the switches a round names give their neighbours votes in the next
    for g in pending:
        namer.name_leftover(g)
    return namer.result


def _plan_peers(manifest: Manifest) -> dict[tuple[str, str], Endpoint]:
    """The planned far end of every planned port."""
    plan_peer: dict[tuple[str, str], Endpoint] = {}
    for lk in manifest.links:
        plan_peer[lk.a.key] = lk.b
        plan_peer[lk.b.key] = lk.a
    return plan_peer


def _adjacency(fab: DiscoveredFabric) -> defaultdict[str, list[Adjacent]]:
    """Each node's links: (its port, the peer's GUID, the peer's port)."""
    adj: defaultdict[str, list[Adjacent]] = defaultdict(list)
    for dl in fab.links:
        adj[dl.a_guid].append((dl.a_port, dl.b_guid, dl.b_port))
        adj[dl.b_guid].append((dl.b_port, dl.a_guid, dl.a_port))
    return adj


def _known_hosts(fab: DiscoveredFabric, names: dict[str, NodeName], devices: dict[str, Device]) -> dict[str, str]:
    """GUID -> manifest host name of every HCA whose name is a planned host."""
    known: dict[str, str] = {}
    for g, nn in names.items():
        dev = devices.get(nn.device.casefold())
        if fab.nodes[g].kind == "ca" and dev is not None and dev.kind == "host":
            known[g] = dev.name
    return known


def _blade_name(device: str, model: str | None, blade: str) -> str:
    """A director blade's name in a node-name-map: ``chassis:model/blade``."""
    return f"{device}:{model + '/' if model else ''}{blade}"


@dataclass
class _Namer:
    """The state of the vote: nodes' names, manifest names known so far, and names taken."""

    names: dict[str, NodeName]
    devices: dict[str, Device]
    plan_peer: dict[tuple[str, str], Endpoint]
    adj: defaultdict[str, list[Adjacent]]
    known: dict[str, str]  # guid -> manifest device name (hosts, and switches as they are named)
    result: NamingResult
    taken: dict[str, str] = field(default_factory=dict)  # planned name -> GUID named so

    def vote_round(self, pending: set[str]) -> bool:
        """Name every pending switch that alone wins a clear majority; say whether any was named."""
        votes_by: dict[str, Counter[str]] = {}
        for g in sorted(pending):
            votes = self.votes(g)
            if votes:
                votes_by[g] = votes
        progress = False
        for name, guids in self.claims(votes_by).items():
            if name in self.taken or len(guids) > 1:
                self.contested(name, guids, pending)
                continue
            self.assign(guids[0], name, votes_by[guids[0]])
            pending.discard(guids[0])
            progress = True
        return progress

    def votes(self, g: str) -> Counter[str]:
        """The planned switch (or director blade) that each known neighbour's planned cable reaches."""
        votes: Counter[str] = Counter()
        for _port, peer, peer_port in self.adj[g]:
            if peer not in self.known:
                continue
            pname = self.known[peer]
            ep = endpoint(replace(self.names[peer], device=pname), peer_port)
            target = self.plan_peer.get((pname.casefold(), ep.port.casefold()))
            if target is not None:
                dev = self.devices.get(target.device.casefold())
                if dev is not None and dev.kind == "switch":
                    # A director port (L16/U2/20) names one blade ASIC of the chassis.
                    bm = _BLADE_PORT.match(target.port)
                    votes[f"{dev.name}:{bm.group(1)}" if bm else dev.name] += 1
        return votes

    def claims(self, votes_by: dict[str, Counter[str]]) -> dict[str, list[str]]:
        """Planned name -> the switches whose vote it wins; a tie is recorded as ambiguous."""
        claims: dict[str, list[str]] = defaultdict(list)
        for g, votes in votes_by.items():
            (top, n), *rest = votes.most_common(2)
            if rest and rest[0][1] == n:
                self.result.ambiguous[g] = f"neighbours point equally at {top} and {rest[0][0]}"
                continue
            claims[top].append(g)
        return claims

    def contested(self, name: str, guids: list[str], pending: set[str]) -> None:
        """Switches claiming a name another switch claims or holds: none of them gets it."""
        for g in guids:
            others = [x for x in guids if x != g] + ([self.taken[name]] if name in self.taken else [])
            self.result.ambiguous[g] = f"{name} is also claimed by switch 0x{', 0x'.join(others)}"
            pending.discard(g)

    def assign(self, g: str, name: str, votes: Counter[str]) -> None:
        """Name switch ``g`` (``device`` or ``device:blade``), so its neighbours can vote next round."""
        device, _, blade = name.partition(":")
        model = self.devices[device.casefold()].model
        self.result.names[g] = _blade_name(device, model, blade) if blade else device
        self.result.evidence[g] = f"{votes[name]} of {sum(votes.values())} neighbour links point at {name}"
        self.result.ambiguous.pop(g, None)
        self.names[g] = NodeName(device, "switch", port_prefix=f"{blade}/" if blade else "", named_by="topology")
        self.known[g] = device
        self.taken[name] = g

    def name_leftover(self, g: str) -> None:
        """A switch no vote named: a director spine blade, or unmatched (unless already ambiguous)."""
        if g in self.result.ambiguous:
            return
        device = self.director_of(g)
        if device is None:
            self.result.unmatched[g] = "no neighbour matches the manifest"
            return
        self.result.internal[g] = device
        self.result.names[g] = _blade_name(device, self.devices[device.casefold()].model, "spine-blade")
        self.result.evidence[g] = f"all {len(self.adj[g])} links go to leaf blades of director {device}"

    def director_of(self, g: str) -> str | None:
        """The director whose leaf blades all of ``g``'s links reach, if any.

        Director spine blades only reach the chassis' own leaf blades: cabling says which chassis,
        not which slot, so they are named after the chassis (their links are inside it)."""
        chassis = {self.known.get(peer) for _, peer, _ in self.adj[g]}
        if len(chassis) == 1 and None not in chassis and all(self.names[p].port_prefix for _, p, _ in self.adj[g]):
            return str(chassis.pop())
        return None


def name_silent_switches(fab: DiscoveredFabric, manifest: Manifest, name_map: dict[str, str] | None = None
                         ) -> dict[str, str]:
    """GUID -> planned name for switches that still give their vendor's default description and
    that no map or manifest GUID names, where their cables say unambiguously which planned switch
    they are and no other node answers as that switch (a fresh or replaced switch: one warning,
    and its cables are checked, instead of every cable reported twice)."""
    names = name_nodes(fab, manifest, name_map)
    silent = [g for g, n in fab.nodes.items() if vendor_default_switch(n) and names[g].named_by == "GUID"]
    if not silent:
        return {}
    result = infer_switch_names(fab, manifest, name_map)
    taken = {nn.device.casefold() for g, nn in names.items() if g not in silent}
    return {g: result.names[g] for g in silent
            if g in result.names and result.names[g].partition(":")[0].casefold() not in taken}
