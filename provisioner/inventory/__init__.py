"""The rack inventory as code: site model, loader with file:line errors, address plan."""

from provisioner.inventory.loader import find_site_file, load_site
from provisioner.inventory.model import (
    BMCRef,
    Host,
    HostProfile,
    Network,
    NicRule,
    Rack,
    RootDiskHint,
    Site,
)

__all__ = [
    "BMCRef",
    "Host",
    "HostProfile",
    "Network",
    "NicRule",
    "Rack",
    "RootDiskHint",
    "Site",
    "find_site_file",
    "load_site",
]
