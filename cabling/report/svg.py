"""An SVG (or HTML) picture of the fabric by tier, with faulty links and devices in red."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from collections import defaultdict

from cabling.findings import Report
from cabling.model import Device, Manifest

_TIER_NAMES = {3: "core", 2: "spine", 1: "leaf", 0: "hosts"}
_COLORS = {"moved": "#1f77b4", "swapped": "#9467bd", "missing": "#d62728", "down": "#8c564b",
           "unexpected": "#ff7f0e", "degraded_speed": "#e377c2", "degraded_width": "#bcbd22"}


_FONT = {"font-family": "sans-serif", "font-size": "13"}
_SMALL = {"font-family": "sans-serif", "font-size": "10"}


def _device_of(endpoint: str) -> str:
    return endpoint.rpartition(":")[0] or endpoint


def render_svg(manifest: Manifest, report: Report | None = None, max_healthy_links: int = 20000) -> str:
    """SVG text: one row per tier; planned links grey, faulty links coloured, with tooltips."""
    from cabling.report.fabricmap import device_tiers

    tier_of = device_tiers(manifest)  # from roles, else by distance from the hosts
    tiers: dict[int, list[Device]] = defaultdict(list)
    for d in manifest.devices:
        tiers[tier_of.get(d.name.casefold(), d.tier)].append(d)
    for members in tiers.values():
        members.sort(key=lambda d: (d.group or "", d.rail if d.rail is not None else -1, d.name))
    step = 14
    width = max(900, max((len(m) for m in tiers.values()), default=1) * step + 200)
    top_tier = max(tiers, default=0)
    row_h = max(160, int(width / 8))  # keep wide fabrics from becoming a thin strip
    legend_y = 60 + top_tier * row_h + 70
    height = legend_y + 50
    pos: dict[str, tuple[float, float]] = {}
    for tier, members in tiers.items():
        y = 60 + (top_tier - tier) * row_h
        gap = (width - 200) / max(len(members), 1)
        for k, d in enumerate(members):
            pos[d.name.casefold()] = (150 + gap * (k + 0.5), y)

    svg = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", width=str(int(width)), height=str(height),
                     viewBox=f"0 0 {int(width)} {height}")
    ET.SubElement(svg, "title").text = f"fabric {manifest.fabric.name or ''}".strip()
    ET.SubElement(svg, "rect", x="0", y="0", width=str(int(width)), height=str(height), fill="white")
    for tier in tiers:
        y = 60 + (top_tier - tier) * row_h
        ET.SubElement(svg, "text", {"x": "10", "y": str(y + 4), **_FONT}).text = (
            f"{_TIER_NAMES.get(tier, tier)} ({len(tiers[tier])})")

    faulty_devices: dict[str, list[str]] = defaultdict(list)
    fault_lines: list[tuple[str, str, str, str, bool]] = []
    for f in report.findings if report else []:
        eps = f.endpoints
        devs = [_device_of(e).casefold() for e in eps]
        for name in devs:
            faulty_devices[name].append(f.message)
        if f.kind == "moved" and len(eps) == 3:
            fault_lines += [(devs[0], devs[1], f.kind, f"{f.message} - fix: {f.fix}", False),
                            (devs[0], devs[2], f.kind, f"should be: {f.fix}", True)]
        elif f.kind == "swapped" and len(eps) == 4:
            fault_lines += [(devs[0], devs[3], f.kind, f"{f.message} - fix: {f.fix}", False),
                            (devs[2], devs[1], f.kind, f"{f.message} - fix: {f.fix}", False)]
        elif len(devs) >= 2:
            fault_lines.append((devs[0], devs[1], f.kind, f"{f.message} - fix: {f.fix}",
                                f.kind in ("missing", "down")))

    healthy = ET.SubElement(svg, "g", {"class": "links", "stroke": "#bbbbbb", "stroke-width": "0.5",
                                       "opacity": "0.5"})
    drawn = 0
    for lk in manifest.links:
        if drawn >= max_healthy_links:
            break
        a, b = pos.get(lk.a.device.casefold()), pos.get(lk.b.device.casefold())
        if a and b:
            ET.SubElement(healthy, "line", x1=f"{a[0]:.1f}", y1=f"{a[1]:.1f}", x2=f"{b[0]:.1f}", y2=f"{b[1]:.1f}")
            drawn += 1
    faults = ET.SubElement(svg, "g", {"class": "faults", "stroke-width": "2.5"})
    seen_pairs: dict[frozenset[str], int] = defaultdict(int)
    for da, db, kind, text, dashed in fault_lines:
        a, b = pos.get(da), pos.get(db)
        nth = seen_pairs[frozenset((da, db))]
        seen_pairs[frozenset((da, db))] += 1
        if a and b and nth:  # several faults between the same two devices: fan them out
            a, b = (a[0] + 4 * nth, a[1]), (b[0] + 4 * nth, b[1])
        if not (a and b):
            a = a or b
            if not a:
                continue
            b = (a[0] + 25, a[1] + 40)  # an unplanned device: a stub below its known end
        attrs = {"class": f"fault {kind}", "data-kind": kind, "stroke": _COLORS.get(kind, "#d62728"),
                 "x1": f"{a[0]:.1f}", "y1": f"{a[1]:.1f}", "x2": f"{b[0]:.1f}", "y2": f"{b[1]:.1f}"}
        if dashed:
            attrs["stroke-dasharray"] = "6,4"
        line = ET.SubElement(faults, "line", attrs)
        ET.SubElement(line, "title").text = text
    nodes = ET.SubElement(svg, "g", {"class": "devices"})
    for tier, members in tiers.items():
        size = 5.0 if tier == 0 else 8.0
        for d in members:
            px, py = pos[d.name.casefold()]
            bad = faulty_devices.get(d.name.casefold())
            attrs = {"x": f"{px - size / 2:.1f}", "y": f"{py - size / 2:.1f}", "width": str(size),
                     "height": str(size), "fill": "#d62728" if bad else ("#1f77b4" if tier else "#2ca02c"),
                     "class": "device fault" if bad else "device", "data-name": d.name}
            rect = ET.SubElement(nodes, "rect", attrs)
            tip = d.name + (f" (rail {d.rail})" if d.rail is not None else "") + (f" [{d.group}]" if d.group else "")
            if bad:
                tip += "\n" + "\n".join(bad[:5])
            ET.SubElement(rect, "title").text = tip
    labels = ET.SubElement(svg, "g", {"class": "labels", **_SMALL})
    for tier, members in tiers.items():
        for k, d in enumerate(members):
            # Name every device of a small tier, and every faulty device.
            if len(members) > 48 and d.name.casefold() not in faulty_devices:
                continue
            px, py = pos[d.name.casefold()]
            below = tier == 0 or k % 2
            attrs = {"x": f"{px:.1f}", "y": f"{py + (16 if below else -9):.1f}", "text-anchor": "middle"}
            if d.name.casefold() in faulty_devices:
                attrs["fill"] = "#d62728"
            ET.SubElement(labels, "text", attrs).text = d.name
    n_faults = len(report.findings) if report else 0
    ET.SubElement(svg, "text", {"x": "10", "y": str(legend_y), **_FONT}).text = (
        f"{len(manifest.devices)} devices, {len(manifest.links)} links, {n_faults} finding(s); "
        "dashed = where a cable should be; hover for the fix")
    kinds = sorted({kind for _, _, kind, _, _ in fault_lines})
    legend = ET.SubElement(svg, "g", {"class": "legend", **_FONT})
    for k, kind in enumerate(kinds):
        x = 10 + k * 150
        ET.SubElement(legend, "line", {"x1": str(x), "y1": str(legend_y + 20), "x2": str(x + 30),
                                       "y2": str(legend_y + 20), "stroke": _COLORS.get(kind, "#d62728"),
                                       "stroke-width": "3"})
        ET.SubElement(legend, "text", {"x": str(x + 36), "y": str(legend_y + 24)}).text = kind
    return ET.tostring(svg, encoding="unicode")


def render_html(manifest: Manifest, report: Report | None = None) -> str:
    """A standalone HTML page: the static SVG picture plus the list of findings and fixes
    (the interactive map is :func:`cabling.report.fabricmap.render_map`)."""
    rows = "".join(
        f"<tr><td>{html.escape(f.severity)}</td><td>{html.escape(f.kind)}</td><td>{html.escape(f.message)}</td>"
        f"<td>{html.escape(f.fix)}</td></tr>" for f in (report.findings if report else []))
    title = html.escape(report.title if report else f"fabric {manifest.fabric.name or ''}")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" + title + "</title>"
        "<style>body{font-family:sans-serif}td{border-bottom:1px solid #ddd;padding:2px 6px}"
        ".pic{overflow:auto;border:1px solid #ccc}</style></head><body><h1>" + title + "</h1>"
        "<div class='pic'>" + render_svg(manifest, report) + "</div>"
        "<table><tr><th>severity</th><th>kind</th><th>problem</th><th>fix</th></tr>" + rows + "</table>"
        "</body></html>\n"
    )
