"""Root causes before cables: a switch or host whose links are all or mostly missing or down is
one finding naming the device and what to check first (power, PSUs, its management port, its
HCAs), and so is a rail or a plane (a switch group) that is mostly dark; the cable findings it
explains follow under it (``data["cause"]``), so a technician walks to one switch, not 48 ports.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from cabling.findings import Finding
from cabling.model import Device, Manifest
from cabling.ports import hca_of, natural_key

# A device is a root cause when more than half of its planned links (and at least this many)
# are missing or down; a rail or plane when more than half of its links are, across its devices.
_MIN_DEVICE_LINKS = 2
_MIN_GROUP_LINKS = 4
DEAD = ("missing", "down")


@dataclass
class _Scope:
    """A device, rail or plane: its planned links and those of them that did not come up."""

    kind: str  # "switch", "host", "rail", "plane"
    name: str
    links: set[int] = field(default_factory=set)
    dead: dict[int, Finding] = field(default_factory=dict)

    def mostly_dead(self, least: int) -> bool:
        return len(self.dead) >= least and 2 * len(self.dead) > len(self.links)


def root_causes(manifest: Manifest, findings: list[Finding], present: set[str]) -> list[Finding]:
    """The findings with root causes added and the cable findings they explain under them.
    ``present``: case-folded names of the devices the fabric answered for."""
    dead = {f.data["link"]: f for f in findings if f.kind in DEAD and "link" in f.data}
    if not dead:
        return findings
    devices = manifest.device_map()
    scopes = _scopes(manifest, devices, dead)
    explained: dict[int, Finding] = {}
    nbrs = _neighbours(manifest, devices)
    # Absent devices none of whose neighbours answers were never reached by the tools: judged last.
    cut = {k for k in scopes["device"] if k not in present and not (nbrs[k] & present)}
    device_roots = _device_roots(manifest, devices, scopes["device"], present, cut, explained)
    behind = _behind(manifest, nbrs, device_roots, cut, dead, explained, scopes["device"])
    group_roots: list[tuple[Finding, list[Finding]]] = []
    for what in ("plane", "rail"):
        for name in sorted(scopes[what], key=natural_key):
            scope = scopes[what][name]
            if not scope.mostly_dead(_MIN_GROUP_LINKS):
                continue
            members = [device_roots[k] for k in _members(scope, devices) if k in device_roots]
            loose = {i: f for i, f in scope.dead.items() if i not in explained}
            if len(members) >= 2 or 2 * len(loose) > len(scope.links):
                root = _group_root(scope, members, loose, manifest)
                group_roots.append((root, members))
                for i in loose:
                    explained[i] = root
                for m in members:
                    m.data.setdefault("cause", root.data["root"])
    roots: list[Finding] = []
    for root, members in group_roots:
        roots.append(root)
        roots += members
        for m in members:  # what a switch of the rail or plane cuts off, the rail or plane does
            root.data["behind"] = [*root.data.get("behind", []), *m.data.pop("behind", [])]
    roots += [r for r in device_roots.values() if r not in roots]
    by_root = {r.data["root"]: r for r in roots}
    for i, root in explained.items():
        if i in behind and root.data.get("cause"):
            # Cut off behind a switch of a dark rail or plane: behind the rail or plane.
            root = by_root[root.data["cause"]]
        dead[i].data["cause"] = root.data["root"]
        root.data.setdefault("cables", []).append(" <-> ".join(dead[i].endpoints[:2]))
    for root in roots:
        root.data["cables"] = sorted(root.data.get("cables", []), key=natural_key)
        _say_behind(root)
    return arrange(roots + findings)


def _neighbours(manifest: Manifest, devices: dict[str, Device]) -> dict[str, set[str]]:
    """Each device's planned neighbours (case-folded)."""
    nbrs: dict[str, set[str]] = defaultdict(set)
    for lk in manifest.links:
        a, b = lk.a.device.casefold(), lk.b.device.casefold()
        if a in devices and b in devices and a != b:
            nbrs[a].add(b)
            nbrs[b].add(a)
    return nbrs


def _device_roots(manifest: Manifest, devices: dict[str, Device], scopes: dict[str, _Scope], present: set[str],
                  cut: set[str], explained: dict[int, Finding]) -> dict[str, Finding]:
    """Devices whose links are mostly dead, by case-folded name; ``explained`` gets their links.

    Reachable switches first, absent before answering: a host's cable to a dark leaf is the leaf's, and a host is a root cause
    only by the links no switch explains (five dark leaves must not make every host a root cause)."""
    roots: dict[str, Finding] = {}
    order = sorted(scopes, key=lambda k: (k in cut, devices[k].kind != "switch", k in present, natural_key(k)))
    for key in order:
        scope = scopes[key]
        own = _Scope(scope.kind, scope.name, scope.links, {i: f for i, f in scope.dead.items() if i not in explained})
        if own.mostly_dead(_MIN_DEVICE_LINKS):
            root = _device_root(own, devices[key], key in present, manifest)
            roots[key] = root
            for i in own.dead:
                explained[i] = root
    return roots


def _behind(manifest: Manifest, nbrs: dict[str, set[str]], roots: dict[str, Finding], cut: set[str],
            dead: dict[int, Finding], explained: dict[int, Finding], scopes: dict[str, _Scope]) -> set[int]:
    """Devices the tools never reached (absent, and no neighbour answers) are no root cause of their
    own: their links go under the dark device that cuts them off, nearest first. Returns the links
    so moved."""
    if not cut:
        return set()
    owner: dict[str, str] = {}
    frontier = sorted((k for k in roots if k not in cut), key=natural_key)
    for k in frontier:
        owner[k] = k
    while frontier:
        nxt: list[str] = []
        for k in frontier:
            for n in sorted(nbrs[k] & cut, key=natural_key):
                if n not in owner:
                    owner[n] = owner[k]
                    nxt.append(n)
        frontier = nxt
    devices = manifest.device_map()
    _islands(nbrs, roots, cut, owner, scopes, devices, manifest)
    blocked = {id(roots.pop(k)) for k in sorted(cut & set(roots), key=natural_key) if owner.get(k) != k}
    moved: set[int] = set()
    for i in dead:
        lk = manifest.links[i]
        ends = [e.device.casefold() for e in (lk.a, lk.b)]
        via = next((owner[e] for e in ends if e in cut and e in owner), None)
        mine = explained.get(i)
        if mine is not None and id(mine) not in blocked:
            continue
        if via is None:
            explained.pop(i, None)
            continue
        explained[i] = roots[via]
        moved.add(i)
    names = {d.name.casefold(): d.name for d in manifest.devices}
    for k in sorted(cut, key=natural_key):
        if k in owner and owner[k] != k:
            root = roots[owner[k]]
            root.data["behind"] = [*root.data.get("behind", []), names[k]]
    return moved


def _islands(nbrs: dict[str, set[str]], roots: dict[str, Finding], cut: set[str], owner: dict[str, str],
             scopes: dict[str, _Scope], devices: dict[str, Device], manifest: Manifest) -> None:
    """Unreached devices no dark neighbour cuts off form islands nothing reaches (a switch absent with
    the hosts only it connects): each island is one root cause, its switch with the most cables."""
    left = sorted((k for k in cut if k not in owner), key=natural_key)
    for start in left:
        if start in owner:
            continue
        island, todo = {start}, [start]
        while todo:
            for n in nbrs[todo.pop()] & cut:
                if n not in island and n not in owner:
                    island.add(n)
                    todo.append(n)
        head = max(sorted(island, key=natural_key),
                   key=lambda k: (devices[k].kind == "switch", len(scopes[k].links) if k in scopes else 0))
        if head not in roots:
            if head not in scopes or len(scopes[head].dead) < _MIN_DEVICE_LINKS:
                continue
            roots[head] = _device_root(scopes[head], devices[head], False, manifest)
        for k in island:
            owner[k] = head


def _say_behind(root: Finding) -> None:
    """Name the devices a dark device cuts off, in its message."""
    behind = root.data.get("behind")
    if behind:
        names = sorted(behind, key=natural_key)
        root.message += (f"; {len(names)} device(s) behind it cannot be reached, so their cables are listed "
                         f"under it too ({', '.join(names[:6])}{' ...' if len(names) > 6 else ''})")


def _scopes(manifest: Manifest, devices: dict[str, Device], dead: dict[int, Finding]) -> dict[str, dict[str, _Scope]]:
    """Every device, rail and plane with its planned links and the dead ones among them."""
    out: dict[str, dict[str, _Scope]] = {"device": {}, "rail": {}, "plane": {}}
    for i, lk in enumerate(manifest.links):
        for ep in (lk.a, lk.b):
            dev = devices.get(ep.device.casefold())
            if dev is None:
                continue
            scopes = [out["device"].setdefault(dev.name.casefold(), _Scope(dev.kind, dev.name))]
            rail = _rail(dev, ep.port)
            if rail is not None:
                scopes.append(out["rail"].setdefault(str(rail), _Scope("rail", str(rail))))
            if dev.kind == "switch" and dev.group:
                scopes.append(out["plane"].setdefault(dev.group, _Scope("plane", dev.group)))
            for s in scopes:
                s.links.add(i)
                if i in dead:
                    s.dead[i] = dead[i]
    # A plane of one switch is that switch.
    out["plane"] = {k: s for k, s in out["plane"].items()
                    if sum(1 for d in devices.values() if d.kind == "switch" and d.group == k) >= 2}
    return out


def _rail(dev: Device, port: str) -> int | None:
    """The rail a host's cable is on: the index of its HCA. (A rail's leaves are judged as devices:
    two or more of them dark make the rail dark.)"""
    if dev.kind == "switch":
        return None
    hca = hca_of(port)
    return dev.hcas.index(hca) if hca in dev.hcas else None


def _members(scope: _Scope, devices: dict[str, Device]) -> list[str]:
    """The switches of a rail (its leaves) or of a plane (its group), case-folded."""
    if scope.kind == "rail":
        return [k for k, d in devices.items() if d.kind == "switch" and d.rail is not None and str(d.rail) == scope.name]
    return [k for k, d in devices.items() if d.kind == "switch" and d.group == scope.name]


def _hcas(manifest: Manifest, links: dict[int, Finding], host: str | None = None) -> list[str]:
    """The HCAs at the host ends of these planned links (of one host, or of any)."""
    out: set[str] = set()
    devices = manifest.device_map()
    for i in links:
        for ep in (manifest.links[i].a, manifest.links[i].b):
            dev = devices.get(ep.device.casefold())
            if dev is not None and dev.kind == "host" and (host is None or dev.name == host):
                out.add(hca_of(ep.port))
    return sorted(out, key=natural_key)


def _device_root(scope: _Scope, dev: Device, present: bool, manifest: Manifest) -> Finding:
    n, dead = len(scope.links), len(scope.dead)
    share = f"none of its {n} cables came up" if dead == n else f"{dead} of its {n} cables are missing or down"
    where = f" (rack {dev.location.rack}{f', U{dev.location.u}' if dev.location.u else ''})" \
        if dev.location and dev.location.rack else ""
    if dev.kind == "switch":
        if present:
            message = f"switch {dev.name}{where} answers, but {share}"
            fix = (f"check {dev.name} first: its ports' state and configuration (disabled ports, a wrong "
                   "port profile or speed setting), its firmware and its PSUs; then its cables, one at a time")
        else:
            message = f"switch {dev.name}{where} is absent: {share} and no node answers as {dev.name}"
            fix = (f"check {dev.name}'s power first (both PSUs and their PDU feed, the power LED), that it "
                   "booted (its console or management port), then its cables")
    else:
        hcas = _hcas(manifest, scope.dead, dev.name)
        on = f" ({', '.join(hcas)})" if hcas else ""
        if present:
            message = f"host {dev.name}{where}: {share}{on}"
            fix = (f"check the HCAs on {dev.name} first ('ibstat': ports Down or Polling, a driver or firmware "
                   "fault, an HCA missing from lspci), then its cables")
        else:
            message = f"host {dev.name}{where} is absent from the fabric: {share}{on}"
            fix = (f"check {dev.name} is powered on and booted and that its HCAs are seated and their driver "
                   "loaded ('ibstat' on the host) before touching its cables")
    return Finding(kind="device_down", severity="error", message=message, fix=fix, where=manifest.where_device(dev.name),
                   endpoints=[dev.name],
                   data={"root": f"{dev.kind} {dev.name}", "device": dev.name, "absent": not present,
                         "planned": n, "dead": dead})


def _group_root(scope: _Scope, members: list[Finding], loose: dict[int, Finding], manifest: Manifest) -> Finding:
    n, dead = len(scope.links), len(scope.dead)
    label = f"rail {scope.name}" if scope.kind == "rail" else f"plane {scope.name}"
    names = [m.data["device"] for m in members]
    if len(members) >= 2:
        message = (f"{label}: {dead} of its {n} cables are missing or down; {len(members)} of its switches "
                   f"are down or absent ({', '.join(names[:6])}{' ...' if len(names) > 6 else ''})")
        fix = (f"check what the switches of {label} share before each switch: the power feed and PDUs of their "
               "racks, their management network, a firmware update that went to all of them")
    else:
        hcas = _hcas(manifest, loose)
        message = (f"{label}: {dead} of its {n} cables are missing or down while its switches answer"
                   + (f"; the host side is {', '.join(hcas)} on most hosts" if hcas else ""))
        fix = (f"check what the {label} links share: the {'/'.join(hcas) or 'rail'} HCAs on the hosts (driver, "
               "firmware, 'ibstat'), a cable bundle or patch panel, before each cable")
    return Finding(kind=f"{scope.kind}_down", severity="error", message=message, fix=fix,
                   where=manifest.source, endpoints=names,
                   data={"root": label, scope.kind: scope.name, "devices": names, "planned": n, "dead": dead})


def arrange(findings: list[Finding]) -> list[Finding]:
    """Roots first, each followed by what it explains (recursively); the rest keep their order."""
    children: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        cause = f.data.get("cause")
        if cause:
            children[cause].append(f)
    out: list[Finding] = []

    def emit(f: Finding) -> None:
        out.append(f)
        for child in children.get(f.data.get("root", ""), []):
            emit(child)

    for f in findings:
        if not f.data.get("cause"):
            emit(f)
    return out
