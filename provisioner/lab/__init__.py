"""The virtual lab: an emulated rack (VMs, Redfish BMCs, networks) on one machine.

Lifecycle (up/down/status) lives in :mod:`provisioner.lab.lab`; this package root only
re-exports the light helpers other areas use, so importing it stays cheap.
"""

from __future__ import annotations

from provisioner.lab.netns import (
    in_netns,
    netns_exists,
    popen_in_netns,
    require_lab,
    run_in_netns,
)
from provisioner.lab.plan import LabHost, LabPlan, lab_netns

__all__ = [
    "LabHost",
    "LabPlan",
    "in_netns",
    "lab_netns",
    "netns_exists",
    "popen_in_netns",
    "require_lab",
    "run_in_netns",
]
