"""A technician's work list: the fixes grouped by the rack where the work happens, root causes
(a dark plane, rail, switch or host) first with the cables they explain under them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from cabling.findings import Finding, Report
from cabling.model import Device, Manifest
from cabling.ports import natural_key

_GROUP_ROOTS = ("plane_down", "rail_down")


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
    """Plain text, one checkbox per fix, racks in order; findings with no rack come last. A root
    cause is one checkbox, its cables listed under it to check once it is fixed."""
    devices = manifest.device_map()
    children: dict[str, list[Finding]] = defaultdict(list)
    for f in report.findings:
        if f.data.get("cause"):
            children[f.data["cause"]].append(f)
    fabric_wide = [f for f in report.findings if f.kind in _GROUP_ROOTS and not f.data.get("cause")]
    by_rack: dict[str, list[tuple[str, Finding]]] = defaultdict(list)
    for f in report.findings:
        if f.data.get("cause") or f in fabric_wide:
            continue
        dev = _work_device(f, manifest)
        d = devices.get(dev.casefold()) if dev else None
        rack = d.location.rack if d is not None and d.location and d.location.rack else "no rack"
        by_rack[rack or "no rack"].append((dev or "", f))
    tasks = len(fabric_wide) + sum(len(t) for t in by_rack.values())
    racks = len(by_rack)
    lines = [f"Work list: {report.title}", f"{tasks} task(s) in {racks} rack(s)", ""]
    if fabric_wide:
        lines.append(f"whole fabric, first ({len(fabric_wide)})")
        for f in fabric_wide:
            lines.append(f"  [ ] {f.fix or f.message}")
            lines += _under(f, children, devices, "      ")
        lines.append("")
    for rack in sorted(by_rack, key=lambda r: (r == "no rack", natural_key(r))):
        rack_tasks = sorted(by_rack[rack], key=lambda t: (t[1].kind not in ("device_down",), natural_key(t[0]),
                                                          t[1].kind))
        lines.append(f"rack {rack} ({len(rack_tasks)})")
        for dev, f in rack_tasks:
            lines.append(f"  [ ] {dev or '-'}{_unit(devices, dev)}: {f.fix or f.message}")
            lines += _under(f, children, devices, "      ")
        lines.append("")
    return "\n".join(lines)


def _unit(devices: Mapping[str, Device], dev: str) -> str:
    d = devices.get(dev.casefold()) if dev else None
    return f" (U{d.location.u})" if d is not None and d.location and d.location.u else ""


def _under(root: Finding, children: dict[str, list[Finding]], devices: Mapping[str, Device],
           indent: str) -> list[str]:
    """What a root cause explains, indented under it: its switches, then its cables."""
    kids = children.get(root.data.get("root", ""), [])
    if not kids:
        return []
    out = [f"{indent}then check its {len(kids)} {'cable' if root.kind == 'device_down' else 'part'}(s):"]
    for kid in kids:
        if kid.kind == "device_down":
            dev = kid.data["device"]
            out.append(f"{indent}- {dev}{_unit(devices, dev)}: {kid.fix}")
            out += _under(kid, children, devices, indent + "    ")
        else:
            out.append(f"{indent}- {kid.fix or kid.message}")
    return out
