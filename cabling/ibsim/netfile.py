"""A manifest's fabric as it is actually built, written as ibsim's topology file (its "netfile").

The netfile is ibnetdiscover's format: a node header per switch and HCA (its GUID set by the
``switchguid=``/``caguid=`` line before it, its node description after ``#``) and one line per
cabled port, whose ``4xHDR`` sets what the port may train at (the link trains at what both ends
share). The plan's GUIDs and node descriptions are used where the manifest has them, so the real
tools report the fabric the plan describes. :class:`BuiltFabric` holds the cabling as built: the
plan, then what went wrong on the floor (a cable moved, two crossed, one never plugged, a link at
1x or a lower speed, a switch still at its vendor description).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cabling.errors import CablingInputError
from cabling.model import Endpoint, Manifest
from cabling.ports import hca_of, port_number
from cabling.simulate import SimFabric

# What ibsim 0.10 (Debian 12) reads on a port line; it has no NDR: plan with --speed HDR.
SIM_SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR")
_ID_FORBIDDEN = set('#@"[]') | {" ", "\t"}


@dataclass
class Cable:
    """One cable as it is plugged, and the rate both its ports are set to train at."""

    a: Endpoint
    b: Endpoint
    width: str
    speed: str

    def ends(self) -> tuple[Endpoint, Endpoint]:
        """Both ends."""
        return self.a, self.b


@dataclass(frozen=True)
class GuidLayout:
    """How a host's HCAs number their GUIDs. ibsim gives port *n* of an HCA the node GUID + *n*
    (as older ConnectX HCAs such as the MT25408 do), so tools that print port GUIDs (iblinkinfo)
    and tools that print node GUIDs (ibnetdiscover) name one HCA two ways. ``host_sysimg``: every
    HCA of a host reports one system image GUID (as the functions of one adapter do)."""

    host_sysimg: bool = False


@dataclass
class _Node:
    node_id: str
    kind: Literal["switch", "ca"]
    guid: int
    desc: str
    nports: int
    sysimg: int | None = None
    ports: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # port -> peer id, port, rate


class BuiltFabric:
    """The plan's fabric as it is built: start from the manifest, then apply floor mistakes."""

    def __init__(self, manifest: Manifest, layout: GuidLayout | None = None) -> None:
        self.manifest = manifest
        self.layout = layout or GuidLayout()
        self.devices = manifest.device_map()
        self.cables = [Cable(lk.a, lk.b, manifest.expected_width(lk) or "4x", manifest.expected_speed(lk) or "HDR")
                       for lk in manifest.links]
        self.descriptions: dict[str, str] = {}  # node id -> node description as set
        self.extra_hosts: list[str] = []
        self._switch_guids, self._hca_guids = self._plan_guids()

    # -- GUIDs ----------------------------------------------------------------------------------

    def _plan_guids(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """GUIDs from the manifest where it has them, else made up, spaced for the port GUIDs."""
        switches: dict[str, int] = {}
        hcas: dict[tuple[str, str], int] = {}
        for n, d in enumerate(self.manifest.devices, 1):
            if d.kind == "switch":
                switches[d.name.casefold()] = int(d.guid, 16) if d.guid else 0xFC6A1C0300000000 + n
            else:
                for k, hca in enumerate(d.hcas):
                    given = d.hca_guids.get(hca)
                    # 4 apart: a dual-port HCA's port GUIDs (+1, +2) stay its own
                    hcas[(d.name.casefold(), hca)] = int(given, 16) if given else 0x946DAE0300000000 + n * 0x1000 + 4 * k
        return switches, hcas

    def node_guid(self, device: str, hca: str | None = None) -> str:
        """The node GUID (16 hex digits) a switch, or a host's HCA, answers with."""
        g = self._hca_guids[(device.casefold(), hca)] if hca is not None else self._switch_guids[device.casefold()]
        return f"{g:016x}"

    def port_guid(self, device: str, hca: str, port: int = 1) -> str:
        """The GUID of an HCA's port (the node GUID + the port number, as ibsim numbers them)."""
        g = self._hca_guids[(device.casefold(), hca)]
        return f"{g + port:016x}"

    def sysimg_guid(self, device: str, hca: str) -> str:
        """The system image GUID an HCA reports (its host's first HCA's, with ``host_sysimg``)."""
        if self.layout.host_sysimg:
            first = self.devices[device.casefold()].hcas[0]
            return f"{self._hca_guids[(device.casefold(), first)] | 0xF00:016x}"
        return self.node_guid(device, hca)

    # -- what went wrong on the floor -----------------------------------------------------------

    def cable_at(self, end: str) -> Cable:
        """The cable plugged into ``device:port``."""
        ep = Endpoint.model_validate(end)
        for c in self.cables:
            if ep.key in (c.a.key, c.b.key):
                return c
        raise CablingInputError(f"no cable is plugged into {end}")

    def _free(self, end: str) -> Endpoint:
        ep = Endpoint.model_validate(end)
        if any(ep.key in (c.a.key, c.b.key) for c in self.cables):
            raise CablingInputError(f"{end} already holds a cable")
        return ep

    def move(self, fixed: str, to: str) -> Cable:
        """The cable at ``fixed`` has its other end plugged into ``to`` (a free port) instead."""
        cable, target = self.cable_at(fixed), self._free(to)
        if cable.a.key == Endpoint.model_validate(fixed).key:
            cable.b = target
        else:
            cable.a = target
        return cable

    def swap(self, p: str, q: str) -> None:
        """The cables in ports ``p`` and ``q`` are plugged into each other's port."""
        cp, cq = self.cable_at(p), self.cable_at(q)
        ep, eq = Endpoint.model_validate(p), Endpoint.model_validate(q)
        far_p = cp.b if cp.a.key == ep.key else cp.a
        far_q = cq.b if cq.a.key == eq.key else cq.a
        cp.a, cp.b = eq, far_p
        cq.a, cq.b = ep, far_q

    def remove(self, end: str) -> Cable:
        """The cable at ``end`` was never plugged in."""
        cable = self.cable_at(end)
        self.cables.remove(cable)
        return cable

    def rate(self, end: str, width: str | None = None, speed: str | None = None) -> Cable:
        """The cable at ``end`` trains at ``width``/``speed`` (both its ports set so: OpenSM trains
        a link to the last port it configured)."""
        cable = self.cable_at(end)
        cable.width = width or cable.width
        cable.speed = speed or cable.speed
        return cable

    def describe(self, node_id: str, description: str) -> None:
        """Set a node's description as found: a fresh switch's vendor default, an HCA without
        rdma-ndd that gives its model only, a description copied from another node."""
        self.descriptions[node_id] = description

    def add_host(self, name: str, to: str) -> Cable:
        """An unplanned host's ``mlx5_0`` cabled into the free port ``to``."""
        target = self._free(to)
        self._extra_host(name)
        cable = Cable(Endpoint(device=name, port="mlx5_0"), target, "4x", self.manifest.fabric.speed or "HDR")
        self.cables.append(cable)
        return cable

    @classmethod
    def from_simulated(cls, manifest: Manifest, sim: SimFabric) -> tuple[BuiltFabric, list[Endpoint]]:
        """The cabling of ``provision cabling simulate``'s fault injection, to build in ibsim: the
        cables as plugged (moved, swapped, never plugged, unplanned hosts) at the rates they train
        at; and the ports ``sim`` has down, to unlink through the console once the simulator runs."""
        built = cls(manifest)
        built.cables = [Cable(lk.a, lk.b, lk.width, lk.speed) for lk in sim.links]
        # A port that is down has its planned cable plugged in: it goes dark once the simulator runs.
        down = {ep.key for ep in sim.down}
        built.cables += [Cable(lk.a, lk.b, manifest.expected_width(lk) or "4x", manifest.expected_speed(lk) or "HDR")
                         for lk in manifest.links if lk.a.key in down or lk.b.key in down]
        for name in sim.extra_hosts:
            built._extra_host(name)
        return built, list(sim.down)

    def _extra_host(self, name: str) -> None:
        """A host the plan does not have, with one HCA (``mlx5_0``)."""
        self.extra_hosts.append(name)
        self._hca_guids[(name.casefold(), "mlx5_0")] = 0x0C42A103FF000000 + 4 * len(self.extra_hosts)

    # -- the netfile ----------------------------------------------------------------------------

    def node_id(self, ep: Endpoint) -> str:
        """The simulator's id of the node an endpoint is on (console commands name it)."""
        dev = self.devices.get(ep.device.casefold())
        if dev is not None and dev.kind == "switch":
            return _safe_id(dev.name)
        return _safe_id(f"{ep.device}/{hca_of(ep.port)}")

    def switch_id(self, device: str) -> str:
        """The simulator's id of a switch."""
        return _safe_id(self.devices[device.casefold()].name)

    def hca_id(self, host: str, hca: str) -> str:
        """The simulator's id of a host's HCA."""
        return _safe_id(f"{self.devices[host.casefold()].name if host.casefold() in self.devices else host}/{hca}")

    def sim_port(self, ep: Endpoint) -> int:
        """The simulator's port number of an endpoint (a switch port, or an HCA's port 1 or 2)."""
        dev = self.devices.get(ep.device.casefold())
        if dev is not None and dev.kind == "switch":
            n = port_number(ep.port)
            if n is None:
                raise CablingInputError(f"{ep}: the simulator numbers switch ports; director port names are not "
                                        "simulated")
            return n
        _hca, _, port = ep.port.partition("/")
        return int(port) if port.isdigit() else 1

    def _nodes(self) -> dict[str, _Node]:
        nodes: dict[str, _Node] = {}
        for d in self.manifest.devices:
            if d.kind == "switch":
                desc = self.descriptions.get(self.switch_id(d.name), f"MF0;{d.name}:{d.model or 'MQM8790'}/U1")
                nodes[self.switch_id(d.name)] = _Node(self.switch_id(d.name), "switch",
                                                      self._switch_guids[d.name.casefold()], desc, d.ports or 0)
            else:
                for hca in d.hcas:
                    self._ca(nodes, d.name, hca)
        for name in self.extra_hosts:
            self._ca(nodes, name, "mlx5_0")
        for c in self.cables:
            rate = f"{c.width}{c.speed}"
            if c.speed not in SIM_SPEEDS:
                raise CablingInputError(f"{c.a} <-> {c.b} is planned at {c.speed}, which ibsim 0.10 does not "
                                        f"simulate", hint="plan the fabric with --speed HDR (or lower)")
            for me, peer in ((c.a, c.b), (c.b, c.a)):
                node = nodes[self.node_id(me)]
                port = self.sim_port(me)
                node.nports = max(node.nports, port)
                node.ports[port] = (self.node_id(peer), self.sim_port(peer), rate)
        return nodes

    def _ca(self, nodes: dict[str, _Node], host: str, hca: str) -> None:
        guid = self._hca_guids[(host.casefold(), hca)]
        sysimg = int(self.sysimg_guid(host, hca), 16) if host.casefold() in self.devices else None
        node_id = self.hca_id(host, hca)
        nodes[node_id] = _Node(node_id, "ca", guid, self.descriptions.get(node_id, f"{host} {hca}"), 1, sysimg)

    def netfile(self) -> str:
        """ibsim's topology text for the fabric as built."""
        nodes = self._nodes()
        out = [f"# ibsim topology of {self.manifest.source}, written by cabling.ibsim", ""]
        for node in nodes.values():
            # NVIDIA's vendor id; a Quantum (QM87xx) switch and a ConnectX-6 HCA's device ids
            if node.kind == "switch":
                out += ["vendid=0x2c9", "devid=0xd2f0", f"switchguid=0x{node.guid:016x}",
                        f'Switch\t{node.nports} "{node.node_id}"\t\t# "{node.desc}" enhanced port 0']
            else:
                out += ["vendid=0x2c9", "devid=0x101b"]
                if node.sysimg is not None and node.sysimg != node.guid:
                    out.append(f"sysimgguid=0x{node.sysimg:016x}")
                out += [f"caguid=0x{node.guid:016x}", f'Ca\t{node.nports} "{node.node_id}"\t\t# "{node.desc}"']
            for port in sorted(node.ports):
                peer, peer_port, rate = node.ports[port]
                out.append(f'[{port}]\t"{peer}"[{peer_port}]\t\t# "{nodes[peer].desc}" lid 0 {rate}')
            out.append("")
        return "\n".join(out) + "\n"

    def default_attach(self) -> str:
        """Where the tools run: the first planned host's first HCA (a fabric-attached host)."""
        host = next((d for d in self.manifest.devices if d.kind == "host" and d.hcas), None)
        if host is not None:
            return self.hca_id(host.name, host.hcas[0])
        return self.switch_id(next(d.name for d in self.manifest.devices if d.kind == "switch"))

    def capacity(self) -> tuple[int, int, int]:
        """(nodes, switches, ports) for ibsim's -N -S -P, with room for the ports of every node."""
        nodes = self._nodes()
        switches = sum(1 for n in nodes.values() if n.kind == "switch")
        ports = sum(n.nports + 1 for n in nodes.values())
        return len(nodes) + 16, switches + 8, ports + 64


def _safe_id(text: str) -> str:
    """A node id the simulator's parser reads back whole (it reserves '#' and '@' and splits on quotes)."""
    if set(text) & _ID_FORBIDDEN or len(text) > 60:
        raise CablingInputError(f"{text!r} cannot be a simulator node id",
                                hint="device and HCA names without spaces, quotes, brackets, '#' or '@'")
    return text
