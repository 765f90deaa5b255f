"""BIOS and firmware baselines: what each host must have (the site file) against what its BMC
reports, for a whole rack in one pass."""

from __future__ import annotations

import fnmatch
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence

from provisioner.bmc.firmware_inventory import FirmwareComponent, scoped
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.inventory import Host, Site
from provisioner.inventory.spec import FirmwareRequirement
from provisioner.safetext import prom_label, xml_tree
from provisioner.state import StateStore
from provisioner.workflow.baseline_items import HostCompliance, Item, Status
from provisioner.workflow.bios_apply import last_not_applied
from provisioner.workflow.bios_baseline import bios_items
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.bulk import run_per_host

__all__ = ["HostCompliance", "Item", "Status", "check_bios", "check_firmware",
           "firmware_items", "matching", "render_junit", "render_metrics"]


def _matches(req: FirmwareRequirement, c: FirmwareComponent) -> bool:
    pattern = req.component.lower()
    return fnmatch.fnmatchcase(c.id.lower(), pattern) or fnmatch.fnmatchcase(c.name.lower(),
                                                                            pattern)


def matching(req: FirmwareRequirement,
             have: Sequence[FirmwareComponent]) -> list[FirmwareComponent]:
    """The installed components a requirement names."""
    # Dell lists each running image twice (Current-... and Installed-...): count it once.
    return list({(c.name, c.version, c.id.split("__")[-1]): c
                 for c in have if _matches(req, c)}.values())


def firmware_items(want: Sequence[FirmwareRequirement],
                   have: Sequence[FirmwareComponent]) -> list[Item]:
    """One item per component a requirement matches (or one 'missing' item)."""
    items = []
    for req in want:
        wanted = " | ".join(req.allowed)
        found = matching(req, have)
        if not found:
            status = Status.MISSING if req.required else Status.OK
            hint = "no FirmwareInventory member matches this component (Id or Name glob)"
            items.append(Item("firmware", req.component, "-", wanted, status,
                              hint if req.required else ""))
            continue
        for c in found:
            ok = any(fnmatch.fnmatchcase(c.version, v) for v in req.allowed)
            hint = "" if ok else (
                f"provision firmware update brings it to {req.allowed[0]}" if req.image
                else "add `image: {url, sha256}` to the baseline to update it")
            name = c.id if c.name == c.id else f"{c.name} [{c.id}]"
            items.append(Item("firmware", name, c.version, wanted,
                              Status.OK if ok else Status.DRIFT, hint, entry=req.component,
                              label=stable_id(c.id)))
    return items


Reader = Callable[[RedfishBMC, Host], list[Item]]


def _check(site: Site, hosts: Sequence[Host], reader: Reader, *, max_parallel: int | None,
           opener: Callable[[Site, Host], RedfishBMC]) -> list[HostCompliance]:
    items: dict[str, list[Item]] = {}

    def op(bmc: RedfishBMC, host: Host) -> str:
        found = reader(bmc, host)
        items[host.name] = found
        return f"{sum(not i.compliant for i in found)} drifted"

    results = run_per_host(site, hosts, op, max_parallel=max_parallel, opener=opener)
    return [HostCompliance(r.host, items.get(r.host, []), r.reason, r.error, r.warnings)
            for r in results]


def check_bios(site: Site, hosts: Sequence[Host], *, max_parallel: int | None = None,
               store: StateStore | None = None,
               opener: Callable[[Site, Host], RedfishBMC] = open_bmc) -> list[HostCompliance]:
    """Each host's BIOS attributes against its baseline (hosts without one are not read);
    with the state ``store``, values an earlier apply's reset did not take are named so."""
    def reader(bmc: RedfishBMC, host: Host) -> list[Item]:
        state = bmc.bios.read_bios()
        bmc.warnings.extend(state.warnings)
        history = last_not_applied(store, host.name) if store is not None else None
        return bios_items(host.bios, state, bmc.vendor, history)

    return _check(site, [h for h in hosts if h.bios], reader, max_parallel=max_parallel,
                  opener=opener)


def check_firmware(site: Site, hosts: Sequence[Host], *, max_parallel: int | None = None,
                   opener: Callable[[Site, Host], RedfishBMC] = open_bmc
                   ) -> list[HostCompliance]:
    """Each host's firmware versions against its baseline (hosts without one are not read)."""
    def reader(bmc: RedfishBMC, host: Host) -> list[Item]:
        # On a blade BMC a host is judged on its own components and those its nodes share,
        # never on another node's.
        systems = [p.rstrip("/").rsplit("/", 1)[-1] for p in bmc.host_systems()]
        own, shared = scoped(bmc.firmware.firmware_components(),
                             bmc.system_path().rstrip("/").rsplit("/", 1)[-1], systems)
        return firmware_items(host.firmware, [*own, *shared])

    return _check(site, [h for h in hosts if h.firmware], reader, max_parallel=max_parallel,
                  opener=opener)


# iDRAC's member Ids carry the version ("Installed-0-20.31.10.14__InfiniBand.Slot.7-1"):
# keep the role and the component, so a series keeps its name across an update.
_DELL_ID = re.compile(r"^(Current|Installed|Previous)-[^_]*__(.+)$")
# Supermicro suffixes attribute names with a code that changes between BIOS releases.
_RELEASE_SUFFIX = re.compile(r"_[0-9A-Fa-f]{4}$")


def stable_id(ident: str) -> str:
    """A FirmwareInventory Id without the version some BMCs write into it."""
    found = _DELL_ID.match(ident)
    return f"{found.group(1)}:{found.group(2)}" if found else ident


def _item_label(item: Item) -> str:
    if item.label:
        return item.label
    if item.kind == "bios" and item.entry and item.entry != item.name:
        return f"{item.entry}/{_RELEASE_SUFFIX.sub('', item.name)}"
    return item.name


def render_metrics(kind: str, reports: Sequence[HostCompliance]) -> str:
    """Prometheus text exposition (node_exporter textfile collector) of a baseline check.

    Every host has a series whether its BMC was read or not (an unread host is
    ``..._readable 0`` and not compliant, so an alert on non-compliance fires for it), and
    labels hold nothing that an update changes (no versions, MACs or verdicts)."""
    lines = [
        f"# HELP provisioner_{kind}_readable 1 when the host's BMC was read.",
        f"# TYPE provisioner_{kind}_readable gauge",
    ]
    lines += [f'provisioner_{kind}_readable{{host="{prom_label(r.host)}"}} {int(r.read)}'
              for r in reports]
    lines += [
        f"# HELP provisioner_{kind}_compliant 1 when the host meets its {kind} baseline "
        "(0 when it could not be read).",
        f"# TYPE provisioner_{kind}_compliant gauge",
    ]
    lines += [f'provisioner_{kind}_compliant{{host="{prom_label(r.host)}"}} {int(r.compliant)}'
              for r in reports]
    lines += [
        f"# HELP provisioner_{kind}_item_compliant 1 when one baseline entry is met.",
        f"# TYPE provisioner_{kind}_item_compliant gauge",
    ]
    for rep in reports:
        met: dict[tuple[str, str], bool] = {}
        for i in rep.items:  # one series per entry and item, met only if every verdict is
            key = (i.entry or i.name, _item_label(i))
            met[key] = met.get(key, True) and i.compliant
        for (entry, item), ok in met.items():
            lines.append(
                f'provisioner_{kind}_item_compliant{{host="{prom_label(rep.host)}",'
                f'entry="{prom_label(entry)}",item="{prom_label(item)}"}} {int(ok)}')
    return "\n".join(lines) + "\n"


def render_junit(kind: str, reports: Sequence[HostCompliance]) -> str:
    """JUnit XML: a suite per host, a case per baseline entry; an unread host is an error."""
    root = ET.Element("testsuites", name=f"provision {kind} check")
    for rep in reports:
        suite = ET.SubElement(root, "testsuite", name=rep.host, tests=str(len(rep.items) or 1),
                              failures=str(len(rep.drifted)), errors=str(int(not rep.read)))
        if not rep.read:
            case = ET.SubElement(suite, "testcase", classname=rep.host, name=f"{kind}.read")
            ET.SubElement(case, "error", message=rep.reason or "").text = rep.error or ""
        for i in rep.items:
            case = ET.SubElement(suite, "testcase", classname=rep.host, name=f"{kind}.{i.name}")
            if not i.compliant:
                ET.SubElement(case, "failure", message=f"{i.status}: have {i.have}, want "
                              f"{i.want}", type=i.status.value).text = i.hint
    ET.indent(xml_tree(root))  # BMC values (names, versions, BIOS values) keep it parseable
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
