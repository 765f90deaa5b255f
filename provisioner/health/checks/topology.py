"""host.topology: the host against its profile's topology manifest (captured from a golden host)."""

from __future__ import annotations

from provisioner.health.checks.base import Context, not_applicable, result
from provisioner.health.errors import ParseError
from provisioner.health.manifest import compare, unreadable
from provisioner.health.model import CheckResult, RemedyKind, Status

# The remedy of a host with several deviations: the one that needs the most hands.
_ORDER = (RemedyKind.REPAIR, RemedyKind.REIMAGE, RemedyKind.REBOOT, RemedyKind.RESET_GPU)


def check_topology(ctx: Context) -> CheckResult:
    """GPUs, NVLinks, GPU-NIC placement, NUMA, PCIe links, ACS and NIC firmware/mode as on the
    golden host of this profile; one evidence line per deviation with its remedy."""
    cid = "host.topology"
    manifest = ctx.expect.topology
    if manifest is None:
        return not_applicable(cid, "no topology manifest for this profile "
                              "(capture one: provision health HOST --capture-topology)")
    try:
        deviations = compare(manifest, ctx.sections, ctx.host)
    except ParseError as exc:
        return result(cid, Status.ERROR, str(exc))
    unread = unreadable(manifest, ctx.sections)
    observed = {"deviations": [d.what for d in deviations], "not_compared": unread}
    threshold = {"manifest": manifest.profile, "captured_from": manifest.captured_from}
    if not deviations and unread:
        return result(cid, Status.WARN, f"could not compare {', '.join(unread)} with "
                      f"{manifest.profile}: the host did not deliver that output",
                      observed=observed, threshold=threshold)
    if not deviations:
        return result(cid, Status.PASS, f"matches {manifest.profile} "
                      f"(golden host {manifest.captured_from})",
                      observed=observed, threshold=threshold)
    kinds = {d.remedy for d in deviations}
    remedy = next(k for k in _ORDER if k in kinds)
    kinds_txt = sorted({d.what for d in deviations})
    return result(
        cid, Status.FAIL, f"{len(deviations)} deviation(s) from {manifest.profile}: "
        + ", ".join(kinds_txt), observed=observed, threshold=threshold, remedy=remedy,
        part="; ".join(sorted({d.part for d in deviations if d.remedy is remedy})),
        detail=next(d.action for d in deviations if d.remedy is remedy),
        evidence=[d.line() for d in deviations],
    )
