"""A technician's work list: the fixes grouped by the rack where the work happens."""

from __future__ import annotations

from collections import defaultdict

from cabling.findings import Finding, Report
from cabling.model import Manifest
from cabling.ports import natural_key


def _work_device(f: Finding, manifest: Manifest) -> str | None:
    """The device a technician walks to: where the cable end is now, or the switch end."""
    devices = manifest.device_map()
    if f.kind == "moved":
        return str(f.data["from"]).rpartition(":")[0]
    if f.kind == "swapped":
        return str(f.data["ports"][0]).rpartition(":")[0]
    names = [e.rpartition(":")[0] or e for e in f.endpoints]
    known = [n for n in names if n.casefold() in devices]
    switches = [n for n in known if devices[n.casefold()].kind == "switch"]
    pick = switches or known or names
    return pick[0] if pick else None


def render_worklist(report: Report, manifest: Manifest) -> str:
    """Plain text, one checkbox per fix, racks in order; findings with no rack come last."""
    devices = manifest.device_map()
    by_rack: dict[str, list[tuple[str, Finding]]] = defaultdict(list)
    for f in report.findings:
        dev = _work_device(f, manifest)
        d = devices.get(dev.casefold()) if dev else None
        rack = d.location.rack if d is not None and d.location and d.location.rack else "no rack"
        by_rack[rack or "no rack"].append((dev or "", f))
    lines = [f"Work list: {report.title}", f"{len(report.findings)} task(s) in {len(by_rack)} rack(s)", ""]
    for rack in sorted(by_rack, key=lambda r: (r == "no rack", natural_key(r))):
        tasks = sorted(by_rack[rack], key=lambda t: (natural_key(t[0]), t[1].kind))
        lines.append(f"rack {rack} ({len(tasks)})")
        for dev, f in tasks:
            d = devices.get(dev.casefold()) if dev else None
            u = f" (U{d.location.u})" if d is not None and d.location and d.location.u else ""
            lines.append(f"  [ ] {dev or '-'}{u}: {f.fix or f.message}")
        lines.append("")
    return "\n".join(lines)
