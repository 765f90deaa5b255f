"""Render a manifest as the discovery output of a built fabric, optionally with injected faults.

Used to rehearse validation before the hardware exists (the text feeds UFM's simulator too),
and by the benchmark and tests, which check that validate finds every injected fault.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from cabling.discovery.iblinkinfo import format_port_line
from cabling.findings import ROOT_KINDS, Report
from cabling.model import Device, Endpoint, Manifest
from cabling.ports import hca_of
from cabling.speeds import SPEEDS

FAULT_KINDS = ("missing", "unexpected", "moved", "swapped", "degraded_speed", "degraded_width", "down")


@dataclass
class SimLink:
    """A cable as it is actually plugged, and how it trained."""

    a: Endpoint
    b: Endpoint
    width: str
    speed: str


@dataclass
class Fault:
    """One injected fault: its kind and the planned links it touches (as endpoint-text pairs)."""

    kind: str
    planned: list[tuple[str, str]] = field(default_factory=list)
    found: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class SimFabric:
    """The simulated as-built state: links, ports that are down, and extra (unplanned) hosts."""

    links: list[SimLink]
    down: list[Endpoint] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    extra_hosts: list[str] = field(default_factory=list)
    # Switches that do not answer at all (powered off): ibnetdiscover does not list them.
    absent: list[str] = field(default_factory=list)


def build_clean(manifest: Manifest) -> SimFabric:
    """The fabric exactly as planned."""
    out = []
    for lk in manifest.links:
        out.append(SimLink(lk.a, lk.b, manifest.expected_width(lk) or "4x", manifest.expected_speed(lk) or "NDR"))
    return SimFabric(out)


def inject_faults(manifest: Manifest, per_kind: int, seed: int = 7) -> SimFabric:
    """The planned fabric with ``per_kind`` faults of every kind in :data:`FAULT_KINDS`."""
    rng = random.Random(seed)
    sim = build_clean(manifest)
    devices = manifest.device_map()
    used = {ep.key for lk in manifest.links for ep in (lk.a, lk.b)}
    free: list[Endpoint] = []
    for d in manifest.devices:
        if d.kind == "switch" and d.ports and d.role == "leaf":
            free += [Endpoint(device=d.name, port=str(p)) for p in range(1, d.ports + 1)
                     if (d.name.casefold(), str(p)) not in used]
    host_links = [i for i, lk in enumerate(manifest.links) if _is_host_link(devices, lk.a, lk.b)]
    all_links = list(range(len(manifest.links)))
    rng.shuffle(host_links)
    rng.shuffle(all_links)
    touched: set[int] = set()
    removed: set[int] = set()

    def take(pool: list[int]) -> int:
        while pool:
            i = pool.pop()
            if i not in touched:
                touched.add(i)
                return i
        raise ValueError("the plan is too small for this many faults")

    def pair(i: int) -> tuple[str, str]:
        lk = manifest.links[i]
        return str(lk.a), str(lk.b)

    def sw_end(i: int) -> tuple[Endpoint, Endpoint]:
        """(host end, switch end) of a host link."""
        lk = manifest.links[i]
        return (lk.a, lk.b) if devices[lk.a.device.casefold()].kind == "host" else (lk.b, lk.a)

    for _ in range(per_kind):
        i = take(all_links)
        removed.add(i)
        sim.faults.append(Fault("missing", [pair(i)]))

        i = take(all_links)
        sim.links[i].speed = SPEEDS[SPEEDS.index(sim.links[i].speed) - 1]
        sim.faults.append(Fault("degraded_speed", [pair(i)]))

        i = take(all_links)
        sim.links[i].width = "2x" if rng.random() < 0.7 else "1x"
        sim.faults.append(Fault("degraded_width", [pair(i)]))

        i = take(all_links)
        removed.add(i)
        lk = manifest.links[i]
        port = lk.b if devices[lk.b.device.casefold()].kind == "switch" else lk.a
        sim.down.append(port)
        sim.faults.append(Fault("down", [pair(i)]))

        # Swap: two host cables on the same leaf exchange their leaf ports.
        i = take(host_links)
        h1, s1 = sw_end(i)
        j = next((k for k in host_links if k not in touched and sw_end(k)[1].device == s1.device), None)
        if j is None:
            j = take(host_links)
        touched.add(j)
        h2, s2 = sw_end(j)
        sim.links[i].a, sim.links[i].b = h1, s2
        sim.links[j].a, sim.links[j].b = h2, s1
        sim.faults.append(Fault("swapped", [pair(i), pair(j)], [(str(h1), str(s2)), (str(h2), str(s1))]))

        # Move: a host cable's leaf end lands on a free port (or on one whose cable is gone).
        i = take(host_links)
        h1, s1 = sw_end(i)
        if free:
            target = free.pop()
            sim.faults.append(Fault("moved", [pair(i)], [(str(h1), str(target))]))
        else:
            j = take(host_links)
            removed.add(j)
            target = sw_end(j)[1]
            sim.faults.append(Fault("moved", [pair(i), pair(j)], [(str(h1), str(target))]))
        sim.links[i].a, sim.links[i].b = h1, target

        # Unexpected: a host nobody planned, cabled into a free leaf port (or one whose cable is gone).
        extra = f"spare{len(sim.extra_hosts) + 1:03d}"
        sim.extra_hosts.append(extra)
        ep = Endpoint(device=extra, port="mlx5_0")
        if free:
            target = free.pop()
            planned: list[tuple[str, str]] = []
        else:
            j = take(host_links)
            removed.add(j)
            target = sw_end(j)[1]
            planned = [pair(j)]
        sim.links.append(SimLink(ep, target, "4x", manifest.fabric.speed or "NDR"))
        sim.faults.append(Fault("unexpected", planned, [(str(ep), str(target))]))
    sim.links = [lk for k, lk in enumerate(sim.links) if k not in removed]
    return sim


def _is_host_link(devices: dict[str, Device], a: Endpoint, b: Endpoint) -> bool:
    kinds = {devices[a.device.casefold()].kind, devices[b.device.casefold()].kind}
    return kinds == {"host", "switch"}


def _guids(manifest: Manifest, sim: SimFabric) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    sw: dict[str, str] = {}
    hca: dict[tuple[str, str], str] = {}
    for n, d in enumerate(manifest.devices, 1):
        if d.kind == "switch":
            sw[d.name.casefold()] = f"fc6a1c0300{n:06x}"
        else:
            for k, h in enumerate(d.hcas):
                hca[(d.name.casefold(), h)] = f"946dae03{n:05x}{k:03x}"
    for k, name in enumerate(sim.extra_hosts):
        hca[(name.casefold(), "mlx5_0")] = f"0c42a103ff{k:06x}"
    return sw, hca


def render_ibnetdiscover(manifest: Manifest, sim: SimFabric) -> str:
    """ibnetdiscover text of the simulated fabric (switch blocks, then one block per HCA)."""
    devices = manifest.device_map()
    sw_guid, hca_guid = _guids(manifest, sim)
    lids: dict[str, int] = {}

    def node(ep: Endpoint) -> tuple[str, str, str, int]:
        """(ibnet id, port text, description, lid) of an endpoint."""
        key = ep.device.casefold()
        dev = devices.get(key)
        if dev is not None and dev.kind == "switch":
            g = sw_guid[key]
            desc = f"MF0;{dev.name}:{dev.model or 'MQM9700'}/U1"
            return f"S-{g}", ep.port, desc, lids.setdefault(g, len(lids) + 1)
        hca = hca_of(ep.port)
        g = hca_guid[(key, hca)]
        return f"H-{g}", "1", f"{ep.device} {hca}", lids.setdefault(g, len(lids) + 1)

    ports: dict[str, list[tuple[int, str]]] = {}
    for lk in sim.links:
        na, nb = node(lk.a), node(lk.b)
        rate = f"{lk.width}{lk.speed}"
        for me, other in ((na, nb), (nb, na)):
            pg = f"({other[0][2:]})" if other[0].startswith("H-") else ""
            if me[0].startswith("S-"):
                line = f'[{me[1]}]\t"{other[0]}"[{other[1]}]{pg}\t\t# "{other[2]}" lid {other[3]} {rate}'
                ports.setdefault(me[0], []).append((int(me[1]), line))
            else:
                line = (f'[1]({me[0][2:]}) \t"{other[0]}"[{other[1]}]{pg}\t\t# lid {me[3]} lmc 0 '
                        f'"{other[2]}" lid {other[3]} {rate}')
                ports.setdefault(me[0], []).append((1, line))
    out = ["#", "# Topology file: generated by provision cabling simulate", "#", ""]
    absent = {name.casefold() for name in sim.absent}
    for d in manifest.devices:
        if d.kind != "switch" or d.name.casefold() in absent:
            continue
        g = sw_guid[d.name.casefold()]
        out += ["vendid=0x2c9", "devid=0xd2f2", f"sysimgguid=0x{g}", f"switchguid=0x{g}({g})",
                f'Switch\t{d.ports or 64} "S-{g}"\t\t# "MF0;{d.name}:{d.model or "MQM9700"}/U1" enhanced port 0 '
                f"lid {lids.setdefault(g, len(lids) + 1)} lmc 0"]
        out += [line for _, line in sorted(ports.get(f"S-{g}", []))]
        out.append("")
    for (host, hca), g in hca_guid.items():
        lines = ports.get(f"H-{g}")
        if not lines:
            continue
        name = next((d.name for d in manifest.devices if d.name.casefold() == host), host)
        out += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{g}", f"caguid=0x{g}",
                f'Ca\t1 "H-{g}"\t\t# "{name} {hca}"']
        out += [line for _, line in lines]
        out.append("")
    return "\n".join(out)


def render_iblinkinfo_down(manifest: Manifest, sim: SimFabric) -> str:
    """Partial iblinkinfo (``iblinkinfo -d``) listing the switches that have a port down."""
    sw_guid, _ = _guids(manifest, sim)
    devices = manifest.device_map()
    by_switch: dict[str, list[int]] = {}
    for ep in sim.down:
        by_switch.setdefault(ep.device, []).append(int(ep.port))
    out = []
    for n, (name, ports) in enumerate(sorted(by_switch.items()), 1):
        dev = devices[name.casefold()]
        out.append(f"Switch: 0x{sw_guid[name.casefold()]} MF0;{dev.name}:{dev.model or 'MQM9700'}/U1:")
        for p in sorted(ports):
            out.append(format_port_line(n, p, None, None, "Down", "Polling"))
    return "\n".join(out) + "\n"


def verify_report(manifest: Manifest, sim: SimFabric, report: Report, *, tell_down: bool = True) -> list[str]:
    """Problems with a validate report of ``sim``: a fault not found, a wrong fix, a false alarm.

    Applies every move and swap the report prescribes to the simulated cabling; what then still
    differs from the plan must be exactly the report's missing/down and unexpected links.
    ``tell_down=False`` for the real tools: ibnetdiscover alone sees no port that is down (a port
    down is a link missing), and the full iblinkinfo lists every switch port that is not up, cabled
    or not (a cable never plugged into a switch port is a port down), so only the two together are
    judged.
    """
    def k(text: str) -> str:
        return text.casefold()

    def pk(a: str, b: str) -> frozenset[str]:
        return frozenset((k(a), k(b)))

    planned = {pk(str(lk.a), str(lk.b)) for lk in manifest.links}
    cabled: dict[str, str] = {}
    for lk in sim.links:
        cabled[k(str(lk.a))] = k(str(lk.b))
        cabled[k(str(lk.b))] = k(str(lk.a))
    problems: list[str] = []

    def unplug(a: str) -> str | None:
        b = cabled.pop(a, None)
        if b is not None:
            cabled.pop(b, None)
        return b

    def plug(a: str, b: str) -> None:
        if a in cabled or b in cabled:
            problems.append(f"fix plugs into an occupied port: {a} or {b}")
        cabled[a], cabled[b] = b, a

    by_kind: dict[str, set[frozenset[str]]] = {kind: set() for kind in FAULT_KINDS}
    for f in report.findings:
        if f.kind in ROOT_KINDS:
            continue  # a root cause names a device; its cables are judged one by one below
        if f.kind not in by_kind:
            problems.append(f"unexpected finding kind {f.kind}: {f.message}")
            continue
        if f.kind == "moved":
            fixed, old, new = k(f.data["fixed"]), k(f.data["from"]), k(f.data["to"])
            if cabled.get(fixed) != old:
                problems.append(f"move names a cable that is not there: {f.fix}")
            unplug(fixed)
            unplug(new)
            plug(fixed, new)
            by_kind["moved"].add(pk(fixed, new))
        elif f.kind == "swapped":
            a, x, y, b = (k(e) for e in f.endpoints)
            if cabled.get(a) != b or cabled.get(y) != x:
                problems.append(f"swap names cables that are not there: {f.fix}")
            unplug(a)
            unplug(y)
            plug(a, x)
            plug(y, b)
            by_kind["swapped"].add(pk(a, x))
        else:
            by_kind[f.kind].add(pk(*f.endpoints[:2]))
    fixed_state = {frozenset((a, b)) for a, b in cabled.items()}
    still_missing = planned - fixed_state
    still_extra = fixed_state - planned
    if still_missing != by_kind["missing"] | by_kind["down"]:
        problems.append(f"after the fixes, links still missing but not reported: "
                        f"{sorted(map(sorted, still_missing - by_kind['missing'] - by_kind['down']))[:5]}; "
                        f"reported missing but present: "
                        f"{sorted(map(sorted, (by_kind['missing'] | by_kind['down']) - still_missing))[:5]}")
    if still_extra != by_kind["unexpected"]:
        problems.append(f"unexpected links not reported: {sorted(map(sorted, still_extra - by_kind['unexpected']))[:5]};"
                        f" reported but not there: {sorted(map(sorted, by_kind['unexpected'] - still_extra))[:5]}")
    for kind in ("degraded_speed", "degraded_width", "down") if tell_down else ("degraded_speed", "degraded_width"):
        want = {pk(*fault.planned[0]) for fault in sim.faults if fault.kind == kind}
        if want != by_kind[kind]:
            problems.append(f"{kind}: missed {sorted(map(sorted, want - by_kind[kind]))[:3]}, "
                            f"false {sorted(map(sorted, by_kind[kind] - want))[:3]}")
    for fault in sim.faults:
        if fault.kind == "swapped" and pk(*fault.planned[0]) not in by_kind["swapped"] \
                and pk(*fault.planned[1]) not in by_kind["swapped"]:
            problems.append(f"swap not reported as one swap: {fault.planned}")
        if fault.kind == "moved" and not any(pk(*p) in by_kind["moved"] for p in fault.planned):
            problems.append(f"move not reported as a move: {fault.planned} -> {fault.found}")
    return problems
