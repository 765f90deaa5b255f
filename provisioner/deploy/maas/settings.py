"""The ``settings.maas`` block of a site file: its model is provisioner/settings/maas.py (typed in
the site schema, so errors name file, line and key at load); this module reads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.deploy.maas.apikey import MAASApiKey, parse_api_key
from provisioner.exceptions import InventoryError
from provisioner.inventory.credentials import resolve_secret
from provisioner.settings import DEFAULT_HOST_LINK_GBPS
from provisioner.settings.maas import MAASSettings

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

__all__ = ["MAASSettings", "host_link_gbps", "maas_settings", "resolve_api_key"]


def maas_settings(site: Site) -> MAASSettings:
    """The site's ``settings.maas`` (validated when the site loaded); InventoryError if absent."""
    if site.settings.maas is None:
        raise InventoryError(
            "the MAAS deploy backend needs settings.maas", file=str(site.path),
            key="settings.maas", hint="add at least `maas: {url: ..., api_key: {env: MAAS_API_KEY}}`"
            " (see docs/maas.md)",
        )
    return site.settings.maas


def host_link_gbps(site: Site) -> float:
    """The hosts' provisioning link speed (settings.maas.host_link_gbps, or its default)."""
    settings = site.settings.maas
    return settings.host_link_gbps if settings else DEFAULT_HOST_LINK_GBPS


def resolve_api_key(site: Site, settings: MAASSettings) -> MAASApiKey:
    """Read the API key through the site's reference (env, file or vault) and split it."""
    where = f"settings.maas.api_key in {site.path}"
    return parse_api_key(resolve_secret(site, settings.api_key, where), source=where)
