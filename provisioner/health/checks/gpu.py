"""GPU checks: count/model, ECC, row remapping, Xid/SXid, NVLink, throttling, GPUDirect, Docker."""

from __future__ import annotations

import re
from collections import Counter

from provisioner.health.checks.base import (
    Context,
    finding,
    from_findings,
    missing_tool,
    not_applicable,
    result,
)
from provisioner.health.dcgm_diag import (
    RC_ISOLATE_ERROR,
    DiagReport,
    DiagResult,
    ShapeError,
    find_document,
    parse_diag,
)
from provisioner.health.errors import ParseError
from provisioner.health.model import CheckResult, Finding, GpuRef, RemedyKind, Status
from provisioner.health.nvlink import (
    NvLink,
    NvlinkSpec,
    nvlink_spec,
    parse_nvlink_errors,
    parse_nvlink_names,
    parse_nvlink_status,
)
from provisioner.health.nvsmi import Gpu, NvsmiReport
from provisioner.health.xid import XidAction, XidEvent, parse_kernel_log

NO_GPUS = "host profile has no GPUs"


def _report(ctx: Context, check_id: str) -> NvsmiReport | CheckResult:
    """``nvidia-smi -q`` parsed, or the result to return when it cannot be read."""
    if ctx.expect.gpus == 0:
        return not_applicable(check_id, NO_GPUS)
    sec = ctx.section("nvsmi")
    if sec is None or sec.missing:
        return missing_tool(check_id, "nvidia-smi (NVIDIA driver)")
    if not sec.ok:
        return result(
            check_id, Status.FAIL, f"nvidia-smi -q failed (exit {sec.rc})", remedy=RemedyKind.REBOOT,
            detail="the driver does not answer; reboot, then re-image if it persists",
            evidence=_lines(sec.text, head=False),
        )
    try:
        report = ctx.nvsmi
    except ParseError as exc:
        return result(check_id, Status.ERROR, str(exc), evidence=_lines(sec.text))
    if report is None:  # exit 0 and no output: nothing to judge (no assert: -O removes it)
        return result(check_id, Status.ERROR, "nvidia-smi printed nothing (exit 0): cannot judge")
    return report


def _gpus(ctx: Context, check_id: str) -> list[Gpu] | CheckResult:
    """The host's GPUs from nvidia-smi, or the result to return when they cannot be read."""
    report = _report(ctx, check_id)
    return report if isinstance(report, CheckResult) else report.gpus


def _unreadable(ctx: Context, g: Gpu, *sections: str) -> Finding | None:
    """FAIL (reset the GPU) when it printed NVML errors ("GPU requires reset", "Unknown Error",
    "ERR!") in the fields this check judges: its values cannot be believed."""
    errors = g.errors_in(*sections)
    if not errors:
        return None
    ref = ctx.gpu_ref(g.bus_id)
    return finding(Status.FAIL, f"{ref.label()} answers with errors instead of values",
                   remedy=RemedyKind.RESET_GPU, gpu=ref,
                   headline="{n} GPU(s) answer with errors instead of values: reset them",
                   detail="nvidia-smi -r (or reboot); repair the GPU if it persists",
                   evidence=[f"{ref.label()}: {e}" for e in errors[:5]])


def _as_finding(res: CheckResult) -> Finding:
    """A whole-check verdict (the driver does not answer) as one finding beside the others."""
    return finding(res.status, res.summary, remedy=res.remedy.kind, part=res.remedy.part,
                   detail=res.remedy.detail, evidence=res.evidence)


def _bus_findings(ctx: Context, want: int) -> tuple[list[Finding], list[str]] | CheckResult:
    """GPUs on the PCIe bus (lspci): a shortfall is a repair. ERROR when lspci's output is not
    lspci at all (an error message with exit 0 parses to no device, not to 0 GPUs)."""
    text = ctx.text("lspci")
    if not text:
        return [], []
    if not ctx.pci:
        return result("gpu.count", Status.ERROR, "lspci printed no PCI device: cannot judge the bus",
                      evidence=_lines(text))
    on_bus = [d for d in ctx.pci if d.is_gpu]
    if len(on_bus) >= want:
        return [], [d.addr for d in on_bus]
    return [finding(
        Status.FAIL, f"{len(on_bus)} of {want} GPUs on the PCIe bus", remedy=RemedyKind.REPAIR,
        part=f"GPU baseboard: {want - len(on_bus)} GPU(s) missing from PCIe",
        detail="reseat or replace the missing GPU (compare the listed addresses with the "
        "board's slot map)",
        evidence=[f"{d.lines[0]}" + (f" (slot {ctx.slots[d.addr]})" if d.addr in ctx.slots else "")
                  for d in on_bus])], [d.addr for d in on_bus]


def _driver_findings(ctx: Context, report: NvsmiReport, want: int, on_bus: list[str]) -> list[Finding]:
    """The driver against the bus and the profile: each GPU on the bus it does not list is
    named (reboot); a listing cut short or short of the profile is a reboot; more GPUs than
    the profile is its own warning (a wrong profile: the extra GPUs are still judged)."""
    out: list[Finding] = []
    listed = {g.bus_id for g in report.gpus}
    dup = [f"listed twice: GPU {b}" for b in report.duplicates]
    for addr in on_bus:
        if addr not in listed:
            ref = ctx.gpu_ref(addr)
            out.append(finding(Status.FAIL, f"{ref.label()} is on the PCIe bus but the driver "
                               "does not list it", remedy=RemedyKind.REBOOT, gpu=ref,
                               headline="{n} GPU(s) on the PCIe bus that the driver does not list",
                               detail="the driver lost the GPU; reboot, repair if it recurs"))
    if not out and (report.truncated or len(report.gpus) < want):
        out.append(finding(
            Status.FAIL, f"driver reports {len(report.gpus)} GPU(s) ({report.attached} attached) "
            f"of {want}", remedy=RemedyKind.REBOOT,
            detail="a GPU is on the bus but the driver lost it; reboot, repair if it recurs",
            evidence=[*dup, *(ctx.gpu_label(g.bus_id) for g in report.gpus)]))
    if len(report.gpus) > want:
        out.append(finding(
            Status.WARN, f"driver reports {len(report.gpus)} GPUs, the profile expects {want}",
            detail="fix the host's profile (gpus) in the inventory, or move the host",
            evidence=[ctx.gpu_label(g.bus_id) for g in report.gpus]))
    return out


def check_gpu_count(ctx: Context) -> CheckResult:
    """All expected GPUs are on the PCIe bus and answer the driver, with the expected model;
    every GPU the host shows is named (one finding per GPU lost, unreadable or wrong)."""
    cid = "gpu.count"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    want = ctx.expect.gpus
    bus = _bus_findings(ctx, want)
    if isinstance(bus, CheckResult):
        return bus
    findings, on_bus = bus
    report = _report(ctx, cid)
    if isinstance(report, CheckResult):
        # GPUs missing from the bus explain a driver that lists none: the repair comes first.
        return from_findings(cid, findings, "") if findings else report
    gpus = report.gpus
    models = sorted({g.product or "?" for g in gpus})
    observed: dict[str, object] = {
        "pci_gpus": len(on_bus) if ctx.text("lspci") else None,
        "driver_gpus": len(gpus), "attached": report.attached, "models": models,
        "duplicates": report.duplicates}
    threshold: dict[str, object] = {"gpus": want, "model": ctx.expect.gpu_model}
    findings += _driver_findings(ctx, report, want, on_bus)
    model = ctx.expect.gpu_model
    for g in gpus:
        bad = _unreadable(ctx, g, "Product Name", "Serial Number", "GPU UUID", "VBIOS Version")
        if bad is not None:
            findings.append(bad)
        elif model and model.lower() not in (g.product or "").lower():
            ref = ctx.gpu_ref(g.bus_id)
            findings.append(finding(Status.FAIL, f"{ref.label()} is a {g.product}, not {model}",
                                    remedy=RemedyKind.REPAIR, gpu=ref,
                                    headline="{n} GPU(s) are not " + model,
                                    part=f"{ref.label()} ({g.product})"))
    return from_findings(cid, findings, f"{len(gpus)} x {' / '.join(models)}",
                         observed=observed, threshold=threshold)


def _ecc_finding(ctx: Context, g: Gpu) -> Finding | None:
    """One GPU's ECC state: errors since driver load, ECC off, old errors (a warning)."""
    unreadable = _unreadable(ctx, g, "ECC Mode", "ECC Errors")
    if unreadable is not None:
        return unreadable
    ref = ctx.gpu_ref(g.bus_id)
    if (g.uncorrectable_volatile or 0) > 0:
        return finding(Status.FAIL, f"{ref.label()}: {g.uncorrectable_volatile} uncorrectable "
                       "ECC error(s) since driver load", remedy=RemedyKind.RESET_GPU, gpu=ref,
                       headline="uncorrectable ECC errors on {n} GPU(s) since driver load",
                       detail="reset the GPU to retire/remap the rows; repair if errors return")
    if g.ecc_current is False:
        if g.ecc_pending:
            return finding(Status.FAIL, f"{ref.label()}: ECC disabled, enabled pending a reboot",
                           remedy=RemedyKind.REBOOT, gpu=ref,
                           headline="ECC disabled on {n} GPU(s), enabled pending a reboot",
                           detail="ECC is enabled pending a reboot")
        return finding(Status.FAIL, f"{ref.label()}: ECC disabled", remedy=RemedyKind.REIMAGE,
                       gpu=ref, headline="ECC disabled on {n} GPU(s)", detail="enable ECC (nvidia-smi -e 1) in the image, then reboot")
    if (g.uncorrectable_aggregate or 0) > 0:
        return finding(Status.WARN, f"{ref.label()}: {g.uncorrectable_aggregate} uncorrectable "
                       "ECC error(s) in the past", gpu=ref,
                       headline="{n} GPU(s) had uncorrectable ECC errors in the past")
    return None


def check_ecc(ctx: Context) -> CheckResult:
    """ECC is on, and no uncorrectable ECC error since the driver loaded, on every GPU."""
    cid = "gpu.ecc"
    gpus = _gpus(ctx, cid)
    if isinstance(gpus, CheckResult):
        return gpus
    findings = [f for f in (_ecc_finding(ctx, g) for g in gpus) if f is not None]
    observed = {
        "ecc_off": [g.bus_id for g in gpus if g.ecc_current is False],
        "uncorrectable_volatile": {g.bus_id: g.uncorrectable_volatile for g in gpus
                                   if (g.uncorrectable_volatile or 0) > 0},
        "uncorrectable_aggregate": {g.bus_id: g.uncorrectable_aggregate for g in gpus
                                    if (g.uncorrectable_aggregate or 0) > 0},
    }
    threshold = {"ecc": "Enabled", "uncorrectable_volatile": 0}
    if not findings and all(g.ecc_current is None for g in gpus):
        return not_applicable(cid, "these GPUs do not report ECC")
    return from_findings(cid, findings, f"ECC on, no uncorrectable errors on {len(gpus)} GPU(s)",
                         observed=observed, threshold=threshold)


# nvidia-smi's "GPU Recovery Action" (NVML nvmlDeviceGpuRecoveryAction_t, 550+) as printed,
# letters only and lower case -> (remedy, what to do).
_RECOVERY: dict[str, tuple[RemedyKind, str]] = {
    "none": (RemedyKind.NONE, ""),
    "reset": (RemedyKind.RESET_GPU, "reset the GPU (no process may use it)"),
    "gpureset": (RemedyKind.RESET_GPU, "reset the GPU (no process may use it)"),
    "reboot": (RemedyKind.REBOOT, "reboot the node: a GPU reset is not enough"),
    "nodereboot": (RemedyKind.REBOOT, "reboot the node: a GPU reset is not enough"),
    "drainp2p": (RemedyKind.RESET_GPU, "stop the jobs using peer-to-peer/NVLink traffic, then "
                 "check again; reset the GPU if it stays"),
    "drainandreset": (RemedyKind.RESET_GPU, "the GPU runs at reduced capacity: drain its jobs, "
                      "then reset it"),
}


def _remap_findings(ctx: Context, g: Gpu, warn_rows: int) -> list[Finding]:
    """One GPU's row remapper, reset status and the driver's recovery action."""
    unreadable = _unreadable(ctx, g, "Remapped Rows", "GPU Reset Status", "GPU Recovery Action")
    if unreadable is not None:
        return [unreadable]
    ref = ctx.gpu_ref(g.bus_id)
    out: list[Finding] = []
    if g.remap_failure:
        out.append(finding(Status.FAIL, f"{ref.label()}: row remapping failed (out of spare rows)",
                           remedy=RemedyKind.REPAIR, gpu=ref, detail="replace the GPU (RMA)",
                           headline="row remapping failed on {n} GPU(s): out of spare rows"))
    elif g.remap_pending:
        out.append(finding(Status.FAIL, f"{ref.label()}: remapped rows pending a GPU reset",
                           remedy=RemedyKind.RESET_GPU, gpu=ref,
                           headline="{n} GPU(s) need a reset to apply remapped rows"))
    if g.reset_required or g.drain_recommended:
        what = "drain and reset recommended" if g.drain_recommended else "reset required"
        out.append(finding(Status.FAIL, f"{ref.label()}: {what}", remedy=RemedyKind.RESET_GPU,
                           gpu=ref, headline="{n} GPU(s) ask for a reset (" + what + ")"))
    action = g.recovery_action
    if action is not None:
        key = re.sub(r"[^a-z0-9]", "", action.lower())
        known = _RECOVERY.get(key)
        if known is None:
            out.append(finding(Status.WARN, f"{ref.label()}: GPU Recovery Action {action!r} is "
                               "not one this tool knows", gpu=ref,
                               detail="look it up in NVIDIA's NVML documentation"))
        elif known[0] is not RemedyKind.NONE:
            out.append(finding(Status.FAIL, f"{ref.label()}: GPU Recovery Action {action}",
                               remedy=known[0], gpu=ref, detail=known[1],
                               headline="{n} GPU(s) with GPU Recovery Action " + action))
    if not out and (g.remap_uncorrectable or 0) >= warn_rows:
        out.append(finding(Status.WARN, f"{ref.label()}: {g.remap_uncorrectable} rows remapped "
                           "for uncorrectable errors", gpu=ref,
                           headline="{n} GPU(s) have remapped many rows"))
    return out


def check_row_remap(ctx: Context) -> CheckResult:
    """No row-remapping failure, no remap pending a reset, no GPU asking for a reset or
    another recovery action (550+ "GPU Recovery Action"), on every GPU."""
    cid = "gpu.row_remap"
    gpus = _gpus(ctx, cid)
    if isinstance(gpus, CheckResult):
        return gpus
    warn_rows = ctx.expect.settings.remap_rows_warn
    findings = [f for g in gpus for f in _remap_findings(ctx, g, warn_rows)]
    if not findings and all(g.remap_pending is None and g.reset_required is None
                            and g.recovery_action is None for g in gpus):
        return not_applicable(cid, "these GPUs have no row remapper (pre-Ampere)")
    observed = {
        "remap_failure": [g.bus_id for g in gpus if g.remap_failure],
        "pending_or_reset_required": [g.bus_id for g in gpus
                                      if g.remap_pending or g.reset_required or g.drain_recommended],
        "recovery_action": {g.bus_id: g.recovery_action for g in gpus if g.recovery_action},
        "uncorrectable_remaps": {g.bus_id: g.remap_uncorrectable for g in gpus if g.remap_uncorrectable},
    }
    threshold = {"remap_failure": False, "pending": False, "recovery_action": "None",
                 "uncorrectable_remaps_warn": warn_rows}
    return from_findings(cid, findings, "no remap failure, pending remap or recovery action",
                         observed=observed, threshold=threshold)


_ACTION_STATUS = {
    XidAction.CONTACT_SUPPORT: (Status.FAIL, RemedyKind.REPAIR),
    XidAction.REBOOT: (Status.FAIL, RemedyKind.REBOOT),
    XidAction.RESET_GPU: (Status.FAIL, RemedyKind.RESET_GPU),
    XidAction.UNKNOWN: (Status.WARN, RemedyKind.NONE),
    XidAction.WORKFLOW: (Status.WARN, RemedyKind.NONE),
    XidAction.IGNORE: (Status.PASS, RemedyKind.NONE),
}
_ACTION_ORDER = [XidAction.IGNORE, XidAction.WORKFLOW, XidAction.UNKNOWN, XidAction.RESET_GPU,
                 XidAction.REBOOT, XidAction.CONTACT_SUPPORT]


def _judge_events(ctx: Context, cid: str, events: list[XidEvent], what: str) -> CheckResult:
    """One finding per GPU (or NVSwitch), judged by the worst catalogue action it logged."""
    by_part: dict[str, list[XidEvent]] = {}
    for e in events:
        by_part.setdefault(e.bus_id, []).append(e)
    findings: list[Finding] = []
    for bus, evs in by_part.items():
        worst = max(evs, key=lambda e: _ACTION_ORDER.index(e.action))
        status, remedy = _ACTION_STATUS[worst.action]
        if status is Status.PASS:
            continue
        bad = [e for e in evs if e.action == worst.action]
        codes = ", ".join(map(str, sorted({e.code for e in bad})))
        ref = ctx.gpu_ref(bus) if worst.kind == "xid" else None
        part = ref.label() if ref else f"NVSwitch at PCI {bus}"
        findings.append(finding(
            status, f"{what} {codes} on {part} ({worst.description}): action {worst.action.value}",
            remedy=remedy, gpu=ref, part=part,
            headline=f"{what} {codes} ({worst.description}): action {worst.action.value}",
            detail=f"NVIDIA Xid catalogue bucket: {worst.action.value}", evidence=[e.line for e in bad]))
    counts = Counter(f"{e.code}@{e.bus_id}" for e in events)
    worst_all = max(events, key=lambda e: _ACTION_ORDER.index(e.action)) if events else None
    observed = {"events": dict(counts), "worst_action": worst_all.action.value if worst_all else None}
    passed = f"no {what} since boot" if not events else f"{len(events)} {what} event(s), none to act on"
    return from_findings(cid, findings, passed, observed=observed,
                         threshold={"allowed_actions": ["ignore"]})


def check_xid(ctx: Context) -> CheckResult:
    """Xid events since boot, judged by the catalogue's action bucket, one finding per GPU."""
    cid = "gpu.xid"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    sec = ctx.section("kernel_log")
    if sec is None or not sec.ok:
        return result(cid, Status.ERROR, "could not read the kernel log (dmesg/journalctl)")
    events = [e for e in parse_kernel_log(ctx.kernel_lines) if e.kind == "xid"]
    return _judge_events(ctx, cid, events, "Xid")


def check_sxid(ctx: Context) -> CheckResult:
    """NVSwitch SXid events since boot (kernel log and fabric-manager log): fatal ones need a reboot."""
    cid = "nvswitch.sxid"
    if not ctx.expect.nvswitch:
        return not_applicable(cid, "host profile has no NVSwitch")
    sec = ctx.section("kernel_log")
    if sec is None or not sec.ok:
        return result(cid, Status.ERROR, "could not read the kernel log (dmesg/journalctl)")
    fm = ctx.text("fabricmanager_log").splitlines()
    events = [e for e in parse_kernel_log([*ctx.kernel_lines, *fm]) if e.kind == "sxid"]
    res = _judge_events(ctx, cid, events, "SXid")
    if res.status is Status.PASS and events:
        # Non-fatal SXids are logged for link retraining too; report them without failing.
        switches = sorted({e.bus_id for e in events})
        return result(cid, Status.WARN, f"{len(events)} non-fatal SXid(s) on "
                      f"{len(switches)} NVSwitch(es)", observed=res.observed,
                      threshold=res.threshold, evidence=[e.line for e in events],
                      part=", ".join(f"NVSwitch at PCI {b}" for b in switches))
    return res


_NVLINK_FAIL_COUNTERS = ("Recovery Errors",)
_SLOW_LINK = 0.95  # a link trained below 95% of the expected speed (e.g. half speed) is a fault


def _nvlink_wanted(ctx: Context, status: dict[int, list[NvLink]], names: dict[int, str]
                   ) -> tuple[dict[int, NvlinkSpec], str]:
    """Links and speed each GPU should show: the site's manifest, else the model table, else
    what most GPUs of this host show (so an unknown model still flags the odd GPU out).

    Every GPU the listing shows is judged, the ones beyond the profile's count included."""
    indexes = sorted(set(range(ctx.expect.gpus)) | set(status))
    manifest = ctx.expect.topology
    if manifest is not None and any(g.nvlink for g in manifest.gpus):
        return ({g.index: NvlinkSpec(g.nvlink.links, g.nvlink.speed_gbs or 0.0)
                 for g in manifest.gpus if g.nvlink}, f"topology manifest {manifest.profile}")
    product = ctx.expect.gpu_model or next(iter(names.values()), None)
    spec = nvlink_spec(product) or nvlink_spec(next(iter(names.values()), None))
    if spec is not None:
        # A GPU that names another model (a mixed or mis-profiled host) is held to its own.
        return ({i: nvlink_spec(names.get(i)) or spec for i in indexes},
                f"model table ({product})")
    counts = Counter(sum(1 for ln in links if ln.speed_gbs) for links in status.values())
    speeds = [ln.speed_gbs for links in status.values() for ln in links if ln.speed_gbs]
    if not counts:
        return {}, "no GPU shows an active link"
    usual = NvlinkSpec(counts.most_common(1)[0][0], Counter(speeds).most_common(1)[0][0])
    return {i: usual for i in indexes}, "the host's most common link count"


def _gpu_at(ctx: Context, index: int) -> tuple[GpuRef | None, str]:
    """The GPU ``nvidia-smi nvlink`` numbers ``index``, and how to name it."""
    ref = ctx.gpu_at_index(index)
    return ref, (f"GPU {index} ({ref.label()})" if ref else f"GPU {index}")


def _part(ref: GpuRef | None, name: str) -> str | None:
    """A finding's part: the GPU's label, or its index when nvidia-smi -q did not place it."""
    return None if ref is not None else name


def _nvlink_gpu(ctx: Context, idx: int, links: list[NvLink], spec: NvlinkSpec | None) -> list[Finding]:
    """One GPU's links against its spec: no link, links down (named), each slow link."""
    ref, name = _gpu_at(ctx, idx)
    up = [ln for ln in links if ln.speed_gbs]
    down = [ln for ln in links if ln.speed_gbs is None]
    fix = ("reset the GPU (with fabric manager restart); repair the baseboard if the links stay "
           "down or train slow")
    evidence = [f"GPU {idx} Link {ln.link}: {ln.raw}" for ln in down]
    if spec is not None and not up and spec.links:
        return [finding(Status.FAIL, f"{name}: no active NVLink (expected {spec.links})",
                        remedy=RemedyKind.RESET_GPU, gpu=ref, part=_part(ref, name), detail=fix,
                        evidence=evidence,
                        headline="{n} GPU(s) without an active NVLink")]
    out: list[Finding] = []
    short = spec is not None and len(up) < spec.links
    if down or short:
        expected = f" of {spec.links}" if spec is not None else f" of {len(links)}"
        off = f" (link {', '.join(str(ln.link) for ln in down)} inactive)" if down else ""
        out.append(finding(Status.FAIL, f"{name}: {len(up)}{expected} links active{off}",
                           remedy=RemedyKind.RESET_GPU, gpu=ref, part=_part(ref, name), detail=fix,
                        evidence=evidence,
                           headline="{n} GPU(s) with NVLinks inactive or missing"))
    if spec is not None and spec.speed_gbs:
        for ln in up:
            if (ln.speed_gbs or 0) < spec.speed_gbs * _SLOW_LINK:
                out.append(finding(Status.FAIL, f"{name}: link {ln.link} at {ln.speed_gbs:g} GB/s "
                                   f"(expected {spec.speed_gbs:g})", remedy=RemedyKind.RESET_GPU,
                                   gpu=ref, part=_part(ref, name), detail=fix,
                                   evidence=[f"GPU {idx} Link {ln.link}: {ln.raw}"],
                                   headline="{n} NVLink(s) trained below speed"))
    return out


def _nvlink_findings(ctx: Context, status: dict[int, list[NvLink]], names: dict[int, str]
                     ) -> tuple[list[Finding], dict[str, object]]:
    """Named findings against what each GPU should have: GPUs missing from the listing (a
    reboot: the driver lost them), and per GPU its inactive, missing and slow links."""
    want, source = _nvlink_wanted(ctx, status, names)
    out: list[Finding] = []
    expected_gpus = max(ctx.expect.gpus, len(want))
    if len(status) < expected_gpus:
        missing = sorted(set(range(expected_gpus)) - set(status))
        out.append(finding(
            Status.FAIL, f"only {len(status)} of {expected_gpus} GPUs listed by nvlink --status "
            f"(missing index {', '.join(map(str, missing))})", remedy=RemedyKind.REBOOT,
            part=", ".join(_gpu_at(ctx, i)[1] for i in missing),
            detail="the driver lists fewer GPUs than the host has: reboot, repair if it recurs"))
    for idx in sorted(status):
        out.extend(_nvlink_gpu(ctx, idx, status[idx], want.get(idx)))
    threshold: dict[str, object] = {"source": source,
                 "links_per_gpu": {str(i): s.links for i, s in sorted(want.items())},
                 "speed_gbs": sorted({s.speed_gbs for s in want.values()})}
    return out, threshold


def _rising_nvlink_counters(ctx: Context) -> dict[str, int]:
    """NVLink error counters that rose between the two reads, by how much."""
    before = parse_nvlink_errors(ctx.text("nvlink_errors_0"))
    after = parse_nvlink_errors(ctx.text("nvlink_errors_1"))
    return {k: v - before[k] for k, v in after.items() if k in before and v > before[k]}


def _counter_findings(ctx: Context, rising: dict[str, int]) -> list[Finding]:
    """Per GPU: rising recovery errors fail (reset), other rising counters (CRC, replay) warn."""
    by_gpu: dict[int, dict[str, int]] = {}
    for key, n in rising.items():
        m = re.match(r"gpu([0-9]+)/", key)
        if m:
            by_gpu.setdefault(int(m.group(1)), {})[key] = n
    out: list[Finding] = []
    for idx, counters in sorted(by_gpu.items()):
        ref, name = _gpu_at(ctx, idx)
        evidence = [f"{k} +{v}" for k, v in counters.items()]
        if any(k.endswith(_NVLINK_FAIL_COUNTERS) for k in counters):
            out.append(finding(Status.FAIL, f"{name}: NVLink recovery errors rising",
                               remedy=RemedyKind.RESET_GPU, gpu=ref, part=_part(ref, name),
                               evidence=evidence,
                               headline="NVLink recovery errors rising on {n} GPU(s)"))
        else:
            out.append(finding(Status.WARN, f"{name}: {len(counters)} NVLink error counter(s) rising",
                               gpu=ref, part=_part(ref, name), evidence=evidence,
                               headline="NVLink error counters rising on {n} GPU(s)"))
    return out


def check_nvlink(ctx: Context) -> CheckResult:
    """Every NVLink of every GPU the host shows active at the expected count and speed; error
    counters not rising. One finding per GPU (and per slow link)."""
    cid = "gpu.nvlink"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    if not ctx.expect.nvswitch:
        return not_applicable(cid, "host profile has no NVLink/NVSwitch fabric")
    sec = ctx.section("nvlink_status")
    if sec is None or sec.missing:
        return missing_tool(cid, "nvidia-smi (NVIDIA driver)")
    status = parse_nvlink_status(sec.text)
    if not status:
        return result(cid, Status.ERROR, "nvidia-smi nvlink --status printed no GPU",
                      evidence=sec.text.splitlines()[:5])
    down = [ln for links in status.values() for ln in links if ln.speed_gbs is None]
    rising = _rising_nvlink_counters(ctx)
    findings, expected = _nvlink_findings(ctx, status, parse_nvlink_names(sec.text))
    findings += _counter_findings(ctx, rising)
    speeds = Counter(ln.speed_gbs for links in status.values() for ln in links if ln.speed_gbs)
    links = sum(len(v) for v in status.values())
    observed: dict[str, object] = {
        "gpus": len(status), "links": links,
        "inactive": [f"gpu{ln.gpu}/link{ln.link}" for ln in down],
        "speeds_gbs": {str(k): v for k, v in speeds.items()}, "rising_counters": rising,
        "findings": [f.summary for f in findings]}
    threshold = {"inactive": 0, "rising_counters": 0, **expected}
    return from_findings(cid, findings, f"{links} links active, counters steady",
                         observed=observed, threshold=threshold)


# DCGM clock-event reason bits (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS / _CLOCKS_EVENT_REASONS)
_DCGM_REASONS = {
    0x1: "Idle", 0x2: "Applications Clocks Setting", 0x4: "SW Power Cap", 0x8: "HW Slowdown",
    0x10: "Sync Boost", 0x20: "SW Thermal Slowdown", 0x40: "HW Thermal Slowdown",
    0x80: "HW Power Brake Slowdown", 0x100: "Display Clock Setting",
}
_ALLOWED_REASONS = {"Idle", "SW Power Cap", "Applications Clocks Setting", "Display Clock Setting",
                    "Sync Boost"}
_DCGM_LINE = re.compile(
    r"^DCGM_FI_DEV_(?:CLOCK_THROTTLE_REASONS|CLOCKS_EVENT_REASONS)\{(?P<labels>[^}]*)\}\s+"
    r"(?P<value>[0-9.e+]+)"
)


def parse_dcgm_reasons(metrics: str) -> dict[str, list[str]]:
    """dcgm-exporter /metrics -> {gpu: [active clock-event reasons]}."""
    out: dict[str, list[str]] = {}
    for line in metrics.splitlines():
        m = _DCGM_LINE.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group("labels")))
        gpu = labels.get("pci_bus_id") or labels.get("gpu") or "?"
        try:
            mask = int(float(m.group("value")))
        except (ValueError, OverflowError):  # "1e999", "1.2.3": not a bitmask
            continue
        out[gpu] = [name for bit, name in _DCGM_REASONS.items() if mask & bit]
    return out


def check_throttle(ctx: Context) -> CheckResult:
    """dcgm-exporter answers, and no GPU is slowed by anything but idle or the power cap."""
    cid = "gpu.throttle"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    reasons: dict[str, list[str]] = {}
    source = "dcgm-exporter"
    sec = ctx.section("dcgm")
    if ctx.expect.dcgm_expected:
        if sec is None or not sec.ok:
            rc = "not installed" if sec is not None and sec.missing else "not answering"
            return result(
                cid, Status.FAIL, f"dcgm-exporter {rc} at {ctx.expect.settings.dcgm_exporter_url}",
                remedy=RemedyKind.REIMAGE, detail="the monitoring role installs dcgm-exporter",
                evidence=sec.text.splitlines()[-3:] if sec else [],
            )
        reasons = parse_dcgm_reasons(sec.text)
        if not reasons:
            return result(cid, Status.ERROR, "dcgm-exporter serves no clock-event reason metric",
                          evidence=sec.text.splitlines()[:3])
    else:
        gpus = _gpus(ctx, cid)
        if isinstance(gpus, CheckResult):
            return gpus
        source = "nvidia-smi"
        reasons = {g.bus_id: g.throttle_active for g in gpus}
    bad = {gpu: sorted(set(r) - _ALLOWED_REASONS) for gpu, r in reasons.items()}
    bad = {k: v for k, v in bad.items() if v}
    observed = {"source": source, "reasons": reasons}
    threshold = {"allowed": sorted(_ALLOWED_REASONS)}
    if bad:
        thermal = any("Thermal" in r for v in bad.values() for r in v)
        return result(
            cid, Status.WARN, f"{len(bad)} GPU(s) slowed down: "
            + ", ".join(sorted({r for v in bad.values() for r in v})),
            observed=observed, threshold=threshold,
            detail="check cooling (fans, inlet temperature)" if thermal
            else "check PSU/power-brake signal from the BMC",
            evidence=[f"{k}: {', '.join(v)}" for k, v in bad.items()],
        )
    return result(cid, Status.PASS, f"{len(reasons)} GPU(s) not throttled ({source})",
                  observed=observed, threshold=threshold)


def check_gpudirect(ctx: Context) -> CheckResult:
    """GPUDirect RDMA is possible: nvidia_peermem loaded (or DMA-BUF where the site chose it)."""
    cid = "gpu.gpudirect"
    if ctx.expect.gpus == 0 or ctx.expect.ib_ports == 0:
        return not_applicable(cid, "host has no GPUs or no InfiniBand HCAs")
    modules = {ln.split()[0] for ln in ctx.text("modules").splitlines() if ln.strip()}
    if ctx.expect.settings.gpudirect == "peermem":
        if "nvidia_peermem" in modules:
            return result(cid, Status.PASS, "nvidia_peermem loaded",
                          observed={"modules": ["nvidia_peermem"]})
        return result(cid, Status.FAIL, "nvidia_peermem is not loaded: no GPUDirect RDMA",
                      observed={"nvidia_loaded": "nvidia" in modules},
                      threshold={"module": "nvidia_peermem"}, remedy=RemedyKind.REBOOT,
                      detail="the image loads nvidia_peermem at boot (modules-load.d); "
                      "re-image if a reboot does not load it")
    kernel = dict(ln.split("=", 1) for ln in ctx.text("meta").splitlines() if "=" in ln).get("kernel", "")
    m = re.match(r"([0-9]+)\.([0-9]+)", kernel)
    new_enough = m is not None and (int(m.group(1)), int(m.group(2))) >= (5, 12)
    if "nvidia" in modules and new_enough:
        return result(cid, Status.PASS, f"DMA-BUF: nvidia loaded on kernel {kernel}",
                      observed={"kernel": kernel})
    return result(cid, Status.FAIL, f"DMA-BUF GPUDirect needs kernel >= 5.12 and the nvidia module "
                  f"(kernel {kernel or '?'}, nvidia {'loaded' if 'nvidia' in modules else 'absent'})",
                  observed={"kernel": kernel}, remedy=RemedyKind.REIMAGE)


def check_docker_gpu(ctx: Context) -> CheckResult:
    """Docker runs a GPU container that sees every GPU."""
    cid = "docker.gpu"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    if not ctx.expect.settings.docker_gpu_image:
        return not_applicable(cid, "settings.health.docker_gpu_image is not set")
    sec = ctx.section("docker_gpu")
    if sec is None or sec.missing:
        return missing_tool(cid, "docker")
    listed = [ln for ln in sec.text.splitlines() if ln.startswith("GPU ")]
    if not sec.ok or len(listed) < ctx.expect.gpus:
        return result(
            cid, Status.FAIL, f"GPU container saw {len(listed)} of {ctx.expect.gpus} GPUs "
            f"(exit {sec.rc})", observed={"gpus_seen": len(listed)},
            threshold={"gpus": ctx.expect.gpus}, remedy=RemedyKind.REIMAGE,
            detail="nvidia-container-toolkit or the Docker runtime config is broken",
            evidence=sec.text.splitlines()[-5:],
        )
    return result(cid, Status.PASS, f"container sees {len(listed)} GPUs",
                  observed={"gpus_seen": len(listed)})


def _lines(text: str, head: bool = True, n: int = 5) -> list[str]:
    """A few lines of a section as evidence, each cut short (one hostile line can be 1 MB)."""
    lines = text.splitlines()
    return [ln[:200] for ln in (lines[:n] if head else lines[-n:])]


# What a failing dcgmi diag test asks for, by test name (letters and digits, lower case; 2.x/3.x
# display names and 4.x plugin names). Tests not listed exercise the GPU itself: repair.
_DIAG_REMEDY: dict[str, tuple[RemedyKind, str]] = {
    **{k: (RemedyKind.REIMAGE, "the host's software stack (driver, CUDA, settings): re-image")
       for k in ("denylist", "blacklist", "nvmllibrary", "cudamainlibrary", "cudatoolkitlibrary",
                 "cudatoolkitlibraries", "cudaruntimelibrary", "permissionsandosblocks",
                 "permissionsandosrelatedblocks", "persistencemode", "environmentvariables",
                 "environmentalvariables", "software")},
    "pageretirementrowremap": (RemedyKind.RESET_GPU, "retired pages / remapped rows pending: "
                               "reset the GPU (gpu.row_remap says whether it needs an RMA)"),
    "graphicsprocesses": (RemedyKind.REBOOT, "a process holds the GPU: stop it or reboot"),
    "contextcreate": (RemedyKind.REBOOT, "no CUDA context could be created: reboot, repair if "
                      "it persists"),
    "inforom": (RemedyKind.REPAIR, "the GPU's InfoROM is corrupt: replace the GPU (RMA)"),
}
_DIAG_HARDWARE = (RemedyKind.REPAIR, "the GPU failed a hardware test: replace it (RMA) after a "
                  "second run confirms")


def _diag_gpu(ctx: Context, report: DiagReport, ident: int) -> tuple[GpuRef | None, str]:
    """The GPU a DCGM GPU id names: by the serial DCGM reports (3.3+), else by NVML index (the
    order nvidia-smi lists GPUs in; DCGM GPU ids are NVML indexes)."""
    serial = report.serials.get(ident)
    gpus = ctx.nvsmi_gpus()
    match = next((g for g in gpus if serial and g.serial == serial), None)
    if match is not None:
        return ctx.gpu_ref(match.bus_id), "by serial"
    ref = ctx.gpu_at_index(ident)
    return ref, "by NVML index" if ref else "not found in nvidia-smi -q"


def _diag_findings(ctx: Context, report: DiagReport, res: DiagResult) -> list[Finding]:
    """A failing or warning result as findings: one per GPU it names, or one for the host."""
    kind, fix = _DIAG_REMEDY.get(re.sub(r"[^a-z0-9]", "", res.test.lower()), _DIAG_HARDWARE)
    status = Status.FAIL if res.status == "fail" else Status.WARN
    remedy = kind if status is Status.FAIL else RemedyKind.NONE
    verb = "failed" if status is Status.FAIL else "warned"
    msg = f": {'; '.join(res.messages)}" if res.messages else ""
    headline = f"dcgmi diag {res.test} {verb} on {{n}} GPU(s)"
    software = kind is not RemedyKind.REPAIR or res.group != "GPU"
    if res.group == "GPU" and res.ids and not (software and len(res.ids) > 1):
        out = []
        for ident in res.ids:
            ref, how = _diag_gpu(ctx, report, ident)
            name = f"GPU {ident}" + (f" ({ref.label()})" if ref else "")
            out.append(finding(status, f"dcgmi diag {res.test} {verb} on {name}{msg}", remedy=remedy,
                               gpu=ref, part=None if ref else f"DCGM GPU {ident} ({how})",
                               detail=fix, headline=headline,
                               evidence=[res.text(), f"DCGM GPU {ident} = "
                                         f"{ref.label() if ref else 'unknown'} ({how})"]))
        return out
    who = (f"{res.group} {','.join(map(str, res.ids))}" if res.ids and res.group
           else "a GPU DCGM did not name" if kind is RemedyKind.REPAIR else "the host")
    return [finding(status, f"dcgmi diag {res.test} {verb} for {who}{msg}", remedy=remedy,
                    part=f"{who} ({res.test})", detail=fix, evidence=[res.text()])]


def _diag_verdict(ctx: Context, cid: str, report: DiagReport, rc: int, level: int) -> CheckResult:
    """Judge by the results: they name the GPU and test; the exit status only says "something"."""
    judged = report.of("pass", "fail", "warn")
    skipped = [r.text() for r in report.of("skip", "not run")]
    observed: dict[str, object] = {
        "rc": rc, "version": report.version, "driver": report.driver, "results": len(report.results),
        "failures": [r.text() for r in report.of("fail")], "warnings": [r.text() for r in report.of("warn")],
        "skipped": skipped, "unplaced": [f"{u.where}: {u.why}" for u in report.unplaced],
        "null_entries": report.nulls}
    findings = [f for r in report.of("fail", "warn") for f in _diag_findings(ctx, report, r)]
    if report.overall and report.overall.lower() == "fail" and not report.of("fail"):
        findings.append(finding(Status.FAIL, f"dcgmi diag --iterations: Overall Result Fail"
                                f"{': ' + report.notice if report.notice else ''}",
                                remedy=RemedyKind.REPAIR, part="a GPU DCGM did not name"))
    findings += [finding(Status.WARN, f"dcgmi diag output at {u.where} not judged: {u.why}",
                         headline="{n} dcgmi diag entries could not be read (named in the evidence)")
                 for u in report.unplaced]
    if not judged:
        why = "every test was skipped" if skipped else "no test result could be read"
        return result(cid, Status.ERROR, f"dcgmi diag: {why}: cannot judge", observed=observed,
                      evidence=[*skipped, *observed["unplaced"]][:10])  # type: ignore[misc]
    if not any(f.status is Status.FAIL for f in findings) and rc not in (0, RC_ISOLATE_ERROR):
        return result(cid, Status.ERROR, f"dcgmi diag exited {rc} but no test result failed: "
                      "cannot judge", observed=observed, evidence=[f.summary for f in findings])
    # 205 (DCGM_ST_NVVS_ISOLATE_ERROR) with every result passing: the results win, said so.
    note = f" (exit {rc} ignored: every test result passed)" if rc and not findings else ""
    ran = f"{len(judged)} result(s)" + (f", {len(skipped)} skipped" if skipped else "")
    return from_findings(cid, findings, f"dcgmi diag -r {level} passed: {ran}{note}",
                         observed=observed, threshold={"failing_results": 0})


def check_dcgm_diag(ctx: Context) -> CheckResult:
    """``dcgmi diag -r LEVEL -j`` (--deep; settings.health.dcgm_diag_level), DCGM 2.x to 4.x:
    every test result passes; each failing result names its GPU by PCI address and slot."""
    cid = "gpu.dcgm_diag"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    sec = ctx.section("dcgm_diag")
    if sec is None or sec.missing:
        return missing_tool(cid, "dcgmi (DCGM)")
    doc = find_document(sec.text)
    if doc is None:
        return result(cid, Status.ERROR, f"dcgmi diag printed no JSON (exit {sec.rc})",
                      evidence=_lines(sec.text, head=False))
    try:
        report = parse_diag(doc)
    except ShapeError as exc:
        return result(cid, Status.ERROR, f"cannot judge dcgmi diag output: {exc}",
                      observed={"rc": sec.rc}, evidence=_lines(sec.text))
    if report.runtime_error:
        return result(cid, Status.ERROR, f"dcgmi diag did not run: {report.runtime_error}",
                      observed={"rc": sec.rc, "version": report.version})
    return _diag_verdict(ctx, cid, report, sec.rc, ctx.expect.settings.dcgm_diag_level)
