"""The MAAS backend's connection to a region: the site and its settings, the API client, the
user the key belongs to, and the tags the backend manages (profile-<name>, rack-<name>).

The backend is built in lifecycle layers, each a class over the one before: this session,
waiting.py (polling MAAS until a machine gets somewhere), machines.py (finding, enlisting and
reconciling machines), commission.py (commissioning and setting up a Ready machine),
planner.py (the dry run) and backend.py (the DeployBackend interface: prepare, deploy,
release, close).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from netaddr import IPNetwork

from provisioner.deploy.base import DeployRequest
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.errors import MAASNotReady
from provisioner.deploy.maas.poller import StatePoller
from provisioner.deploy.maas.settings import MAASSettings, maas_settings, resolve_api_key
from provisioner.exceptions import DeployError

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Site

log = logging.getLogger("provisioner.deploy.maas.backend")

_TAG_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def tag_name(prefix: str, kind: str, value: str) -> str:
    """A MAAS tag name (letters, digits, ``-`` and ``_``), e.g. ``rack-r01``."""
    return _TAG_BAD.sub("_", f"{prefix}{kind}-{value}")


class MAASSession:
    """What every part of the backend shares: the site, settings, client and caches, and the
    checks of the region itself."""

    def __init__(
        self,
        site: Site | None = None,
        *,
        client: MAASClient | None = None,
        settings: MAASSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._site = site
        self._client = client
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._user: str | None = None
        self._known_tags: set[str] = set()
        self._state_poller: StatePoller | None = None
        self._lock = threading.Lock()

    def _connect(self, site: Site | None = None) -> tuple[MAASClient, MAASSettings, Site]:
        with self._lock:
            if site is not None:
                self._site = site
            if self._site is None:
                raise DeployError(
                    "the MAAS backend was used before prepare() was given the site",
                    hint="this is a bug in the caller: call prepare(site, requests) first",
                )
            if self._settings is None:
                self._settings = maas_settings(self._site)
            if self._client is None:
                s = self._settings
                verify: bool | str = s.verify_tls
                if s.verify_tls and s.ca_bundle:
                    verify = str(self._site.resolve_path(s.ca_bundle))
                self._client = MAASClient(
                    s.url,
                    resolve_api_key(self._site, s),
                    timeout_s=s.http_timeout_s,
                    retries=s.retries,
                    verify_tls=verify,
                    proxy=s.proxy,
                )
            return self._client, self._settings, self._site

    def _whoami(self, client: MAASClient) -> str:
        if self._user is None:
            self._user = client.whoami()
        return self._user

    def _host_tags(self, host: Host, settings: MAASSettings) -> list[str]:
        return [
            tag_name(settings.tag_prefix, "profile", host.profile.name),
            tag_name(settings.tag_prefix, "rack", host.rack),
        ]

    def _ensure_tags(self, client: MAASClient, names: Collection[str]) -> None:
        with self._lock:
            missing = [n for n in names if n not in self._known_tags]
            if not missing:
                return
            existing = set(client.tags())
            for n in missing:
                if n not in existing:
                    client.create_tag(n, comment="managed by provisioner")
                    log.info("created MAAS tag %s", n)
                self._known_tags.add(n)

    def _preflight(
        self, client: MAASClient, settings: MAASSettings, requests: Sequence[DeployRequest]
    ) -> None:
        """Refuse to start when every host would fail late (after a long commissioning)."""
        image = f"{settings.osystem}/{settings.distro_series}"
        arch = settings.architecture.split("/")[0]
        resources = client.boot_resources()
        if not any(r.name == image and r.architecture.split("/")[0] == arch for r in resources):
            have = sorted({r.name for r in resources if r.name.count("/") == 1
                           and not r.name.startswith(("grub", "pxelinux"))})
            raise MAASNotReady(
                f"MAAS at {settings.url} has no {arch} image {image} "
                f"(it has: {', '.join(have) or 'none'})",
                hint=f"select {image} for {arch} under Images in MAAS and wait for the sync, "
                "or change settings.maas.distro_series",
            )
        if not settings.static_ip:
            return
        addrs = {r.host.addresses["provisioning"] for r in requests
                 if r.host.addresses.get("provisioning") is not None}
        if not addrs:
            return
        nets = [IPNetwork(s.cidr) for s in client.subnets()]
        outside = sorted(str(a) for a in addrs if not any(a in n for n in nets))
        if outside:
            raise MAASNotReady(
                f"MAAS at {settings.url} has no subnet for the provisioning addresses "
                f"{', '.join(outside[:5])}{' ...' if len(outside) > 5 else ''}",
                hint="create the provisioning subnet in MAAS (same CIDR as "
                "networks.provisioning), or set settings.maas.static_ip: false",
            )
