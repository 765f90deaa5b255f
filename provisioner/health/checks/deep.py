"""--deep checks on one host: GPU matmul throughput and NVLink copy bandwidth vs the host's median."""

from __future__ import annotations

from provisioner.health.checks.base import Context, missing_tool, not_applicable, result
from provisioner.health.deep_measure import parse_matmul, parse_nvbandwidth, slow_outliers
from provisioner.health.errors import ParseError
from provisioner.health.model import CheckResult, RemedyKind, Status


def _label(ctx: Context, index: int) -> str:
    try:
        report = ctx.nvsmi
    except ParseError:
        report = None
    # The matmul script orders CUDA devices by PCI bus id, as nvidia-smi -q lists them.
    if report and index < len(report.gpus):
        return report.gpus[index].label()
    return f"GPU index {index}"


def check_gpu_matmul(ctx: Context) -> CheckResult:
    """Every GPU's bf16 matmul throughput within a fraction of the host's median GPU."""
    cid = "gpu.matmul"
    if ctx.expect.gpus == 0:
        return not_applicable(cid, "host profile has no GPUs")
    sec = ctx.section("gpu_matmul")
    if sec is None or sec.missing:
        return not_applicable(cid, "python3 with torch is not on the host (dcgmi diag covers compute)")
    perf = parse_matmul(sec.text)
    if not sec.ok or len(perf) < ctx.expect.gpus:
        return result(cid, Status.FAIL, f"matmul ran on {len(perf)} of {ctx.expect.gpus} GPUs "
                      f"(exit {sec.rc})", remedy=RemedyKind.RESET_GPU,
                      evidence=sec.text.splitlines()[-5:])
    frac = ctx.expect.settings.gpu_perf_min_fraction
    median, slow = slow_outliers({str(k): v for k, v in perf.items()}, frac)
    observed = {"tflops": perf, "median": median}
    if slow:
        parts = [_label(ctx, int(k)) for k in slow]
        return result(cid, Status.FAIL, f"{len(slow)} GPU(s) below {frac:.0%} of the median "
                      f"{median:.0f} TFLOPS", observed=observed, threshold={"min_fraction": frac},
                      remedy=RemedyKind.REPAIR, part=", ".join(parts),
                      evidence=[f"{_label(ctx, int(k))}: {v:.1f} TFLOPS" for k, v in slow.items()])
    return result(cid, Status.PASS, f"{len(perf)} GPUs at {median:.0f} TFLOPS (median)",
                  observed=observed, threshold={"min_fraction": frac})


def check_nvlink_bandwidth(ctx: Context) -> CheckResult:
    """Every GPU pair's copy bandwidth (nvbandwidth) within a fraction of the median pair."""
    cid = "gpu.nvlink_bw"
    if ctx.expect.gpus < 2 or not ctx.expect.nvswitch:
        return not_applicable(cid, "host has no NVLink fabric between GPUs")
    sec = ctx.section("nvbandwidth")
    if sec is None or sec.missing:
        return missing_tool(cid, "nvbandwidth")
    matrix = parse_nvbandwidth(sec.text)
    if not matrix:
        return result(cid, Status.ERROR, f"nvbandwidth printed no GB/s matrix (exit {sec.rc})",
                      evidence=sec.text.splitlines()[-5:])
    frac = ctx.expect.settings.gpu_perf_min_fraction
    median, slow = slow_outliers({f"{a}<-{b}": v for (a, b), v in matrix.items()}, frac)
    observed = {"pairs": len(matrix), "median_gbs": median, "slow": slow}
    if slow:
        gpus = sorted({int(g) for k in slow for g in k.split("<-")})
        return result(cid, Status.FAIL, f"{len(slow)} GPU pair(s) below {frac:.0%} of the median "
                      f"{median:.0f} GB/s", observed=observed, threshold={"min_fraction": frac},
                      remedy=RemedyKind.RESET_GPU, part=", ".join(_label(ctx, g) for g in gpus),
                      detail="reset the GPUs; if the pair stays slow, repair the baseboard/NVSwitch",
                      evidence=[f"GPU {k}: {v:.1f} GB/s" for k, v in slow.items()])
    return result(cid, Status.PASS, f"{len(matrix)} GPU pairs at {median:.0f} GB/s (median)",
                  observed=observed, threshold={"min_fraction": frac})
