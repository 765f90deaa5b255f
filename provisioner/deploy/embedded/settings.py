"""``settings.embedded`` of a site file: where the embedded backend runs its services.

The model is provisioner/settings/embedded.py (typed in the site schema); this module reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.deploy.base import image_streams
from provisioner.exceptions import InventoryError
from provisioner.settings import DEFAULT_HOST_LINK_GBPS
from provisioner.settings.embedded import AutoinstallSettings, EmbeddedSettings

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

__all__ = ["AutoinstallSettings", "EmbeddedSettings", "embedded_settings", "host_link_gbps",
           "max_image_streams", "state_dir"]

# Share of the uplink the gated image streams fill by default. All of it: TCP shares a full
# link per flow, so callbacks, DHCP, apt and SSH still get through, and every stream the uplink
# leaves unused costs the whole rack time (80% of the uplink bounds a rack at 1.25x its bound).
STREAM_SHARE = 1.0


def max_image_streams(site: Site, settings: EmbeddedSettings | None = None) -> int:
    """The image streams the deploy server admits at once for this site (see EmbeddedSettings)."""
    settings = settings or site.settings.embedded
    explicit = settings.max_image_streams if settings else None
    if explicit:
        return explicit
    return image_streams(site.settings.uplink_gbps, host_link_gbps(site), STREAM_SHARE)


def host_link_gbps(site: Site) -> float:
    """The hosts' provisioning link speed (settings.embedded.host_link_gbps, or its default)."""
    settings = site.settings.embedded
    return settings.host_link_gbps if settings else DEFAULT_HOST_LINK_GBPS


def embedded_settings(site: Site) -> EmbeddedSettings:
    """The site's ``settings.embedded`` (validated when the site loaded); InventoryError if absent."""
    settings = site.settings.embedded
    if settings is None:
        raise InventoryError(
            "the embedded deploy backend needs settings.embedded",
            file=str(site.path),
            key="settings.embedded",
            hint="add at least `embedded: {interface: <provisioning NIC>, server_address: <its IP>}`",
        )
    return settings


def state_dir(site: Site, settings: EmbeddedSettings) -> Path:
    """Directory for dnsmasq's config, leases and log, and the TFTP root."""
    if settings.log_dir:
        return site.resolve_path(settings.log_dir)
    import os

    base = os.environ.get("PROVISIONER_STATE_DIR")
    root = Path(base) if base else Path.home() / ".local/state/provisioner"
    return root / f"{site.name}-embedded"
