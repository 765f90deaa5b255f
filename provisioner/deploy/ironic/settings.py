"""The ``settings.ironic`` block of a site file: its model is provisioner/settings/ironic.py
(typed in the site schema, so errors name file, line and key at load); this module reads it
and opens the API client it describes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import requests

from provisioner.deploy.ironic.client import IronicClient
from provisioner.exceptions import InventoryError
from provisioner.inventory.credentials import resolve_secret
from provisioner.settings import DEFAULT_HOST_LINK_GBPS
from provisioner.settings.ironic import IronicSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from provisioner.inventory.model import Host, Site

__all__ = ["IronicSettings", "conductor_group", "host_link_gbps", "ironic_settings", "open_client"]


def ironic_settings(site: Site) -> IronicSettings:
    """The site's ``settings.ironic`` (validated when the site loaded); InventoryError if absent."""
    if site.settings.ironic is None:
        raise InventoryError(
            "the Ironic deploy backend needs settings.ironic", file=str(site.path),
            key="settings.ironic",
            hint="add at least `ironic: {url: http://ironic.example:6385}` (see docs/ironic.md)",
        )
    return site.settings.ironic


def host_link_gbps(site: Site) -> float:
    """The hosts' provisioning link speed (settings.ironic.host_link_gbps, or its default)."""
    settings = site.settings.ironic
    return settings.host_link_gbps if settings else DEFAULT_HOST_LINK_GBPS


def conductor_group(site: Site, host: Host, settings: IronicSettings) -> str | None:
    """The host's conductor group, placeholders filled from its rack ({rack}, {room}, ...)."""
    template = settings.conductor_group
    if template is None:
        return None
    rack = next((r for r in site.racks if r.name == host.rack), None)
    values = {"rack": host.rack, "site": site.name}
    for key in ("room", "row"):
        if rack is not None and key in rack.location:
            values[key] = str(rack.location[key])
    try:
        group = template.format(**values)
    except KeyError as exc:
        raise InventoryError(
            f"settings.ironic.conductor_group {template!r}: rack {host.rack!r} has no "
            f"location {exc.args[0]!r}", file=str(site.path), key="settings.ironic.conductor_group",
            hint=f"add `location: {{{exc.args[0]}: ...}}` to rack {host.rack}",
        ) from None
    return group.lower()  # Ironic stores conductor groups in lower case


def open_client(site: Site, settings: IronicSettings,
                sleep: Callable[[float], None] | None = None) -> IronicClient:
    """An API client with the site's endpoint, microversion, TLS and credentials."""
    verify: bool | str = settings.verify_tls
    if settings.verify_tls and settings.ca_bundle:
        verify = str(site.resolve_path(settings.ca_bundle))
    auth = settings.auth
    basic = None
    token = None
    password = None
    where = f"settings.ironic.auth in {site.path}"
    if auth.type == "http_basic":
        assert auth.password is not None and auth.username is not None  # the model checked
        password = resolve_secret(site, auth.password, where)
        basic = requests.auth.HTTPBasicAuth(auth.username, password.reveal())
    elif auth.type == "keystone_token":
        assert auth.token is not None
        token = resolve_secret(site, auth.token, where)
    client = IronicClient(
        settings.url, microversion=settings.microversion, auth=basic, token=token,
        timeout_s=settings.http_timeout_s, retries=settings.retries, verify_tls=verify,
        proxy=settings.proxy,
        **({"sleep": sleep} if sleep else {}),
    )
    if password is not None:
        client.remember_secret(password.reveal())
    return client
