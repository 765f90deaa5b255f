"""GPU checks: count/model, ECC, row remapping, Xid/SXid, NVLink, throttling, GPUDirect, Docker."""

from __future__ import annotations

import re
from collections import Counter

from provisioner.health.checks.base import Context, missing_tool, not_applicable, result
from provisioner.health.dcgm_diag import (
    RC_ISOLATE_ERROR,
    DiagReport,
    ShapeError,
    find_document,
    parse_diag,
)
from provisioner.health.errors import ParseError
from provisioner.health.model import CheckResult, RemedyKind, Status
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


def _unreadable(cid: str, gpus: list[Gpu], *sections: str) -> CheckResult | None:
    """FAIL (reset the GPU) when a GPU printed NVML errors ("GPU requires reset", "Unknown
    Error", "ERR!") in the fields this check judges: its values cannot be believed."""
    bad = {g.label(): g.errors_in(*sections) for g in gpus if g.errors_in(*sections)}
    if not bad:
        return None
    return result(
        cid, Status.FAIL, f"{len(bad)} GPU(s) answer with errors instead of values: reset them",
        observed={"unreadable": {k: v[:5] for k, v in bad.items()}}, remedy=RemedyKind.RESET_GPU,
        part=", ".join(bad), detail="nvidia-smi -r (or reboot); repair the GPU if it persists",
        evidence=[f"{k}: {v[0]}" for k, v in bad.items()],
    )


def _pci_count(ctx: Context, cid: str, want: int) -> CheckResult | None:
    """FAIL (repair) when lspci lists fewer GPUs than expected; ERROR when its output is not
    lspci at all (an error message with exit 0 parses to no device, not to 0 GPUs)."""
    text = ctx.text("lspci")
    if not text:
        return None
    if not ctx.pci:
        return result(cid, Status.ERROR, "lspci printed no PCI device: cannot judge the bus",
                      evidence=_lines(text))
    on_bus = [d for d in ctx.pci if d.is_gpu]
    if len(on_bus) >= want:
        return None
    return result(
        cid, Status.FAIL, f"{len(on_bus)} of {want} GPUs on the PCIe bus",
        observed={"pci_gpus": len(on_bus)}, threshold={"gpus": want},
        remedy=RemedyKind.REPAIR, part=f"GPU baseboard: {want - len(on_bus)} GPU(s) missing from PCIe",
        detail="reseat or replace the missing GPU (compare the listed addresses with the "
        "board's slot map)",
        evidence=[d.lines[0] for d in on_bus],
    )


def _driver_count(cid: str, report: NvsmiReport, want: int, observed: dict[str, object],
                  threshold: dict[str, object]) -> CheckResult | None:
    """FAIL (reboot) when the driver lists fewer distinct GPUs than expected or attached; WARN
    when it lists more than the profile says (a wrong profile, not a fault: nothing to repair,
    but the host is not golden until the inventory matches it)."""
    gpus = report.gpus
    dup = [f"listed twice: GPU {b}" for b in report.duplicates]
    if report.truncated or len(gpus) < want:
        return result(
            cid, Status.FAIL,
            f"driver reports {len(gpus)} GPU(s) ({report.attached} attached) of {want}",
            observed=observed, threshold=threshold, remedy=RemedyKind.REBOOT,
            detail="a GPU is on the bus but the driver lost it; reboot, repair if it recurs",
            evidence=[*dup, *(g.label() for g in gpus)],
        )
    if len(gpus) > want:
        return result(
            cid, Status.WARN, f"driver reports {len(gpus)} GPUs, the profile expects {want}",
            observed=observed, threshold=threshold,
            detail="fix the host's profile (gpus) in the inventory, or move the host",
            evidence=[g.label() for g in gpus],
        )
    return None


def check_gpu_count(ctx: Context) -> CheckResult:
    """All expected GPUs are on the PCIe bus and answer the driver, with the expected model."""
    cid = "gpu.count"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, NO_GPUS)
    want = ctx.expect.gpus
    pci = _pci_count(ctx, cid, want)
    if pci is not None:
        return pci
    report = _report(ctx, cid)
    if isinstance(report, CheckResult):
        return report
    gpus = report.gpus
    models = sorted({g.product or "?" for g in gpus})
    observed: dict[str, object] = {
        "pci_gpus": sum(1 for d in ctx.pci if d.is_gpu) if ctx.text("lspci") else None,
        "driver_gpus": len(gpus), "attached": report.attached, "models": models,
        "duplicates": report.duplicates}
    threshold: dict[str, object] = {"gpus": want, "model": ctx.expect.gpu_model}
    verdict = _driver_count(cid, report, want, observed, threshold) or _unreadable(
        cid, gpus, "Product Name", "Serial Number", "GPU UUID", "VBIOS Version")
    if verdict is not None:
        return verdict
    model = ctx.expect.gpu_model
    wrong = [g for g in gpus if model and model.lower() not in (g.product or "").lower()]
    if wrong:
        return result(
            cid, Status.FAIL, f"{len(wrong)} GPU(s) are not {model}", observed=observed,
            threshold=threshold, remedy=RemedyKind.REPAIR,
            part=", ".join(f"{g.label()} ({g.product})" for g in wrong),
        )
    return result(cid, Status.PASS, f"{len(gpus)} x {' / '.join(models)}",
                  observed=observed, threshold=threshold)


def check_ecc(ctx: Context) -> CheckResult:
    """ECC is on, and no uncorrectable ECC error since the driver loaded."""
    cid = "gpu.ecc"
    gpus = _gpus(ctx, cid)
    if isinstance(gpus, CheckResult):
        return gpus
    unreadable = _unreadable(cid, gpus, "ECC Mode", "ECC Errors")
    if unreadable is not None:
        return unreadable
    off = [g for g in gpus if g.ecc_current is False]
    off_pending_on = [g for g in off if g.ecc_pending]
    volatile = [g for g in gpus if (g.uncorrectable_volatile or 0) > 0]
    aggregate = [g for g in gpus if (g.uncorrectable_aggregate or 0) > 0]
    observed = {
        "ecc_off": [g.bus_id for g in off],
        "uncorrectable_volatile": {g.bus_id: g.uncorrectable_volatile for g in volatile},
        "uncorrectable_aggregate": {g.bus_id: g.uncorrectable_aggregate for g in aggregate},
    }
    threshold = {"ecc": "Enabled", "uncorrectable_volatile": 0}
    if volatile:
        return result(
            cid, Status.FAIL, f"uncorrectable ECC errors on {len(volatile)} GPU(s) since driver load",
            observed=observed, threshold=threshold, remedy=RemedyKind.RESET_GPU,
            part=", ".join(g.label() for g in volatile),
            detail="reset the GPU(s) to retire/remap the rows; repair if errors return",
        )
    if off:
        kind = RemedyKind.REBOOT if len(off_pending_on) == len(off) else RemedyKind.REIMAGE
        return result(
            cid, Status.FAIL, f"ECC disabled on {len(off)} GPU(s)", observed=observed,
            threshold=threshold, remedy=kind, part=", ".join(g.label() for g in off),
            detail="ECC is enabled pending a reboot" if kind is RemedyKind.REBOOT
            else "enable ECC (nvidia-smi -e 1) in the image, then reboot",
        )
    if aggregate:
        return result(
            cid, Status.WARN, f"{len(aggregate)} GPU(s) had uncorrectable ECC errors in the past",
            observed=observed, threshold=threshold, part=", ".join(g.label() for g in aggregate),
        )
    if all(g.ecc_current is None for g in gpus):
        return not_applicable(cid, "these GPUs do not report ECC")
    return result(cid, Status.PASS, f"ECC on, no uncorrectable errors on {len(gpus)} GPU(s)",
                  observed=observed, threshold=threshold)


def check_row_remap(ctx: Context) -> CheckResult:
    """No row-remapping failure, no remap pending a reset, no GPU asking for a reset."""
    cid = "gpu.row_remap"
    gpus = _gpus(ctx, cid)
    if isinstance(gpus, CheckResult):
        return gpus
    unreadable = _unreadable(cid, gpus, "Remapped Rows", "GPU Reset Status")
    if unreadable is not None:
        return unreadable
    if all(g.remap_pending is None and g.reset_required is None for g in gpus):
        return not_applicable(cid, "these GPUs have no row remapper (pre-Ampere)")
    failed = [g for g in gpus if g.remap_failure]
    pending = [g for g in gpus if g.remap_pending or g.reset_required or g.drain_recommended]
    many = [g for g in gpus if (g.remap_uncorrectable or 0) >= ctx.expect.settings.remap_rows_warn]
    observed = {
        "remap_failure": [g.bus_id for g in failed],
        "pending_or_reset_required": [g.bus_id for g in pending],
        "uncorrectable_remaps": {g.bus_id: g.remap_uncorrectable for g in gpus if g.remap_uncorrectable},
    }
    threshold = {"remap_failure": False, "pending": False,
                 "uncorrectable_remaps_warn": ctx.expect.settings.remap_rows_warn}
    if failed:
        return result(
            cid, Status.FAIL, f"row remapping failed on {len(failed)} GPU(s): out of spare rows",
            observed=observed, threshold=threshold, remedy=RemedyKind.REPAIR,
            part=", ".join(g.label() for g in failed), detail="replace the GPU (RMA)",
        )
    if pending:
        return result(
            cid, Status.FAIL, f"{len(pending)} GPU(s) need a reset to apply remapped rows",
            observed=observed, threshold=threshold, remedy=RemedyKind.RESET_GPU,
            part=", ".join(g.label() for g in pending),
        )
    if many:
        return result(
            cid, Status.WARN, f"{len(many)} GPU(s) have remapped many rows", observed=observed,
            threshold=threshold, part=", ".join(g.label() for g in many),
        )
    return result(cid, Status.PASS, "no remap failure or pending remap", observed=observed,
                  threshold=threshold)


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
    if not events:
        return result(cid, Status.PASS, f"no {what} since boot")
    worst = max(events, key=lambda e: _ACTION_ORDER.index(e.action))
    status, remedy = _ACTION_STATUS[worst.action]
    counts = Counter(f"{e.code}@{e.bus_id}" for e in events)
    bad = [e for e in events if e.action == worst.action]
    parts = sorted({ctx.gpu_label(e.bus_id) if e.kind == "xid" else f"NVSwitch at PCI {e.bus_id}"
                    for e in bad})
    codes = sorted({e.code for e in bad})
    return result(
        cid, status,
        f"{what} {', '.join(map(str, codes))} ({worst.description}): action {worst.action.value}",
        observed={"events": dict(counts), "worst_action": worst.action.value},
        threshold={"allowed_actions": ["ignore"]},
        remedy=remedy, part=", ".join(parts) if parts else None,
        detail=f"NVIDIA Xid catalogue bucket: {worst.action.value}",
        evidence=[e.line for e in bad],
    )


def check_xid(ctx: Context) -> CheckResult:
    """Xid events since boot, judged by the catalogue's action bucket."""
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
        return res.model_copy(update={"status": Status.WARN})
    return res


_NVLINK_FAIL_COUNTERS = ("Recovery Errors",)
_SLOW_LINK = 0.95  # a link trained below 95% of the expected speed (e.g. half speed) is a fault


def _nvlink_wanted(ctx: Context, status: dict[int, list[NvLink]], names: dict[int, str]
                   ) -> tuple[dict[int, NvlinkSpec], str]:
    """Links and speed each GPU should show: the site's manifest, else the model table, else
    what most GPUs of this host show (so an unknown model still flags the odd GPU out)."""
    manifest = ctx.expect.topology
    if manifest is not None and any(g.nvlink for g in manifest.gpus):
        return ({g.index: NvlinkSpec(g.nvlink.links, g.nvlink.speed_gbs or 0.0)
                 for g in manifest.gpus if g.nvlink}, f"topology manifest {manifest.profile}")
    product = ctx.expect.gpu_model or next(iter(names.values()), None)
    spec = nvlink_spec(product) or nvlink_spec(next(iter(names.values()), None))
    want = ctx.expect.gpus or len(status)
    if spec is not None:
        return {i: spec for i in range(want)}, f"model table ({product})"
    counts = Counter(sum(1 for ln in links if ln.speed_gbs) for links in status.values())
    speeds = [ln.speed_gbs for links in status.values() for ln in links if ln.speed_gbs]
    if not counts:
        return {}, "no GPU shows an active link"
    usual = NvlinkSpec(counts.most_common(1)[0][0], Counter(speeds).most_common(1)[0][0])
    return {i: usual for i in range(want)}, "the host's most common link count"


def _nvlink_findings(ctx: Context, status: dict[int, list[NvLink]], names: dict[int, str]
                     ) -> tuple[list[str], dict[str, object]]:
    """Named findings against what each GPU should have: missing GPUs, links, slow links."""
    want, source = _nvlink_wanted(ctx, status, names)
    out: list[str] = []
    expected_gpus = max(ctx.expect.gpus, len(want))
    if len(status) < expected_gpus:
        missing = sorted(set(range(expected_gpus)) - set(status))
        out.append(f"nvlink.gpus_missing: only {len(status)} of {expected_gpus} GPUs listed "
                   f"(missing index {', '.join(map(str, missing))})")
    for idx, spec in sorted(want.items()):
        links = status.get(idx)
        if links is None:
            continue
        up = [ln for ln in links if ln.speed_gbs]
        if not up:
            out.append(f"nvlink.none: GPU {idx} has no active NVLink (expected {spec.links})")
            continue
        if len(up) < spec.links:
            out.append(f"nvlink.links: GPU {idx} has {len(up)} of {spec.links} links active")
        slow = [ln for ln in up if spec.speed_gbs and (ln.speed_gbs or 0) < spec.speed_gbs * _SLOW_LINK]
        for ln in slow:
            out.append(f"nvlink.speed: GPU {idx} link {ln.link} at {ln.speed_gbs:g} GB/s "
                       f"(expected {spec.speed_gbs:g})")
    threshold: dict[str, object] = {"source": source,
                 "links_per_gpu": {str(i): s.links for i, s in sorted(want.items())},
                 "speed_gbs": sorted({s.speed_gbs for s in want.values()})}
    return out, threshold


def _rising_nvlink_counters(ctx: Context) -> dict[str, int]:
    """NVLink error counters that rose between the two reads, by how much."""
    before = parse_nvlink_errors(ctx.text("nvlink_errors_0"))
    after = parse_nvlink_errors(ctx.text("nvlink_errors_1"))
    return {k: v - before[k] for k, v in after.items() if k in before and v > before[k]}


def _nvlink_observed(status: dict[int, list[NvLink]], down: list[NvLink], rising: dict[str, int],
                     findings: list[str]) -> dict[str, object]:
    speeds = Counter(ln.speed_gbs for links in status.values() for ln in links if ln.speed_gbs)
    return {"gpus": len(status), "links": sum(len(v) for v in status.values()),
            "inactive": [f"gpu{ln.gpu}/link{ln.link}" for ln in down],
            "speeds_gbs": {str(k): v for k, v in speeds.items()}, "rising_counters": rising,
            "findings": findings}


def _nvlink_fault(cid: str, down: list[NvLink], findings: list[str], observed: dict[str, object],
                  threshold: dict[str, object]) -> CheckResult:
    """FAIL for inactive links or findings; a GPU the driver lost needs a reboot, not a reset."""
    gpus = sorted({ln.gpu for ln in down} | {int(m) for f in findings
                                              for m in re.findall(r"GPU ([0-9]+)", f)})
    lost_gpu = any(f.startswith("nvlink.gpus_missing") for f in findings)
    what = [f"{len(down)} NVLink(s) inactive"] if down else []
    what += [f.split(": ", 1)[1] for f in findings[:3]]
    return result(
        cid, Status.FAIL, "; ".join(what) + (" ..." if len(findings) > 3 else ""),
        observed=observed, threshold=threshold,
        # A GPU the driver no longer lists needs a reboot, which resets the others too.
        remedy=RemedyKind.REBOOT if lost_gpu else RemedyKind.RESET_GPU,
        part=", ".join(f"GPU index {g}" for g in gpus) or None,
        detail="the driver lists fewer GPUs than the host has: reboot, repair if it recurs"
        if lost_gpu else "reset the GPUs (with fabric manager restart); repair the "
        "baseboard if the links stay down or train slow",
        evidence=[*findings, *(f"GPU {ln.gpu} Link {ln.link}: {ln.raw}" for ln in down)],
    )


def _nvlink_counters_verdict(cid: str, rising: dict[str, int], observed: dict[str, object],
                             threshold: dict[str, object]) -> CheckResult:
    """All links up: FAIL on rising recovery errors, WARN on other rising counters, else PASS."""
    if any(k.endswith(_NVLINK_FAIL_COUNTERS) for k in rising):
        return result(cid, Status.FAIL, "NVLink recovery errors rising", observed=observed,
                      threshold=threshold, remedy=RemedyKind.RESET_GPU,
                      evidence=[f"{k} +{v}" for k, v in rising.items()])
    if rising:
        return result(cid, Status.WARN, f"{len(rising)} NVLink error counter(s) rising",
                      observed=observed, threshold=threshold,
                      evidence=[f"{k} +{v}" for k, v in rising.items()])
    return result(cid, Status.PASS, f"{observed['links']} links active, counters steady",
                  observed=observed, threshold=threshold)


def check_nvlink(ctx: Context) -> CheckResult:
    """Every NVLink active at the expected count and speed; error counters not rising."""
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
    observed = _nvlink_observed(status, down, rising, findings)
    threshold = {"inactive": 0, "rising_counters": 0, **expected}
    if down or findings:
        return _nvlink_fault(cid, down, findings, observed, threshold)
    return _nvlink_counters_verdict(cid, rising, observed, threshold)


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


def _diag_verdict(cid: str, report: DiagReport, rc: int, level: int) -> CheckResult:
    """Judge by the results: they name the GPU and test; the exit status only says "something"."""
    observed = {"failures": report.failures, "warnings": report.warnings, "rc": rc,
                "results": report.results, "version": report.version}
    if report.failures:
        # A failing result fails the host whatever the exit status (0 included).
        return result(cid, Status.FAIL, f"dcgmi diag: {len(report.failures)} failing test result(s)",
                      observed=observed, remedy=RemedyKind.REPAIR,
                      part=", ".join(dict.fromkeys(report.entities)) or "GPU(s) named in the evidence",
                      detail="DCGM entity ids are NVML indexes (nvidia-smi order)",
                      evidence=report.failures)
    if rc not in (0, RC_ISOLATE_ERROR):
        return result(cid, Status.ERROR, f"dcgmi diag exited {rc} but no test result failed: "
                      "cannot judge", observed=observed, evidence=report.warnings)
    # 205 (DCGM_ST_NVVS_ISOLATE_ERROR) with every result passing: the results win, said so.
    note = f" (exit {rc} ignored: every test result passed)" if rc else ""
    if report.warnings:
        return result(cid, Status.WARN, f"dcgmi diag: {len(report.warnings)} warning(s){note}",
                      observed=observed, evidence=report.warnings)
    return result(cid, Status.PASS, f"dcgmi diag -r {level} passed{note}", observed=observed)


def check_dcgm_diag(ctx: Context) -> CheckResult:
    """``dcgmi diag -r LEVEL -j`` (--deep; settings.health.dcgm_diag_level), DCGM 3.x or 4.x:
    every test result passes."""
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
    if report.results == 0:
        return result(cid, Status.ERROR, "dcgmi diag reported no test result: cannot judge",
                      observed={"rc": sec.rc, "version": report.version},
                      evidence=_lines(sec.text))
    return _diag_verdict(cid, report, sec.rc, ctx.expect.settings.dcgm_diag_level)
