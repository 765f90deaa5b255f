"""BIOS and firmware baselines: what each host must have (the site file) against what its BMC
reports, for a whole rack in one pass."""

from __future__ import annotations

import difflib
import fnmatch
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from provisioner.bmc.bios import BiosState, read_bios
from provisioner.bmc.bulk import run_on_hosts
from provisioner.bmc.factory import open_bmc
from provisioner.bmc.firmware_inventory import FirmwareComponent, read_components
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.inventory import Host, Site
from provisioner.inventory.spec import BiosValue, FirmwareRequirement


class Status(StrEnum):
    """How one baseline item compares with the host."""

    OK = "ok"
    DRIFT = "drift"  # the host runs another value/version
    PENDING = "pending"  # set, applied at the next reset
    MISSING = "missing"  # the component is not listed by the BMC
    UNKNOWN = "unknown"  # the firmware has no such attribute
    INVALID = "invalid"  # the wanted value is not one the firmware accepts
    READ_ONLY = "read-only"  # the attribute cannot be set over Redfish


@dataclass(frozen=True)
class Item:
    """One baseline entry on one host: what it has, what it should have."""

    kind: str  # "bios" or "firmware"
    name: str
    have: str
    want: str
    status: Status
    hint: str = ""

    @property
    def compliant(self) -> bool:
        """Whether the host meets this entry now."""
        return self.status is Status.OK


@dataclass
class HostCompliance:
    """A host's baseline report, or why it could not be read."""

    host: str
    items: list[Item] = field(default_factory=list)
    reason: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def read(self) -> bool:
        """Whether the BMC was read."""
        return self.reason is None

    @property
    def compliant(self) -> bool:
        """Read, and every entry met."""
        return self.read and all(i.compliant for i in self.items)

    @property
    def drifted(self) -> list[Item]:
        """The entries not met."""
        return [i for i in self.items if not i.compliant]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _same(want: BiosValue, have: Any) -> bool:
    # BMCs report booleans as JSON booleans or as "True"/"Enabled"-like strings; numbers may
    # come back as strings. Compare the printed forms, exactly otherwise.
    return _text(want) == _text(have) or (
        isinstance(want, bool) and _text(have).lower() == _text(want))


def _suggest(name: str, names: Sequence[str]) -> str:
    # Supermicro suffixes attribute names with a code that changes between BIOS releases
    # (Above4GDecoding_0041): a prefix match is the likeliest intent.
    prefixed = [n for n in names if n.lower().startswith(name.lower() + "_")]
    close = prefixed or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else \
        "the BMC's attribute registry lists the names this firmware accepts"


def bios_items(want: dict[str, BiosValue], state: BiosState) -> list[Item]:
    """One item per wanted attribute, judged against current, pending and registry."""
    items = []
    names = state.names()
    for name, value in want.items():
        wanted = _text(value)
        if not state.known(name):
            items.append(Item("bios", name, "-", wanted, Status.UNKNOWN, _suggest(name, names)))
            continue
        info = (state.registry or {}).get(name)
        have = state.attributes.get(name)
        if info and info.values and wanted not in info.values:
            items.append(Item("bios", name, _text(have), wanted, Status.INVALID,
                              f"allowed: {', '.join(info.values)}"))
        elif _same(value, have):
            items.append(Item("bios", name, _text(have), wanted, Status.OK))
        elif info and info.read_only:
            items.append(Item("bios", name, _text(have), wanted, Status.READ_ONLY,
                              "the firmware marks it read-only: set it in the BIOS setup or "
                              "with the vendor's tool"))
        elif name in state.pending and _same(value, state.pending[name]):
            items.append(Item("bios", name, _text(have), wanted, Status.PENDING,
                              "set; applied at the host's next reset"))
        else:
            items.append(Item("bios", name, _text(have), wanted, Status.DRIFT,
                              "provision bios apply sets it (one reset)"))
    return items


def _matches(req: FirmwareRequirement, c: FirmwareComponent) -> bool:
    pattern = req.component.lower()
    return fnmatch.fnmatchcase(c.id.lower(), pattern) or fnmatch.fnmatchcase(c.name.lower(),
                                                                            pattern)


def firmware_items(want: Sequence[FirmwareRequirement],
                   have: Sequence[FirmwareComponent]) -> list[Item]:
    """One item per component a requirement matches (or one 'missing' item)."""
    items = []
    for req in want:
        wanted = " | ".join(req.allowed)
        # Dell lists each running image twice (Current-... and Installed-...): judge it once.
        found = list({(c.name, c.version, c.id.split("__")[-1]): c
                      for c in have if _matches(req, c)}.values())
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
            label = c.id if c.name == c.id else f"{c.name} [{c.id}]"
            items.append(Item("firmware", label, c.version, wanted,
                              Status.OK if ok else Status.DRIFT, hint))
    return items


Reader = Callable[[RedfishBMC, Host], list[Item]]


def _check(site: Site, hosts: Sequence[Host], reader: Reader, *, max_parallel: int | None,
           opener: Callable[[Site, Host], RedfishBMC]) -> list[HostCompliance]:
    # run_on_hosts hands an operation only the BMC: remember which host each one belongs to.
    owner: dict[int, Host] = {}
    items: dict[str, list[Item]] = {}

    def open_(s: Site, host: Host) -> RedfishBMC:
        bmc = opener(s, host)
        owner[id(bmc)] = host
        return bmc

    def op(bmc: RedfishBMC) -> str:
        host = owner[id(bmc)]
        found = reader(bmc, host)
        items[host.name] = found
        return f"{sum(not i.compliant for i in found)} drifted"

    results = run_on_hosts(site, hosts, op, max_parallel=max_parallel, opener=open_)
    return [HostCompliance(r.host, items.get(r.host, []), r.reason, r.error, r.warnings)
            for r in results]


def check_bios(site: Site, hosts: Sequence[Host], *, max_parallel: int | None = None,
               opener: Callable[[Site, Host], RedfishBMC] = open_bmc) -> list[HostCompliance]:
    """Each host's BIOS attributes against its baseline (hosts without one are not read)."""
    def reader(bmc: RedfishBMC, host: Host) -> list[Item]:
        state = read_bios(bmc)
        bmc.warnings.extend(state.warnings)
        return bios_items(host.bios, state)

    return _check(site, [h for h in hosts if h.bios], reader, max_parallel=max_parallel,
                  opener=opener)


def check_firmware(site: Site, hosts: Sequence[Host], *, max_parallel: int | None = None,
                   opener: Callable[[Site, Host], RedfishBMC] = open_bmc
                   ) -> list[HostCompliance]:
    """Each host's firmware versions against its baseline (hosts without one are not read)."""
    def reader(bmc: RedfishBMC, host: Host) -> list[Item]:
        return firmware_items(host.firmware, read_components(bmc))

    return _check(site, [h for h in hosts if h.firmware], reader, max_parallel=max_parallel,
                  opener=opener)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_metrics(kind: str, reports: Sequence[HostCompliance]) -> str:
    """Prometheus text exposition (node_exporter textfile collector) of a baseline check."""
    lines = [
        f"# HELP provisioner_{kind}_compliant 1 when the host meets its {kind} baseline.",
        f"# TYPE provisioner_{kind}_compliant gauge",
    ]
    for rep in reports:
        if rep.read:
            lines.append(f'provisioner_{kind}_compliant{{host="{_label(rep.host)}"}} '
                         f"{int(rep.compliant)}")
    lines += [
        f"# HELP provisioner_{kind}_item_compliant 1 when one baseline entry is met.",
        f"# TYPE provisioner_{kind}_item_compliant gauge",
    ]
    for rep in reports:
        for i in rep.items:
            lines.append(
                f'provisioner_{kind}_item_compliant{{host="{_label(rep.host)}",'
                f'item="{_label(i.name)}",status="{i.status.value}"}} {int(i.compliant)}')
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
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
