"""The registry of health checks and the function that runs them over one host's sections."""

from __future__ import annotations

from provisioner.health.checks.base import Check, Context, result
from provisioner.health.checks.deep import check_gpu_matmul, check_nvlink_bandwidth
from provisioner.health.checks.fabric import (
    check_firmware,
    check_ib_counters,
    check_ib_ports,
    check_pcie_acs,
    check_pcie_links,
)
from provisioner.health.checks.gpu import (
    check_dcgm_diag,
    check_docker_gpu,
    check_ecc,
    check_gpu_count,
    check_gpudirect,
    check_nvlink,
    check_row_remap,
    check_sxid,
    check_throttle,
    check_xid,
)
from provisioner.health.checks.system import check_disk, check_kernel_log, check_zfs_docker
from provisioner.health.checks.topology import check_topology
from provisioner.health.model import CheckResult, Status

CHECKS: tuple[Check, ...] = (
    Check("gpu.count", "GPU count and model", check_gpu_count),
    Check("gpu.ecc", "ECC enabled, no uncorrectable errors", check_ecc),
    Check("gpu.row_remap", "Row remapping failure / pending", check_row_remap),
    Check("gpu.xid", "Xid events since boot", check_xid),
    Check("nvswitch.sxid", "NVSwitch SXid events since boot", check_sxid),
    Check("gpu.nvlink", "NVLink state and error counters", check_nvlink),
    Check("gpu.throttle", "dcgm-exporter and clock throttling", check_throttle),
    Check("gpu.gpudirect", "GPUDirect RDMA (nvidia_peermem / DMA-BUF)", check_gpudirect),
    Check("docker.gpu", "Docker runs a GPU container", check_docker_gpu),
    Check("host.topology", "GPU/NVLink/NIC/PCIe layout vs the profile's golden host",
          check_topology),
    Check("pcie.links", "PCIe width/speed of GPUs, HCAs, switch ports", check_pcie_links),
    Check("pcie.acs", "PCIe ACS off on GPU/HCA switch ports", check_pcie_acs),
    Check("ib.ports", "InfiniBand ports Active at rate", check_ib_ports),
    Check("ib.counters", "InfiniBand error counters steady", check_ib_counters),
    Check("firmware.versions", "VBIOS / HCA firmware vs manifest", check_firmware),
    Check("disk.usage", "Disk use below threshold", check_disk),
    Check("zfs.docker", "zpool healthy, Docker on ZFS", check_zfs_docker),
    Check("kernel.log", "Kernel errors outside the allow-list", check_kernel_log),
    Check("gpu.dcgm_diag", "dcgmi diag (--deep)", check_dcgm_diag, deep_only=True),
    Check("gpu.matmul", "GPU matmul throughput vs median (--deep)", check_gpu_matmul, deep_only=True),
    Check("gpu.nvlink_bw", "NVLink pair bandwidth vs median (--deep)", check_nvlink_bandwidth,
          deep_only=True),
)

CHECK_IDS = tuple(c.id for c in CHECKS)


def run_checks(ctx: Context) -> list[CheckResult]:
    """Every applicable check on one host; a check that crashes yields an ``error`` result."""
    out: list[CheckResult] = []
    skip = set(ctx.expect.settings.skip_checks)
    for check in CHECKS:
        if (check.deep_only and not ctx.deep) or check.id in skip:
            continue
        try:
            out.append(check.fn(ctx))
        except Exception as exc:  # one broken parser must not hide every other result
            out.append(result(check.id, Status.ERROR, f"check crashed: {type(exc).__name__}: {exc}"))
    return out


__all__ = ["CHECKS", "CHECK_IDS", "Check", "Context", "run_checks"]
