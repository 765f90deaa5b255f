"""Slurm ``topology.conf`` (topology/tree plugin) from a manifest, and Slurm hostlist syntax.

Leaves that serve the same hosts (the rails of one scalable unit) are one Slurm "switch": a job
placed under it shares leaves on every rail. Upper tiers list the units or switches below them.
"""

from __future__ import annotations

import re
from collections import defaultdict

from cabling.errors import CablingInputError
from cabling.model import Device, Manifest
from cabling.ports import natural_key

_TAIL = re.compile(r"^(.*?)(\d+)$")
# Slurm splits topology.conf on whitespace and '=', lists on ',', expands '[..]', and '#' starts
# a comment: a name holding one of these would be read as another name or another key.
_SLURM_UNSAFE = re.compile(r"[\s=,#\[\]\"'\\]")


def hostlist_compress(names: list[str]) -> str:
    """``gpu001,gpu002,gpu003,gpu005`` -> ``gpu[001-003,005]`` (zero padding kept)."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    plain: list[str] = []
    split: list[tuple[str, str]] = []
    padded: dict[str, int] = {}
    for name in names:
        m = _TAIL.match(name)
        if not m:
            plain.append(name)
            continue
        split.append((m.group(1), m.group(2)))
        if m.group(2).startswith("0") and len(m.group(2)) > 1:
            padded[m.group(1)] = max(padded.get(m.group(1), 0), len(m.group(2)))
    for prefix, digits in split:
        # gpu099 and gpu100 share a width of 3: one zero-padded range, as Slurm writes it.
        width = padded.get(prefix, 0)
        groups[(prefix, width if len(digits) == width else 0)].append(int(digits))
    parts: list[str] = []
    for (prefix, width), nums in groups.items():
        nums = sorted(set(nums))
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        ranges: list[str] = []
        start = prev = nums[0]
        for n in [*nums[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(sorted(plain) + sorted(parts, key=natural_key))


def hostlist_expand(text: str) -> list[str]:
    """``gpu[001-003],x`` -> ``[gpu001, gpu002, gpu003, x]``; raises ValueError on bad syntax."""
    out: list[str] = []
    for item in _split_top(text):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\]", item)
        if not m:
            if "[" in item or "]" in item or not item:
                raise ValueError(f"bad hostlist item {item!r}")
            out.append(item)
            continue
        for rng in m.group(2).split(","):
            lo, _, hi = rng.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"bad hostlist range {rng!r} in {item!r}")
            width = len(lo) if lo.startswith("0") else 0
            out += [f"{m.group(1)}{n:0{width}d}" for n in range(int(lo), int(hi or lo) + 1)]
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise ValueError(f"bad hostlist {text!r}: unbalanced brackets")
        cur += ch
    if depth:
        raise ValueError(f"bad hostlist {text!r}: unbalanced brackets")
    return [*items, cur] if cur or items else []


def switch_tiers(manifest: Manifest) -> dict[str, int]:
    """Tier of every switch (1 = leaf): from roles, else by distance from the hosts."""
    devices = manifest.device_map()
    adj: dict[str, set[str]] = defaultdict(set)
    for lk in manifest.links:
        a, b = lk.a.device.casefold(), lk.b.device.casefold()
        adj[a].add(b)
        adj[b].add(a)
    switches = [k for k, d in devices.items() if d.kind == "switch"]
    if switches and all(devices[k].role for k in switches):
        return {k: devices[k].tier for k in switches}
    tiers: dict[str, int] = {}
    frontier = [k for k in switches if any(devices.get(n) and devices[n].kind == "host" for n in adj[k])]
    level = 1
    while frontier:
        for k in frontier:
            tiers[k] = level
        level += 1
        frontier = sorted({n for k in frontier for n in adj[k]
                           if n in devices and devices[n].kind == "switch" and n not in tiers})
    return tiers


def slurm_topology(manifest: Manifest) -> str:
    """The ``topology.conf`` text: leaf units with their nodes, then each upper switch's children."""
    devices = manifest.device_map()
    tiers = switch_tiers(manifest)
    if not tiers:
        raise CablingInputError("the manifest has no switch connected to a host: no topology to write")
    hosts_of: dict[str, set[str]] = defaultdict(set)
    below: dict[str, set[str]] = defaultdict(set)
    for lk in manifest.links:
        a, b = lk.a.device.casefold(), lk.b.device.casefold()
        if a not in devices or b not in devices:
            continue
        for x, y in ((a, b), (b, a)):
            if x in tiers and devices[y].kind == "host":
                hosts_of[x].add(devices[y].name)
            elif x in tiers and y in tiers and tiers[y] < tiers[x]:
                below[x].add(y)
    # Leaves serving exactly the same hosts (one SU's rails) form one unit.
    unit_of: dict[str, str] = {}
    members: dict[frozenset[str], list[str]] = defaultdict(list)
    for leaf in (k for k, t in tiers.items() if t == 1):
        members[frozenset(hosts_of[leaf])].append(leaf)
    _check_names(manifest, [devices[k] for k in tiers] + [d for d in devices.values() if d.kind == "host"])
    lines = ["# Slurm topology.conf written by 'provision cabling slurm-topology'", "# TopologyPlugin=topology/tree"]
    used: set[str] = set()
    for hosts, leaves in sorted(members.items(), key=lambda kv: natural_key(min(kv[1]))):
        groups = {devices[k].group for k in leaves}
        if len(groups) == 1 and None not in groups:
            _check_name(manifest, str(next(iter(groups))), f"group of {devices[leaves[0]].name}",
                        devices[leaves[0]].name)
        if len(leaves) == 1:
            unit = devices[leaves[0]].name
        elif len(groups) == 1 and None not in groups and str(next(iter(groups))) not in used:
            unit = str(groups.pop())
        else:
            unit = "+".join(sorted((devices[k].name for k in leaves), key=natural_key))
        used.add(unit)
        for k in leaves:
            unit_of[k] = unit
        lines.append(f"SwitchName={unit} Nodes={hostlist_compress(sorted(hosts))}")
    for sw in sorted((k for k, t in tiers.items() if t > 1), key=lambda k: (tiers[k], natural_key(k))):
        children = sorted({unit_of.get(c, devices[c].name) for c in below[sw]}, key=natural_key)
        if children:
            lines.append(f"SwitchName={devices[sw].name} Switches={','.join(children)}")
    return "\n".join(lines) + "\n"


def _check_names(manifest: Manifest, devices: list[Device]) -> None:
    for d in devices:
        _check_name(manifest, d.name, d.kind, d.name)


def _check_name(manifest: Manifest, name: str, what: str, device: str) -> None:
    """Refuse a name Slurm would misread rather than write a topology.conf it parses differently."""
    bad = _SLURM_UNSAFE.search(name)
    if bad:
        raise CablingInputError(
            f"{what} name {name!r} has {bad.group()!r}, which Slurm's topology.conf cannot hold",
            file=manifest.source, line=manifest.device_line(device),
            hint="rename it in the manifest (a switch whose description is not a name can be named "
                 "S-<guid>, or by 'provision cabling name-switches')",
        )
