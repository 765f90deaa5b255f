"""``settings.embedded``: the embedded deploy backend's settings (owned by deploy/embedded/).

The model lives below the inventory so that the site schema can type the block without the
inventory importing deploy/; the backend's behaviour around it is deploy/embedded/settings.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from provisioner.settings import DEFAULT_HOST_LINK_GBPS

# A held image request waits this long at most: far below busybox wget's 900 s read timeout and
# any proxy's idle timeout; the ramdisk asks again at once after a held 503.
DEFAULT_IMAGE_HOLD_S = 25.0
# Hosts in flight at most, however long they POST: BMC sessions, DHCP reservations, held image
# requests and callback waits (the discovery benchmark ran 512 BMCs at once; dnsmasq's default
# lease limit is 1000).
DEFAULT_MAX_HOSTS_IN_FLIGHT = 512


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
    # PXE to "started", and the whole image sent to "finished" (else the attempt fails then)
    callback_timeout_s: float = Field(default=600.0, gt=0)
    power_off_timeout_s: float = Field(default=180.0, gt=0)  # "finished" to powered off
    wait_booted: bool = True  # wait for cloud-init's phone-home from the installed OS
    # the hosts' provisioning link speed: the workflow sizes waves with it (backend.host_link_gbps)
    host_link_gbps: float = Field(default=DEFAULT_HOST_LINK_GBPS, gt=0)
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
    # Streams of the image a host's ramdisk tries before it reports a failure: a stream that
    # breaks or does not verify is fetched again from the running ramdisk (queued ahead of first
    # attempts), far cheaper than a failed attempt's power cycle and POST.
    image_attempts: int = Field(default=2, ge=1, le=5)
    # How long a busy image request waits in the server for a stream before a "503 Stream Queue
    # Hold Expired" (the ramdisk asks again at once); 0: no hold, every busy answer is a plain
    # 503 and the ramdisk polls. Keep it below busybox wget's 900 s read timeout and the idle
    # timeout of any proxy between the hosts and this server.
    image_hold_s: float = Field(default=DEFAULT_IMAGE_HOLD_S, ge=0, le=600)
    # A host that takes its image stream slower than this (megabits per second, over 30 s of
    # the server waiting on its writes) is cut and the stream handed to the next host: a host
    # that is stuck, or anything that got a host's stream, cannot hold it. Time the server
    # itself is slow does not count. 0: no floor.
    image_min_rate_mbps: float = Field(default=8.0, ge=0, le=100_000)
    # Hosts in flight at most when hosts in flight adapt (no --max-parallel): what the BMCs, the
    # DHCP server and this machine carry at once; also the server's held image requests.
    max_hosts_in_flight: int = Field(default=DEFAULT_MAX_HOSTS_IN_FLIGHT, ge=1, le=4096)
    # Hosts whose image verified serve it to hosts still waiting, from their deploy ramdisk
    # (HTTP on peer_port of their provisioning address), before they go on with their own
    # deploy: the image spreads by doubling instead of at the uplink alone. Only where the
    # hosts may reach each other on the provisioning network (docs/deploy-embedded.md).
    peer_serving: bool = False
    peer_port: int = Field(default=8081, ge=1, le=65535)
    # An idle peer goes on with its own deploy after this long (at once when the idle sources
    # outnumber the hosts that may still ask), and serves at most peer_serve_max_s in all.
    peer_linger_s: float = Field(default=10.0, ge=0, le=600)
    peer_serve_max_s: float = Field(default=300.0, gt=0, le=3600)
    # How the installed OS first boots: "reboot" (the ramdisk powers off; a one-time disk boot
    # and power on: a second firmware POST) or "kexec" (the ramdisk starts the installed
    # kernel itself: no second POST; falls back to "reboot" when it cannot, and a host whose
    # kexec'd OS did not come up is retried with "reboot").
    installed_boot: Literal["reboot", "kexec"] = "reboot"
    autoinstall: AutoinstallSettings | None = None

    def public_http(self, port: int | None = None) -> str:
        """Base URL of the HTTP server as the hosts see it (``port``: the one actually bound)."""
        return f"http://{self.http_address or self.server_address}:{port or self.http_port}"

    @property
    def bind_address(self) -> str:
        """Address the HTTP server listens on."""
        return self.http_bind or self.http_address or self.server_address
