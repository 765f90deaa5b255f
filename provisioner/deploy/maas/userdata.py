"""The cloud-init user-data passed to MAAS's deploy: the site's SSH user and keys."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Site


def user_data(site: Site, host: Host) -> str:
    """A ``#cloud-config`` document creating the site's SSH user with its keys.

    MAAS itself configures the apt proxy, NTP and DNS from its own settings (docs/maas.md),
    so only what MAAS does not know goes here.
    """
    s = site.settings
    doc: dict[str, Any] = {
        "users": [
            "default",
            {
                "name": s.ssh_user,
                "groups": ["adm", "sudo"],
                "shell": "/bin/bash",
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "lock_passwd": True,
                "ssh_authorized_keys": list(s.ssh_authorized_keys),
            },
        ],
        "write_files": [
            {
                "path": "/etc/provisioner/host.yml",
                "permissions": "0644",
                "content": yaml.safe_dump(
                    {"site": site.name, "host": host.name, "rack": host.rack, "u": host.u,
                     "profile": host.profile.name},
                    sort_keys=True,
                ),
            }
        ],
    }
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False)


def encode(text: str) -> str:
    """MAAS takes user_data base64-encoded."""
    return base64.b64encode(text.encode("utf-8")).decode("ascii")
