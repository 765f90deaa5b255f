"""Shared by the lab tests: an address slot that no lab on this machine is using."""

from __future__ import annotations

import pytest

from provisioner.exceptions import NotReady
from provisioner.lab import network
from provisioner.lab.plan import MAX_SLOT, LabPlan


def free_slot(netns: str) -> int:
    """The highest free lab slot (people's own labs usually sit in the low ones)."""
    for slot in range(MAX_SLOT, 0, -1):
        try:
            network.check_conflicts(LabPlan(netns=netns, slot=slot))
        except NotReady:
            continue
        return slot
    pytest.skip("every lab address slot is in use on this machine")
