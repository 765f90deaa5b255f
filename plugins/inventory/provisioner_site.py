"""Ansible inventory plugin: reads a provisioner site file so the host list exists once.

``ansible-playbook -i inventory/<site> ...`` (with this repository's ansible.cfg) sees the
site's hosts, grouped by rack (``rack_<name>``), profile (``profile_<name>``) and site
(``site_<name>``), with their variables. Logic lives in provisioner.inventory.ansible_view.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin

DOCUMENTATION = r"""
name: provisioner_site
short_description: provisioner site files (inventory/<site>/site.yml) as an inventory
description:
  - Loads a provisioner site file, validates it and adds its hosts, groups and variables.
  - Groups are site_<site>, rack_<rack>, profile_<profile> and gpu_hosts.
options: {}
"""


class InventoryModule(BaseInventoryPlugin):  # type: ignore[misc]
    """Adds a provisioner site's hosts to Ansible's inventory."""

    NAME = "provisioner_site"

    def verify_file(self, path: str) -> bool:
        """Accept only provisioner site files."""
        return path.endswith(("/site.yml", "/site.yaml")) and super().verify_file(path)

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        """Load the site and populate Ansible's inventory."""
        super().parse(inventory, loader, path, cache)
        try:
            from provisioner.exceptions import ProvisionerError
            from provisioner.inventory.ansible_view import ansible_inventory
            from provisioner.inventory.loader import load_site
        except ImportError as exc:
            raise AnsibleParserError(
                f"provisioner is not importable by this Ansible ({exc}); install it in the same "
                "virtual environment as ansible-core"
            ) from exc
        try:
            view = ansible_inventory(load_site(path))
        except ProvisionerError as exc:
            raise AnsibleParserError(str(exc)) from exc
        for gname, g in view["groups"].items():
            self.inventory.add_group(gname)
            for k, v in g["vars"].items():
                self.inventory.set_variable(gname, k, v)
            for h in g["hosts"]:
                self.inventory.add_host(h, group=gname)
        for hname, hv in view["hostvars"].items():
            for k, v in hv.items():
                self.inventory.set_variable(hname, k, v)
