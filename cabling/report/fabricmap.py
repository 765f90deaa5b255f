"""The fabric map for people: one self-contained HTML page (inline CSS and JS, no network).

Devices sit in tiers (from roles, else by distance from the hosts, as Slurm's topology does), in
groups (scalable unit / pod / rack as the manifest says, else devices wired to the same groups
below), rails ordered inside each group; links are drawn once per pair of groups with their count.
Faulty devices and cables are red; the page zooms, pans, searches hosts, switches and GUIDs, and
shows the cable of a finding when it is clicked.
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections import Counter, defaultdict
from typing import Any

from cabling.findings import Report
from cabling.model import Device, Manifest
from cabling.ports import natural_key
from cabling.report import fabricmap_assets
from cabling.slurm import hostlist_compress, switch_tiers

_CELL = 11  # one device square and its gap, in map units
_PAD = 8
_LABEL = 16
_ROW_GAP = 150
_GROUP_GAP = 18
_MAX_COLS = {0: 8, 1: 8}  # hosts and leaves wrap at 8 a row (leaves: one row per SU's rails)
_TIER_NAMES = {0: "hosts", 1: "leaf", 2: "spine", 3: "core"}


def device_tiers(manifest: Manifest) -> dict[str, int]:
    """Tier of every device by case-folded name: hosts 0, switches from roles or from the topology."""
    tiers = {k: 0 for k, d in manifest.device_map().items() if d.kind == "host"}
    derived = switch_tiers(manifest)
    for k, d in manifest.device_map().items():
        if d.kind == "switch":
            tiers[k] = derived.get(k, d.tier if d.role else 1)
    return tiers


def _groups(manifest: Manifest, tiers: dict[str, int]) -> dict[str, str]:
    """Group name of every device: its manifest group, else one unit per set of devices that share a
    neighbour group one tier down (hosts: share a leaf), so an imported fabric still falls into
    units; a unit over 64 devices is cut in runs of names."""
    devices = manifest.device_map()
    nbrs: dict[str, set[str]] = defaultdict(set)
    for lk in manifest.links:
        a, b = lk.a.device.casefold(), lk.b.device.casefold()
        if a in devices and b in devices and a != b:
            nbrs[a].add(b)
            nbrs[b].add(a)
    group: dict[str, str] = {}
    top = max(tiers.values(), default=0)
    for tier in range(top + 1):
        parent: dict[str, str] = {}
        root = functools.partial(_root, parent)
        for k in (k for k, t in tiers.items() if t == tier):
            d = devices[k]
            if d.group:
                group[k] = d.group
                continue
            # Devices meet at a shared neighbour below (hosts: at a shared leaf above).
            below = [f"n:{n}" for n in nbrs[k] if tiers.get(n) == 1] if tier == 0 else \
                [f"g:{group[n]}" for n in nbrs[k] if tiers.get(n) == tier - 1 and n in group]
            if not below:
                below = [f"r:{d.location.rack}"] if d.location and d.location.rack else ["none"]
            ra = root(f"d:{k}")
            for b in below:
                rb = root(b)
                if ra != rb:
                    parent[rb] = ra
        units: dict[str, list[str]] = defaultdict(list)
        for x in list(parent):
            if x.startswith("d:"):
                units[root(x)].append(x[2:])
        for ks in units.values():
            ks.sort(key=lambda k: natural_key(devices[k].name))
        runs = sorted(units.values(), key=lambda ks: natural_key(devices[ks[0]].name))
        if len(runs) > 48:
            # Wiring gives no units (each host on its own leaves): neighbours by name make up ~24.
            per = math.ceil(sum(len(ks) for ks in runs) / 24)
            merged: list[list[str]] = [[]]
            for ks in runs:
                if merged[-1] and len(merged[-1]) + len(ks) > per:
                    merged.append([])
                merged[-1].extend(ks)
            runs = merged
        for ks in runs:
            for i in range(0, len(ks), 64):
                run = ks[i:i + 64]
                names = [devices[k].name for k in run]
                label = hostlist_compress(names) if nbrs[run[0]] else "unconnected"
                if len(label) > 20:
                    label = _prefix_label(names)
                for k in run:
                    group[k] = label
    return group


def _root(parent: dict[str, str], x: str) -> str:
    """Union-find: the representative of ``x`` (path halving)."""
    parent.setdefault(x, x)
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _prefix_label(names: list[str]) -> str:
    """``sat11-0101-09*`` for a run of names sharing a prefix; first and last when they share none."""
    first, last = names[0], names[-1]
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    if n >= 4:
        return first[:n] + "*"
    return f"{first[:9]}..{last[:9]}"


def _device_of(endpoint: str) -> str:
    return (endpoint.rpartition(":")[0] or endpoint).casefold()


def map_data(manifest: Manifest, report: Report | None = None,
             seen_guids: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The laid-out map: devices, groups, aggregated group links, every cable and the findings.
    ``seen_guids`` (device name -> GUIDs discovery found for it) makes those searchable too."""
    seen_guids = {k.casefold(): v for k, v in (seen_guids or {}).items()}
    devices = manifest.device_map()
    tiers = device_tiers(manifest)
    group_of = _groups(manifest, tiers)
    faults: Counter[str] = Counter()
    for f in report.findings if report else []:
        for e in f.endpoints:
            faults[_device_of(e)] += 1
    # Groups per tier, ordered bottom-up by where the groups below them sit (fewer crossings).
    members: dict[tuple[int, str], list[str]] = defaultdict(list)
    for k, t in tiers.items():
        members[(t, group_of[k])].append(k)
    for ks in members.values():
        ks.sort(key=lambda k: (devices[k].rail if devices[k].rail is not None else -1, natural_key(devices[k].name)))
    adj: dict[tuple[int, str], Counter[tuple[int, str]]] = defaultdict(Counter)
    for lk in manifest.links:
        a, b = lk.a.device.casefold(), lk.b.device.casefold()
        if a in tiers and b in tiers:
            ga, gb = (tiers[a], group_of[a]), (tiers[b], group_of[b])
            adj[ga][gb] += 1
            adj[gb][ga] += 1
    top = max(tiers.values(), default=0)
    size: dict[tuple[int, str], tuple[int, int, int]] = {}
    for key, ks in members.items():
        cols = min(len(ks), _MAX_COLS.get(key[0], 16))
        rows = math.ceil(len(ks) / cols)
        size[key] = (cols, rows, max(cols * _CELL + 2 * _PAD, 90))
    rows_of: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for key in members:
        rows_of[key[0]].append(key)
    center: dict[tuple[int, str], float] = {}
    order: dict[int, list[tuple[int, str]]] = {}
    for tier in range(top + 1):
        row = rows_of.get(tier, [])
        if tier == 0 or not center:
            row.sort(key=lambda g: natural_key(g[1]))
        else:
            def bary(g: tuple[int, str]) -> tuple[float, tuple[object, ...]]:
                below = [(center[o], n) for o, n in adj[g].items() if o in center and o[0] < g[0]]
                total = sum(n for _, n in below)
                return (sum(x * n for x, n in below) / total if total else 1e9, natural_key(g[1]))
            row.sort(key=bary)
        x = 0.0
        for g in row:
            center[g] = x + size[g][2] / 2
            x += size[g][2] + _GROUP_GAP
        order[tier] = row
    width = max((sum(size[g][2] + _GROUP_GAP for g in row) for row in order.values()), default=0.0)
    tallest = {t: max((size[g][1] for g in row), default=1) for t, row in order.items()}
    # Rows spread so that the whole map has about a screen's shape: wide fabrics get taller gaps.
    heights = [tallest.get(t, 1) * _CELL + _LABEL + 2 * _PAD for t in range(top + 1)]
    gap = max(_ROW_GAP, (width * 0.5 - sum(heights)) / top) if top else _ROW_GAP
    y_of: dict[int, float] = {}
    y = 40.0
    for tier in range(top, -1, -1):
        y_of[tier] = y
        y += heights[tier] + gap
    group_rows: list[list[Any]] = []
    group_index: dict[tuple[int, str], int] = {}
    dev_rows: list[list[Any]] = []
    dev_index: dict[str, int] = {}
    for tier in range(top, -1, -1):
        row = order.get(tier, [])
        used = sum(size[g][2] + _GROUP_GAP for g in row)
        x = (width - used) / 2
        for g in row:
            cols, nrows, w = size[g]
            h = nrows * _CELL + 2 * _PAD + _LABEL
            gy = y_of[tier]
            bad = sum(1 for k in members[g] if faults[k])
            group_index[g] = len(group_rows)
            group_rows.append([g[1], tier, round(x, 1), round(gy, 1), w, h, len(members[g]), bad])
            x0 = x + (w - cols * _CELL) / 2
            for i, k in enumerate(members[g]):
                d = devices[k]
                dev_index[k] = len(dev_rows)
                dev_rows.append([
                    d.name, tier, group_index[g],
                    round(x0 + (i % cols) * _CELL + _CELL / 2, 1), round(gy + _LABEL + _PAD + (i // cols) * _CELL + _CELL / 2, 1),
                    faults[k], _guids(d, seen_guids.get(k, [])), d.rail, d.location.rack if d.location else None, d.role or d.kind,
                ])
            x += w + _GROUP_GAP
    edges: Counter[tuple[int, int]] = Counter()
    links: list[list[Any]] = []
    for lk in manifest.links:
        a, b = lk.a.device.casefold(), lk.b.device.casefold()
        ia, ib = dev_index.get(a, -1), dev_index.get(b, -1)
        links.append([ia, lk.a.port, ib, lk.b.port, lk.cable or ""])
        if ia >= 0 and ib >= 0:
            pair = tuple(sorted((dev_rows[ia][2], dev_rows[ib][2])))
            edges[(pair[0], pair[1])] += 1
    shown = report.findings if report else []
    # A root cause's index, for the findings it explains (their cables show when it is clicked).
    root_at = {f.data["root"]: i for i, f in enumerate(shown) if f.data.get("root")}
    findings = [[f.kind, f.severity, f.message, f.fix, f.where,
                 [[dev_index.get(_device_of(e), -1), e] for e in f.endpoints],
                 root_at.get(f.data.get("cause", ""), -1)]
                for f in shown]
    return {
        "title": report.title if report else f"fabric {manifest.fabric.name or manifest.source}",
        "tiers": {str(t): _TIER_NAMES.get(t, f"tier {t}") for t in range(top + 1)},
        "devices": dev_rows, "groups": group_rows,
        "edges": [[a, b, n] for (a, b), n in sorted(edges.items())],
        "links": links, "findings": findings,
        "size": [round(width, 1), round(y, 1)],
    }


def _guids(d: Device, seen: list[str]) -> str:
    return " ".join(dict.fromkeys(g for g in [d.guid or "", *d.hca_guids.values(), *seen] if g))


def render_map(manifest: Manifest, report: Report | None = None,
               seen_guids: dict[str, list[str]] | None = None) -> str:
    """The whole HTML page; open it in any browser, offline."""
    data = map_data(manifest, report, seen_guids)
    script, style = fabricmap_assets.JS, fabricmap_assets.CSS
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    title = html.escape(data["title"])
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width'><title>{title}</title><style>{style}</style></head>"
        f"<body><header><h1>{title}</h1><div id='summary'></div>"
        "<form id='find'><input id='q' type='search' placeholder='host, switch or GUID' aria-label='search'>"
        "<button>find</button><button type='button' id='fit'>fit</button>"
        "<button type='button' id='zin'>+</button><button type='button' id='zout'>&minus;</button></form></header>"
        "<main><svg id='map' xmlns='http://www.w3.org/2000/svg'></svg><aside id='info'>"
        "<p>Scroll to zoom, drag to pan. Red: a device or cable with a finding. Lines between groups carry "
        "their cable count. Click a finding to see its cable.</p></aside></main>"
        "<section><h2>Findings</h2><table id='findings'><thead><tr><th>#</th><th>severity</th><th>kind</th>"
        "<th>problem</th><th>fix</th><th>where</th></tr></thead><tbody></tbody></table></section>"
        f"<script id='data' type='application/json'>{payload}</script><script>{script}</script></body></html>\n"
    )
