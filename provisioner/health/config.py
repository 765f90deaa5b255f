"""The ``settings.health`` block of a site file and what one host is expected to contain."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from provisioner.exceptions import InventoryError

DEFAULT_TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"

# Kernel-log lines at level err or worse that are known noise on healthy GPU hosts.
DEFAULT_KERNEL_ALLOW = [
    r"ACPI (BIOS )?Error",  # firmware table quirks, reported on most server boards
    r"ACPI Error: AE_",
    r"ipmi_si .*: (Could not|Unable to) ",
    r"ERST: Failed to get Error Log Address Range",
    r"mlx5_core .*: mlx5_pcie_event",
    r"integrity: Problem loading X\.509 certificate",
    r"x86/cpu: SGX disabled by BIOS",
    r"systemd-journald.*: File .* corrupted or uncleanly shut down",
]


class HealthSettings(BaseModel):
    """Site-wide knobs of ``provision health`` (``settings.health`` in the site file)."""

    model_config = ConfigDict(extra="forbid")

    # SSH sessions open at once: each host's counter wait overlaps with every other's (a
    # session costs an ssh process, ~2 MB, while it waits; see docs/health.md).
    parallel: int = Field(default=512, ge=1, le=8192)
    ssh_port: int = Field(default=22, ge=1, le=65535)
    known_hosts: str | None = None  # default: the user's ~/.ssh/known_hosts
    ssh_options: list[str] = Field(default_factory=list)  # e.g. ["ProxyJump=bastion.dc1"]
    connect_timeout_s: int = Field(default=10, ge=1)
    command_timeout_s: float = Field(default=600.0, gt=0)
    counter_interval_s: float = Field(default=5.0, ge=0)
    fabric_link_layer: Literal["InfiniBand", "Ethernet"] = "InfiniBand"
    disk_warn_pct: float = Field(default=90.0, gt=0, le=100)
    disk_fail_pct: float = Field(default=95.0, gt=0, le=100)
    kernel_log_allow: list[str] = Field(default_factory=list)
    textfile_dir: str = DEFAULT_TEXTFILE_DIR
    zfs: bool = False  # expect a healthy zpool holding Docker's data root
    docker_gpu_image: str | None = None
    dcgm_exporter_url: str = "http://127.0.0.1:9400/metrics"
    dcgm_exporter: bool | None = None  # expected where the host has GPUs, unless set
    gpudirect: Literal["peermem", "dmabuf"] = "peermem"
    remap_rows_warn: int = Field(default=8, ge=1)
    skip_checks: list[str] = Field(default_factory=list)  # check ids, e.g. ["kernel.log"]
    # --deep
    dcgm_diag_level: Literal[1, 2, 3, 4] = 2
    gpu_perf_min_fraction: float = Field(default=0.9, gt=0, le=1)  # of the host's median GPU/pair
    ib_bw_min_fraction: float = Field(default=0.9, gt=0, le=1)  # of the port's rated speed
    ib_bw_duration_s: int = Field(default=5, ge=1, le=600)
    ib_bw_port: int = Field(default=18515, ge=1024, le=65000)

    @field_validator("ssh_options")
    @classmethod
    def _ssh_options(cls, v: list[str]) -> list[str]:
        for opt in v:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*=\S.*", opt):
                raise ValueError(f"{opt!r} is not an ssh -o option like 'ProxyJump=bastion'")
        return v

    @classmethod
    def from_site_block(cls, block: dict[str, Any], file: str | None = None) -> HealthSettings:
        """Validate ``settings.health``; InventoryError names the bad key."""
        try:
            return cls.model_validate(block or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            key = "settings.health." + ".".join(str(p) for p in first["loc"])
            raise InventoryError(first["msg"], file=file, key=key) from None


@dataclass(frozen=True)
class Expectations:
    """What one host should show, from its profile and the site's manifests."""

    gpus: int = 0
    gpu_model: str | None = None
    nvswitch: bool = False
    ib_ports: int = 0
    ib_rate_gbps: int | None = None
    firmware: dict[str, Any] = field(default_factory=dict)
    settings: HealthSettings = field(default_factory=HealthSettings)
    # The profile's TopologyManifest (health/manifest.py), when the site has one.
    topology: Any = None

    @property
    def dcgm_expected(self) -> bool:
        """dcgm-exporter must answer on hosts with GPUs unless the site says otherwise."""
        s = self.settings.dcgm_exporter
        return self.gpus > 0 if s is None else s
