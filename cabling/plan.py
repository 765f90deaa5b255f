"""Generate the manifest of a rail-optimised fat tree (2 or 3 tiers), named by physical location.

Hosts come in scalable units (SUs) of ``down`` hosts; each SU has one leaf per rail, and HCA
``k`` of every host in the SU goes to the rail-``k`` leaf. Leaves of all rails meet at the
spine tier (within a pod in 3 tiers), so the fabric is one network, not one per rail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cabling.errors import CablingInputError
from cabling.model import (
    Device,
    Endpoint,
    Fabric,
    Link,
    Location,
    Manifest,
    check_name,
    parse_ratio,
)
from cabling.speeds import SPEEDS, normalize_speed


@dataclass(frozen=True)
class PlanSpec:
    """What to build: host count, HCAs (rails) per host, switch radix, blocking and tiers."""

    hosts: int
    hcas: int = 8
    radix: int = 64
    blocking: str = "1:1"
    tiers: int | None = None
    speed: str = "NDR"
    switch_model: str = "QM9700"
    host_prefix: str = "gpu"
    hosts_per_rack: int = 4
    switches_per_rack: int = 16
    name: str | None = None


def plan_fat_tree(spec: PlanSpec) -> Manifest:
    """Build the manifest; errors say which parameter to change when the shape cannot be built."""
    try:
        normalize_speed(spec.speed)
    except ValueError:
        raise CablingInputError(
            f"--speed {spec.speed!r} is not a link speed", hint="use one of " + ", ".join(SPEEDS),
        ) from None
    try:
        check_name(f"{spec.host_prefix}001", "host name", device=True)
    except ValueError as exc:
        raise CablingInputError(f"--host-prefix: {exc}") from None
    if spec.hosts < 1 or spec.hcas < 1:
        raise CablingInputError("hosts and HCAs per host must be at least 1")
    if spec.radix < 4 or spec.radix % 2:
        raise CablingInputError(f"switch radix {spec.radix} must be an even number of at least 4")
    try:
        a, b = parse_ratio(spec.blocking)
    except ValueError as exc:
        raise CablingInputError(str(exc)) from None
    down = spec.radix * a // (a + b)
    up = spec.radix - down
    if down < 1 or up < 1:
        raise CablingInputError(f"blocking {spec.blocking} leaves no down or up ports on a radix-{spec.radix} leaf")
    n_su = math.ceil(spec.hosts / down)
    n_leaves = n_su * spec.hcas
    tiers = spec.tiers or (2 if n_leaves <= spec.radix else 3)
    if tiers == 2 and n_leaves > spec.radix:
        raise CablingInputError(
            f"{n_leaves} leaves do not fit under radix-{spec.radix} spines in 2 tiers "
            f"(at most {spec.radix})", hint="use --tiers 3, or a larger radix",
        )
    if tiers not in (2, 3):
        raise CablingInputError(f"tiers must be 2 or 3, not {tiers}")
    if tiers == 3:
        # Check the shape before building thousands of devices.
        if up > spec.radix // 2:
            raise CablingInputError("a 3-tier plan needs leaves with at most half their ports up")
        n_pods = math.ceil(n_leaves / _per_pod(spec))
        if n_pods > spec.radix:
            raise CablingInputError(f"{n_pods} pods exceed what radix-{spec.radix} cores can join",
                                    hint="use a larger radix or fewer hosts")

    b_ = _Builder(spec)
    leaves = b_.hosts_and_leaves(down, n_su)
    if tiers == 2:
        b_.two_tier(leaves, up)
    else:
        b_.three_tier(leaves, up)
    fabric = Fabric(name=spec.name, tiers=tiers, rails=spec.hcas, blocking=spec.blocking, speed=spec.speed)
    return Manifest(fabric=fabric, devices=b_.devices, links=b_.links)


def _per_pod(spec: PlanSpec) -> int:
    """Leaves per pod: whole scalable units when the rails fit, so a pod is a physical block."""
    pod_size = spec.radix // 2
    return (pod_size // spec.hcas) * spec.hcas if spec.hcas <= pod_size else pod_size


class _Builder:
    def __init__(self, spec: PlanSpec) -> None:
        self.spec = spec
        self.devices: list[Device] = []
        self.links: list[Link] = []
        self.rack_no = 0
        self.total_racks_hint = 0

    def _rack(self) -> str:
        self.rack_no += 1
        return f"r{self.rack_no:03d}"

    def _link(self, a: Endpoint, b: Endpoint) -> None:
        self.links.append(Link(a=a, b=b, cable=f"C{len(self.links) + 1:05d}"))

    def _switches(self, count: int, role: str, letter: str, group: str | None, **extra: object) -> list[Device]:
        out: list[Device] = []
        rack = self._rack()
        for j in range(count):
            if j and j % self.spec.switches_per_rack == 0:
                rack = self._rack()
            u = 40 - (j % self.spec.switches_per_rack) * 2
            dev = Device(
                name=f"{rack}-{letter}{j + 1}", kind="switch", role=role,  # type: ignore[arg-type]
                model=self.spec.switch_model, ports=self.spec.radix, speed=self.spec.speed,
                group=group, location=Location(rack=rack, u=u), **extra,  # type: ignore[arg-type]
            )
            out.append(dev)
        self.devices.extend(out)
        return out

    def hosts_and_leaves(self, down: int, n_su: int) -> list[Device]:
        spec = self.spec
        hcas = [f"mlx5_{k}" for k in range(spec.hcas)]
        leaves: list[Device] = []
        n = 0
        for s in range(n_su):
            su = f"su{s + 1:02d}"
            members: list[Device] = []
            rack = ""
            for i in range(min(down, spec.hosts - n)):
                if i % spec.hosts_per_rack == 0:
                    rack = self._rack()
                n += 1
                u = 2 + (i % spec.hosts_per_rack) * 10
                members.append(Device(name=f"{spec.host_prefix}{n:03d}", kind="host", hcas=hcas, group=su,
                                      speed=spec.speed, location=Location(rack=rack, u=u)))
            self.devices.extend(members)
            rack = self._rack()
            for r in range(spec.hcas):
                leaf = Device(name=f"{rack}-l{r + 1}", kind="switch", role="leaf", model=spec.switch_model,
                              ports=spec.radix, rail=r, group=su, speed=spec.speed,
                              location=Location(rack=rack, u=40 - 2 * r))
                self.devices.append(leaf)
                leaves.append(leaf)
                for i, host in enumerate(members):
                    self._link(Endpoint(device=host.name, port=hcas[r]), Endpoint(device=leaf.name, port=str(i + 1)))
        self.down = down
        return leaves

    def two_tier(self, leaves: list[Device], up: int) -> None:
        radix = self.spec.radix
        # Fewest spines that still take every uplink, with each leaf reaching each spine equally.
        n_spines = next(s for s in range(1, up + 1) if up % s == 0 and len(leaves) * (up // s) <= radix)
        spines = self._switches(n_spines, "spine", "s", None)
        next_port = [1] * n_spines
        for leaf in leaves:
            for m in range(up):
                s = m % n_spines
                self._link(Endpoint(device=leaf.name, port=str(self.down + m + 1)),
                           Endpoint(device=spines[s].name, port=str(next_port[s])))
                next_port[s] += 1

    def three_tier(self, leaves: list[Device], up: int) -> None:
        radix = self.spec.radix
        pod_size = radix // 2  # non-blocking spines: half down to leaves, half up to cores
        per_pod = _per_pod(self.spec)
        pods = [leaves[i : i + per_pod] for i in range(0, len(leaves), per_pod)]
        spine_up = radix - pod_size
        spines_by_pod: list[list[Device]] = []
        for p, pod in enumerate(pods):
            spines = self._switches(up, "spine", "s", f"pod{p + 1}")
            spines_by_pod.append(spines)
            for li, leaf in enumerate(pod):
                for j, spine in enumerate(spines):
                    self._link(Endpoint(device=leaf.name, port=str(self.down + j + 1)),
                               Endpoint(device=spine.name, port=str(li + 1)))
        n_cores = math.ceil(len(pods) * up * spine_up / radix)
        cores = self._switches(n_cores, "core", "c", None)
        next_port = [1] * n_cores
        for spines in spines_by_pod:
            for j, spine in enumerate(spines):
                for m in range(spine_up):
                    c = (j * spine_up + m) % n_cores
                    if next_port[c] > radix:
                        raise CablingInputError(
                            f"core {cores[c].name} would need more than {radix} ports",
                            hint="choose a host count that fills whole pods, or a larger radix",
                        )
                    self._link(Endpoint(device=spine.name, port=str(pod_size + m + 1)),
                               Endpoint(device=cores[c].name, port=str(next_port[c])))
                    next_port[c] += 1
