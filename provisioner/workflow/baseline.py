"""BIOS and firmware baselines: what each host must have (the site file) against what its BMC
reports, for a whole rack in one pass."""

from __future__ import annotations

import difflib
import fnmatch
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from provisioner.bmc.base import PowerAction, PowerState
from provisioner.bmc.bios import BiosState, read_bios, same_value, stage_bios, text_value, unapplied
from provisioner.bmc.firmware_inventory import FirmwareComponent, read_components
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.exceptions import InputError
from provisioner.inventory import Host, Site
from provisioner.inventory.spec import BiosValue, FirmwareRequirement
from provisioner.redfish.errors import BMCVerifyFailed
from provisioner.state import StateStore
from provisioner.workflow.bmc_access import open_bmc
from provisioner.workflow.bulk import ActionResult, run_per_host
from provisioner.workflow.selection import spare_serving


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
        wanted = text_value(value)
        if not state.known(name):
            items.append(Item("bios", name, "-", wanted, Status.UNKNOWN, _suggest(name, names)))
            continue
        info = (state.registry or {}).get(name)
        have = state.attributes.get(name)
        if info and info.values and wanted not in info.values:
            items.append(Item("bios", name, text_value(have), wanted, Status.INVALID,
                              f"allowed: {', '.join(info.values)}"))
        elif same_value(value, have):
            items.append(Item("bios", name, text_value(have), wanted, Status.OK))
        elif info and info.read_only:
            items.append(Item("bios", name, text_value(have), wanted, Status.READ_ONLY,
                              "the firmware marks it read-only: set it in the BIOS setup or "
                              "with the vendor's tool"))
        elif name in state.pending and same_value(value, state.pending[name]):
            items.append(Item("bios", name, text_value(have), wanted, Status.PENDING,
                              "set; applied at the host's next reset"))
        else:
            items.append(Item("bios", name, text_value(have), wanted, Status.DRIFT,
                              "provision bios apply sets it (one reset)"))
    return items


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
            label = c.id if c.name == c.id else f"{c.name} [{c.id}]"
            items.append(Item("firmware", label, c.version, wanted,
                              Status.OK if ok else Status.DRIFT, hint))
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


# -- apply -----------------------------------------------------------------------------------

# Entries that cannot be applied as written: refused before anything is sent to the BMC.
REFUSED = (Status.UNKNOWN, Status.INVALID, Status.READ_ONLY)


class BaselineRefused(InputError):
    """A host's baseline names attributes or values its firmware does not accept."""

    reason = "baseline refused"


@dataclass(frozen=True)
class ApplyOptions:
    """How `bios apply` treats hosts: reset them or only stage, how long to wait."""

    reboot: bool = True
    force: bool = False  # also hosts that are serving (deployed, configured, validated)
    timeout_s: float = 900.0
    poll_s: float = 10.0


def _apply_one(bmc: RedfishBMC, host: Host, opts: ApplyOptions) -> str:
    state = read_bios(bmc)
    bmc.warnings.extend(state.warnings)
    items = bios_items(host.bios, state)
    bad = [i for i in items if i.status in REFUSED]
    if bad:
        raise BaselineRefused(
            "nothing sent: " + "; ".join(f"{i.name}={i.want} is {i.status.value}"
                                         + (f" ({i.hint})" if i.hint else "") for i in bad),
            hint="fix the baseline in the site file (`provision bios check` lists the names "
            "and values this firmware accepts)")
    changes = {i.name: host.bios[i.name] for i in items if i.status is Status.DRIFT}
    pending = [i.name for i in items if i.status is Status.PENDING]
    if not changes and not pending:
        return "nothing to change"
    job = stage_bios(bmc, state, changes) if changes else None
    wanted = {name: host.bios[name] for name in [*changes, *pending]}
    if not opts.reboot:
        return f"staged {', '.join(wanted)}: applied at the host's next reset"
    was_off = bmc.power_state() in (PowerState.OFF, PowerState.POWERING_OFF)
    bmc.power(PowerAction.ON if was_off else PowerAction.RESTART)
    wait_job = getattr(bmc, "wait_bios_job", None)
    if job and callable(wait_job):
        wait_job(job)
    _wait_applied(bmc, wanted, opts)
    if was_off:
        bmc.power(PowerAction.OFF)  # leave it as it was found
    return f"applied {', '.join(f'{k}={text_value(v)}' for k, v in wanted.items())}"


def _wait_applied(bmc: RedfishBMC, wanted: dict[str, BiosValue], opts: ApplyOptions) -> None:
    deadline = time.monotonic() + opts.timeout_s
    while True:
        still, notes = unapplied(bmc, wanted)
        if not still:
            return
        if time.monotonic() >= deadline:
            shows = ", ".join(f"{k}={text_value(v)}" for k, v in still.items())
            raise BMCVerifyFailed(
                f"BIOS still shows {shows} after the reset"
                + (f"; the BMC says: {notes}" if notes else ""),
                bmc=bmc.name, path=read_bios(bmc).path,
                hint="look at the BMC's job/task log; a value the firmware rejects is named "
                "there")
        # A short timeout (a test, an impatient operator) still gets several looks.
        time.sleep(min(opts.poll_s, max(0.1, opts.timeout_s / 10)))


def apply_bios(site: Site, hosts: Sequence[Host], store: StateStore, *,
               opts: ApplyOptions = ApplyOptions(), max_parallel: int | None = None,
               opener: Callable[[Site, Host], RedfishBMC] = open_bmc) -> list[ActionResult]:
    """Bring each host's BIOS to its baseline: refuse bad entries before sending, stage,
    reset (hosts that are serving only with ``force``), read back. One host's failure stays
    its own; every outcome is recorded in the host's history."""
    store.ensure_hosts([h.name for h in hosts])
    results, eligible = spare_serving(hosts, store, force=opts.force or not opts.reboot,
                                      why="a BIOS apply resets it")
    results += run_per_host(site, eligible, lambda bmc, host: _apply_one(bmc, host, opts),
                            max_parallel=max_parallel, opener=opener)
    for res in results:
        store.record_event(res.host, "bios", res.detail if res.ok else
                           f"bios apply failed ({res.reason}): {res.error}",
                           {"ok": res.ok, "warnings": list(res.warnings)})
    order = {h.name: i for i, h in enumerate(hosts)}
    return sorted(results, key=lambda r: order[r.host])
