"""``settings.embedded`` of a site file: where the embedded backend runs its services."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.deploy.base import image_streams
from provisioner.exceptions import InventoryError

if TYPE_CHECKING:
    from provisioner.inventory.model import Site


# Share of the uplink the gated image streams fill by default. All of it: TCP shares a full
# link per flow, so callbacks, DHCP, apt and SSH still get through, and every stream the uplink
# leaves unused costs the whole rack time (80% of the uplink bounds a rack at 1.25x its bound).
STREAM_SHARE = 1.0


class AutoinstallSettings(BaseModel):
    """Ubuntu netboot artefacts for ``method: autoinstall`` (URLs the hosts can reach)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kernel_url: str
    initrd_url: str
    iso_url: str
    extra_args: str = ""


class EmbeddedSettings(BaseModel):
    """Where dnsmasq and the deploy HTTP server run, and how hosts reach them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interface: str  # the provisioning interface dnsmasq binds to
    server_address: str  # this machine's address on the provisioning network (TFTP next-server)
    netns: str | None = None  # run dnsmasq inside this network namespace (the lab)
    http_address: str | None = None  # where hosts reach the HTTP server; default server_address
    http_port: int = Field(default=8080, ge=0, le=65535)  # 0: any free port
    http_bind: str | None = None  # address the HTTP server binds; default http_address
    log_dir: str | None = None  # dnsmasq config/log/leases, TFTP root; default the state dir
    dhcp_lease_s: int = Field(default=3600, ge=120)
    dynamic_range: str | None = None  # "a.b.c.d,a.b.c.e": a dynamic pool; none unless asked
    ramdisk_flavour: str = "cloud-amd64"  # Debian kernel flavour of the deploy ramdisk
    boot_firmware: Literal["auto", "bios", "uefi"] = "auto"
    callback_timeout_s: float = Field(default=600.0, gt=0)  # PXE to "started"
    power_off_timeout_s: float = Field(default=180.0, gt=0)  # "finished" to powered off
    wait_booted: bool = True  # wait for cloud-init's phone-home from the installed OS
    host_link_gbps: float = Field(default=10.0, gt=0)  # read by the workflow's wave planning
    # Image streams the HTTP server admits at once (beyond: queued in the server); None: what
    # fills settings.uplink_gbps, floor(uplink / host_link_gbps), at least 1.
    max_image_streams: int | None = Field(default=None, ge=1)
    # Retry-After of a refused stream that was not queued in the server (its hold slots full),
    # and the ramdisk's wait before asking again
    image_retry_after_s: int = Field(default=1, ge=1, le=300)
    # How long a host's ramdisk keeps asking for a stream before it reports a failure (cut to
    # deploy_timeout_s - callback_timeout_s - 60 s, at least 60 s, so the host gives up and
    # says why before the orchestrator stops waiting).
    image_wait_s: float = Field(default=7200.0, gt=0)
    autoinstall: AutoinstallSettings | None = None

    def public_http(self, port: int | None = None) -> str:
        """Base URL of the HTTP server as the hosts see it (``port``: the one actually bound)."""
        return f"http://{self.http_address or self.server_address}:{port or self.http_port}"

    @property
    def bind_address(self) -> str:
        """Address the HTTP server listens on."""
        return self.http_bind or self.http_address or self.server_address


def max_image_streams(site: Site, settings: EmbeddedSettings | None = None) -> int:
    """The image streams the deploy server admits at once for this site (see EmbeddedSettings)."""
    if settings is None:  # planning (--dry-run) reads the raw keys: no validation error here
        raw = site.settings.embedded or {}
        explicit, link = raw.get("max_image_streams"), raw.get("host_link_gbps", 10.0)
    else:
        explicit, link = settings.max_image_streams, settings.host_link_gbps
    if explicit:
        return int(explicit)
    return image_streams(site.settings.uplink_gbps, float(link), STREAM_SHARE)


def embedded_settings(site: Site) -> EmbeddedSettings:
    """Validate ``settings.embedded`` of a site; InventoryError names the bad key."""
    raw = site.settings.embedded
    if not raw:
        raise InventoryError(
            "the embedded deploy backend needs settings.embedded",
            file=str(site.path),
            key="settings.embedded",
            hint="add at least `embedded: {interface: <provisioning NIC>, server_address: <its IP>}`",
        )
    try:
        return EmbeddedSettings.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = "settings.embedded." + ".".join(str(p) for p in err["loc"])
        raise InventoryError(err["msg"], file=str(site.path), key=key) from None


def state_dir(site: Site, settings: EmbeddedSettings) -> Path:
    """Directory for dnsmasq's config, leases and log, and the TFTP root."""
    if settings.log_dir:
        return site.resolve_path(settings.log_dir)
    import os

    base = os.environ.get("PROVISIONER_STATE_DIR")
    root = Path(base) if base else Path.home() / ".local/state/provisioner"
    return root / f"{site.name}-embedded"
