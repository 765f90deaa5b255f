"""PCIe (link width/speed, ACS) and InfiniBand (ports, counters) checks, and firmware versions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from provisioner.health.checks.base import (
    Context,
    finding,
    from_findings,
    missing_tool,
    not_applicable,
    result,
)
from provisioner.health.errors import ParseError
from provisioner.health.ib import (
    IB_ERROR_COUNTERS,
    IbPort,
    counter_deltas,
    parse_counters,
    parse_ibstat,
    parse_transceivers,
)
from provisioner.health.model import CheckResult, RemedyKind, Status
from provisioner.health.nvsmi import NvsmiReport, parse_nvsmi
from provisioner.health.pcie import (
    BandwidthWarning,
    LinkFinding,
    PciDevice,
    Topology,
    judge_link,
    parse_bandwidth_warnings,
    parse_lspci,
)

# A GPU this busy keeps its link at full speed; below it, a slow link may be power saving.
BUSY_PCT = 10


def _part(ctx: Context, dev: PciDevice) -> str:
    if dev.is_gpu:
        return ctx.gpu_label(dev.addr)
    if dev.is_hca:
        return f"HCA at PCI {dev.addr}" + (f" serial {dev.serial}" if dev.serial else "")
    return f"PCIe port {dev.addr} ({dev.desc.split(' (')[0]})"


def _access_denied(devices: list[PciDevice]) -> bool:
    """lspci run without root prints "Capabilities: <access denied>"."""
    return any("<access denied>" in ln for d in devices for ln in d.lines)


def _busy_gpus(report: NvsmiReport | None) -> set[str]:
    return {g.bus_id for g in (report.gpus if report else []) if (g.utilization_pct or 0) >= BUSY_PCT}


_Judged = list[tuple[LinkFinding, PciDevice]]  # a degraded link and the GPU/HCA below it


@dataclass
class _LinkFindings:
    """Degraded links on the paths to the GPUs/HCAs, sorted by what they mean."""

    width: _Judged = field(default_factory=list)
    speed: _Judged = field(default_factory=list)
    idle_slow: _Judged = field(default_factory=list)  # an idle GPU's own link, not judged

    @property
    def bad(self) -> _Judged:
        return self.width + self.speed


def _loaded_devices(ctx: Context) -> list[PciDevice]:
    """lspci read while dcgmi diag loads the GPUs (--deep), else the idle read."""
    loaded = ctx.section("lspci_loaded")
    return parse_lspci(loaded.text) if loaded is not None and loaded.ok else ctx.pci


def _loaded_report(ctx: Context) -> NvsmiReport | None:
    """nvidia-smi read under the same load, else the idle read; None when it does not parse."""
    try:
        loaded = ctx.section("nvsmi_loaded")
        return parse_nvsmi(loaded.text) if loaded and loaded.ok else ctx.nvsmi
    except ParseError:
        return None


def _unjudgeable(cid: str, devices: list[PciDevice], targets: list[PciDevice]
                 ) -> CheckResult | None:
    """The result when no link can be judged: no GPU/HCA at all, or no link capability shown."""
    if not targets:
        return result(cid, Status.FAIL, "no GPU or HCA on the PCIe bus", remedy=RemedyKind.REPAIR,
                      part="GPU baseboard / HCAs")
    if all(d.cap.width is None for d in targets):
        why = ("it needs root (give ssh_user passwordless sudo for lspci)" if _access_denied(devices)
               else "the GPUs/HCAs report no PCIe link capability")
        return result(cid, Status.ERROR, f"lspci shows no link capabilities: {why}",
                      evidence=[d.lines[0] for d in targets[:3]])
    return None


def _judge_paths(targets: list[PciDevice], topo: Topology, busy: set[str]) -> _LinkFindings:
    """Judge every link from each GPU/HCA up to its root port, each link once."""
    out = _LinkFindings()
    seen: set[str] = set()
    for dev in targets:
        gpu_idle = dev.is_gpu and dev.addr not in busy
        for node in topo.path(dev):
            if node.addr in seen:
                continue
            seen.add(node.addr)
            for f in judge_link(node, topo.parent(node)):
                if f.what == "width":
                    out.width.append((f, dev))
                elif gpu_idle and node is dev:
                    out.idle_slow.append((f, dev))  # an idle GPU downclocks its own link
                else:
                    out.speed.append((f, dev))
    return out


def _boot_narrowed(ctx: Context, targets: list[PciDevice]) -> list[BandwidthWarning]:
    """Kernel boot warnings that a GPU/HCA link came up narrower than it can be."""
    addrs = {d.addr for d in targets}
    return [w for w in parse_bandwidth_warnings(ctx.kernel_lines)
            if w.device in addrs and w.width < w.capable_width]


def _links_threshold() -> dict[str, Any]:
    return {"width": "max of both ends", "speed": "max of both ends, GPUs judged under load"}


def _links_observed(targets: list[PciDevice], found: _LinkFindings) -> dict[str, Any]:
    return {
        "devices": len(targets),
        "narrow": [f"{f.addr} x{f.current:g} < x{f.expected:g}" for f, _ in found.width],
        "slow": [f"{f.addr} {f.current:g} < {f.expected:g} GT/s" for f, _ in found.speed],
        "idle_slow": [f"{f.addr} {f.current:g} GT/s (idle)" for f, _ in found.idle_slow],
    }


def _links_verdict(cid: str, ctx: Context, targets: list[PciDevice], found: _LinkFindings,
                   dmesg: list[BandwidthWarning]) -> CheckResult:
    """One finding per degraded link (FAIL, repair, naming the GPU/HCA below it and the port),
    one per link the kernel saw narrow at boot (WARN); PASS when there is none."""
    observed, threshold = _links_observed(targets, found), _links_threshold()
    findings = []
    for f, dev in found.bad:
        where = f" via {f.addr}" if f.addr != dev.addr else ""
        gpu = ctx.gpu_ref(dev.addr) if dev.is_gpu else None
        findings.append(finding(
            Status.FAIL, f"{_part(ctx, dev)}{where}: {f.what} {f.current:g} < {f.expected:g}",
            remedy=RemedyKind.REPAIR, gpu=gpu, part=_part(ctx, dev) + where,
            headline="{n} degraded PCIe link(s)",
            detail="reseat the card/riser or cable; replace if the link stays degraded",
            evidence=[*f.device.lines[:1], f"{f.addr}: {f.what} {f.current:g} < {f.expected:g}"]))
    if not findings:
        findings = [finding(Status.WARN, f"kernel reported {w.device} narrow at boot (x{w.width} "
                            f"of x{w.capable_width}; now full)", part=w.device, evidence=[w.line],
                            headline="kernel reported {n} narrow link(s) at boot (now full)")
                    for w in dmesg]
    idle = found.idle_slow
    note = f"; {len(idle)} idle GPU link(s) downclocked (not judged)" if idle else ""
    return from_findings(cid, findings, f"{len(targets)} GPU/HCA links at full width{note}",
                         observed=observed, threshold=threshold)


def check_pcie_links(ctx: Context) -> CheckResult:
    """GPUs, HCAs and the switch ports above them run at the width and speed both ends can do."""
    cid = "pcie.links"
    if ctx.expect.gpus == 0 and ctx.expect.ib_ports == 0:
        return not_applicable(cid, "host profile has no GPUs or HCAs")
    sec = ctx.section("lspci")
    if sec is None or sec.missing:
        return missing_tool(cid, "lspci (pciutils)")
    devices = _loaded_devices(ctx)
    busy = _busy_gpus(_loaded_report(ctx))
    targets = [d for d in devices if d.is_gpu or d.is_hca]
    unjudgeable = _unjudgeable(cid, devices, targets)
    if unjudgeable is not None:
        return unjudgeable
    found = _judge_paths(targets, Topology(devices), busy)
    return _links_verdict(cid, ctx, targets, found, _boot_narrowed(ctx, targets))


def check_pcie_acs(ctx: Context) -> CheckResult:
    """ACS redirection is off on the switch ports between GPUs and HCAs (else P2P crawls)."""
    cid = "pcie.acs"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, "host profile has no GPUs")
    sec = ctx.section("lspci")
    if sec is None or sec.missing:
        return missing_tool(cid, "lspci (pciutils)")
    if _access_denied(ctx.pci):
        return result(cid, Status.ERROR, "lspci shows no PCIe capabilities: it needs root "
                      "(give ssh_user passwordless sudo for lspci)")
    topo = Topology(ctx.pci)
    ports: dict[str, PciDevice] = {}
    for dev in ctx.pci:
        if dev.is_gpu or dev.is_hca:
            for node in topo.path(dev)[1:]:
                if node.port_type == "Downstream Port":
                    ports[node.addr] = node
    if not ports:
        if not any(d.is_gpu for d in ctx.pci):
            return not_applicable(cid, "no GPU on the PCIe bus to judge (see gpu.count)")
        return not_applicable(cid, "GPUs sit directly on root ports (no PCIe switch)")
    unread = [p for p in ports.values() if p.acs_ctl is None]
    enabled = {a: p.acs_enabled for a, p in ports.items() if p.acs_enabled}
    observed = {"switch_ports": len(ports), "acs_enabled": enabled}
    if len(unread) == len(ports):
        return result(cid, Status.ERROR, "ACSCtl not readable (lspci needs root)", observed=observed)
    findings = [finding(Status.FAIL, f"ACS on at switch port {a}: {', '.join(v)}+",
                        remedy=RemedyKind.REBOOT, part=f"PCIe switch port {a}",
                        headline="ACS enabled on {n} switch port(s) under GPUs/HCAs",
                        detail="the image disables ACS at boot (setpci); reboot, re-image if it "
                        "persists", evidence=[f"{a}: {', '.join(v)}+"])
                for a, v in enabled.items()]
    return from_findings(cid, findings, f"ACS off on {len(ports)} switch port(s)",
                         observed=observed, threshold={"ACSCtl": "all '-'"})


def _ib_ports(ctx: Context, cid: str) -> list[IbPort] | CheckResult:
    if ctx.expect.ib_ports == 0:
        return not_applicable(cid, "host profile has no InfiniBand HCAs")
    sec = ctx.section("ibstat")
    if sec is None or sec.missing:
        return missing_tool(cid, "ibstat (infiniband-diags)")
    try:
        return parse_ibstat(sec.text)
    except ParseError as exc:
        return result(cid, Status.ERROR, str(exc), evidence=sec.text.splitlines()[:5])


def _natural(name: str) -> list[object]:
    """mlx5_2/1 before mlx5_10/1 (rails are numbered, not sorted as text)."""
    # Digit runs (odd positions) compare by value without int(): it refuses 4,300+ digits.
    parts = re.split(r"([0-9]+)", name)
    return [(len(t.lstrip("0")), t.lstrip("0")) if i % 2 else t for i, t in enumerate(parts)]


def fabric_ports(ports: list[IbPort], link_layer: str, rate: int | None) -> list[IbPort]:
    """The compute-fabric ports: the site's link layer, on HCA types that run at its rate.

    Hosts also carry other HCAs (e.g. a 100G ConnectX-6 Dx for storage); those are told apart
    by CA type: a type with any port up at the fabric rate is a fabric HCA, so its down ports
    count as down fabric ports.
    """
    layer = [p for p in ports if (p.link_layer or "InfiniBand") == link_layer]
    if rate is None:
        return layer
    fabric_types = {p.ca_type for p in layer if p.active and p.rate == rate}
    return [p for p in layer if p.ca_type in fabric_types] if fabric_types else layer


def check_ib_ports(ctx: Context) -> CheckResult:
    """The expected number of fabric ports are Active/LinkUp at the expected rate."""
    cid = "ib.ports"
    ports = _ib_ports(ctx, cid)
    if isinstance(ports, CheckResult):
        return ports
    want, rate = ctx.expect.ib_ports, ctx.expect.ib_rate_gbps
    fabric = fabric_ports(ports, ctx.expect.settings.fabric_link_layer, rate)
    good = [p for p in fabric if p.active and (rate is None or p.rate == rate)]
    bad = [p for p in fabric if p not in good]
    observed = {"fabric_ports": len(fabric), "active_at_rate": len(good),
                "good": sorted((p.name for p in good), key=_natural),
                "bad": {p.name: f"{p.state}/{p.physical_state} {p.rate}G" for p in bad}}
    threshold = {"ports": want, "rate_gbps": rate, "link_layer": ctx.expect.settings.fabric_link_layer}
    findings = [finding(Status.FAIL, f"HCA {p.name} port GUID {p.port_guid or '?'} ({p.ca_type}): "
                        f"{p.state}/{p.physical_state} at {p.rate}G", remedy=RemedyKind.REPAIR,
                        part=f"HCA {p.name} port GUID {p.port_guid or '?'} ({p.ca_type})",
                        headline=f"{{n}} fabric port(s) not Active at {rate}G",
                        detail="check the cable and transceiver at both ends, then the switch port",
                        evidence=[f"{p.name}: State {p.state}, Physical state {p.physical_state}, "
                                  f"Rate {p.rate}"])
                for p in sorted(bad, key=lambda p: _natural(p.name))]
    missing = max(0, want - len(fabric))
    if missing:
        findings.append(finding(Status.FAIL, f"{missing} fabric port(s) not seen at all "
                                f"({len(fabric)} of {want})", remedy=RemedyKind.REPAIR,
                                part=f"{missing} fabric port(s) not seen at all",
                                detail="an HCA is missing from ibstat: check it is on the PCIe bus"))
    elif len(good) < want and not bad:
        findings.append(finding(Status.FAIL, f"{len(good)} of {want} fabric ports Active at {rate}G",
                                remedy=RemedyKind.REPAIR))
    if findings:
        res = from_findings(cid, findings, "", observed=observed, threshold=threshold)
        return res.model_copy(update={
            "summary": f"{len(good)} of {want} fabric ports Active at {rate}G: {res.summary}"})
    sec = ctx.section("ibstat")
    if sec is not None and not sec.ok:
        # ibstat stops at the first HCA it cannot stat (ibpanic, exit 255): the ports after it
        # were never read, so "all Active" cannot be said.
        return result(cid, Status.ERROR, f"ibstat exited {sec.rc}: {len(good)} fabric ports Active "
                      f"at {rate}G, but not every HCA could be read", observed=observed,
                      threshold=threshold, evidence=[ln[:200] for ln in sec.text.splitlines()[-3:]])
    return result(cid, Status.PASS, f"{len(good)} fabric ports Active at {rate}G",
                  observed=observed, threshold=threshold)


def check_ib_counters(ctx: Context) -> CheckResult:
    """InfiniBand error counters do not rise between the two reads."""
    cid = "ib.counters"
    if ctx.expect.ib_ports == 0:
        return not_applicable(cid, "host profile has no InfiniBand HCAs")
    s0, s1 = ctx.section("ib_counters_0"), ctx.section("ib_counters_1")
    if s0 is None or s1 is None or not s0.ok or not s1.ok:
        return result(cid, Status.ERROR, "no readable /sys/class/infiniband/*/ports/*/counters")
    rising = counter_deltas(parse_counters(s0.text), parse_counters(s1.text))
    observed = {"rising": rising, "interval_s": ctx.expect.settings.counter_interval_s}
    if not rising:
        return result(cid, Status.PASS, "error counters steady", observed=observed,
                      threshold={"rise": 0})
    findings = []
    for port, counters in sorted(rising.items(), key=lambda kv: _natural(kv[0])):
        evidence = [f"{port} {n} +{d}" for n, d in counters.items()]
        if any(IB_ERROR_COUNTERS.get(n) for n in counters):
            findings.append(finding(Status.FAIL, f"link errors rising on {port}: "
                                    + ", ".join(f"{n} +{d}" for n, d in counters.items()),
                                    remedy=RemedyKind.REPAIR, part=f"HCA {port} cable/transceiver",
                                    headline="link errors rising on {n} port(s)", evidence=evidence))
        else:
            findings.append(finding(Status.WARN, f"error counters rising on {port}",
                                    part=f"HCA {port}", evidence=evidence,
                                    headline="error counters rising on {n} port(s)"))
    return from_findings(cid, findings, "error counters steady", observed=observed,
                         threshold={"rise": 0})


def _allowed(expected: Any) -> list[str]:
    return [str(x) for x in expected] if isinstance(expected, list) else [str(expected)]


@dataclass
class _FirmwareAudit:
    """Versions read per component, and the components off the manifest."""

    found: dict[str, str] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # GPUs printing NVML errors

    def off(self, why: str, part: str) -> None:
        self.wrong.append(why)
        self.parts.append(part)


def _wanted(expected: Any, key: str | None) -> Any:
    """A manifest entry: one version (or list) for all, or a dict by type with a "default"."""
    return expected.get(key or "", expected.get("default")) if isinstance(expected, dict) else expected


def _audit_vbios(ctx: Context, vbios: Any, audit: _FirmwareAudit) -> None:
    try:
        report = ctx.nvsmi
    except ParseError:
        report = None
    for g in report.gpus if report else []:
        if g.errors_in("VBIOS Version"):  # the GPU needs a reset (gpu.count says so), not a flash
            audit.unreadable.append(g.label())
            continue
        audit.found[g.label()] = g.vbios or "?"
        if g.vbios not in _allowed(vbios):
            audit.off(f"{g.label()}: VBIOS {g.vbios}, expected {vbios}", g.label())


def _audit_hcas(ctx: Context, hca: Any, audit: _FirmwareAudit) -> None:
    try:
        ports = parse_ibstat(ctx.text("ibstat"))
    except ParseError:
        ports = []
    by_ca: dict[str, IbPort] = {p.ca: p for p in ports}
    for ca, p in sorted(by_ca.items()):
        want = _wanted(hca, p.ca_type)
        if want is None:
            continue
        audit.found[ca] = p.firmware or "?"
        if p.firmware not in _allowed(want):
            audit.off(f"{ca} ({p.ca_type}): firmware {p.firmware}, expected {want}", f"HCA {ca}")


def _audit_transceivers(ctx: Context, xcvr: Any, audit: _FirmwareAudit) -> None:
    sec = ctx.section("transceivers")
    if sec is None or sec.missing:
        audit.wrong.append("mlxlink (NVIDIA MFT) is not installed: transceiver firmware unknown")
        return
    for t in parse_transceivers(sec.text):
        want = _wanted(xcvr, t.part_number)
        if want is None:
            continue
        audit.found[t.label()] = t.firmware or "?"
        if t.firmware not in _allowed(want):
            audit.off(f"{t.label()}: firmware {t.firmware}, expected {want}", t.label())


def _firmware_verdict(cid: str, manifest: dict[str, Any], audit: _FirmwareAudit) -> CheckResult:
    """ERROR when nothing could be read, FAIL when a component is off the manifest, else PASS."""
    found, wrong = audit.found, audit.wrong
    if not found and not wrong:
        return result(cid, Status.ERROR, "no firmware version could be read (nvidia-smi/ibstat)",
                      threshold=dict(manifest), evidence=audit.unreadable)
    if wrong:
        return result(cid, Status.FAIL, f"{len(wrong)} component(s) off the firmware manifest",
                      observed=found, threshold=dict(manifest), remedy=RemedyKind.REIMAGE,
                      part=", ".join(audit.parts), detail="re-run the firmware update role",
                      evidence=wrong)
    if audit.unreadable:  # not judged, so not passed: gpu.count asks for the reset
        return result(cid, Status.WARN, f"{len(found)} component(s) on the expected firmware, "
                      f"{len(audit.unreadable)} GPU VBIOS unreadable", observed=found,
                      threshold=dict(manifest), evidence=audit.unreadable)
    return result(cid, Status.PASS, f"{len(found)} component(s) on the expected firmware",
                  observed=found, threshold=dict(manifest))


def check_firmware(ctx: Context) -> CheckResult:
    """GPU VBIOS, HCA and transceiver firmware match the site's expected manifest."""
    cid = "firmware.versions"
    manifest = ctx.expect.firmware
    if not manifest:
        return not_applicable(cid, "site has no settings.expected_firmware manifest")
    audit = _FirmwareAudit()
    vbios, hca = manifest.get("gpu_vbios"), manifest.get("hca_firmware")
    xcvr = manifest.get("transceiver_firmware")
    if vbios and ctx.expect.gpus:
        _audit_vbios(ctx, vbios, audit)
    if hca and ctx.expect.ib_ports:
        _audit_hcas(ctx, hca, audit)
    if xcvr and ctx.expect.ib_ports:
        _audit_transceivers(ctx, xcvr, audit)
    return _firmware_verdict(cid, manifest, audit)
