"""MAAS node statuses, with the codes and names MAAS uses (maasserver.enum.NODE_STATUS)."""

from __future__ import annotations

from enum import IntEnum


class NodeStatus(IntEnum):
    """The ``status`` field of a MAAS machine; ``status_name`` is :attr:`label`."""

    NEW = 0
    COMMISSIONING = 1
    FAILED_COMMISSIONING = 2
    MISSING = 3
    READY = 4
    RESERVED = 5
    DEPLOYED = 6
    RETIRED = 7
    BROKEN = 8
    DEPLOYING = 9
    ALLOCATED = 10
    FAILED_DEPLOYMENT = 11
    RELEASING = 12
    FAILED_RELEASING = 13
    DISK_ERASING = 14
    FAILED_DISK_ERASING = 15
    RESCUE_MODE = 16
    ENTERING_RESCUE_MODE = 17
    FAILED_ENTERING_RESCUE_MODE = 18
    EXITING_RESCUE_MODE = 19
    FAILED_EXITING_RESCUE_MODE = 20
    TESTING = 21
    FAILED_TESTING = 22

    @property
    def label(self) -> str:
        """The human name MAAS shows (``status_name``)."""
        return LABELS[self]


LABELS: dict[NodeStatus, str] = {
    NodeStatus.NEW: "New",
    NodeStatus.COMMISSIONING: "Commissioning",
    NodeStatus.FAILED_COMMISSIONING: "Failed commissioning",
    NodeStatus.MISSING: "Missing",
    NodeStatus.READY: "Ready",
    NodeStatus.RESERVED: "Reserved",
    NodeStatus.DEPLOYED: "Deployed",
    NodeStatus.RETIRED: "Retired",
    NodeStatus.BROKEN: "Broken",
    NodeStatus.DEPLOYING: "Deploying",
    NodeStatus.ALLOCATED: "Allocated",
    NodeStatus.FAILED_DEPLOYMENT: "Failed deployment",
    NodeStatus.RELEASING: "Releasing",
    NodeStatus.FAILED_RELEASING: "Releasing failed",
    NodeStatus.DISK_ERASING: "Disk erasing",
    NodeStatus.FAILED_DISK_ERASING: "Failed disk erasing",
    NodeStatus.RESCUE_MODE: "Rescue mode",
    NodeStatus.ENTERING_RESCUE_MODE: "Entering rescue mode",
    NodeStatus.FAILED_ENTERING_RESCUE_MODE: "Failed to enter rescue mode",
    NodeStatus.EXITING_RESCUE_MODE: "Exiting rescue mode",
    NodeStatus.FAILED_EXITING_RESCUE_MODE: "Failed to exit rescue mode",
    NodeStatus.TESTING: "Testing",
    NodeStatus.FAILED_TESTING: "Failed testing",
}

# States in which MAAS is working on the machine and will move it on by itself.
BUSY = frozenset(
    {
        NodeStatus.COMMISSIONING,
        NodeStatus.DEPLOYING,
        NodeStatus.RELEASING,
        NodeStatus.DISK_ERASING,
        NodeStatus.TESTING,
        NodeStatus.ENTERING_RESCUE_MODE,
        NodeStatus.EXITING_RESCUE_MODE,
    }
)

FAILED = frozenset(
    {
        NodeStatus.FAILED_COMMISSIONING,
        NodeStatus.FAILED_DEPLOYMENT,
        NodeStatus.FAILED_RELEASING,
        NodeStatus.FAILED_DISK_ERASING,
        NodeStatus.FAILED_ENTERING_RESCUE_MODE,
        NodeStatus.FAILED_EXITING_RESCUE_MODE,
        NodeStatus.FAILED_TESTING,
    }
)

# What MAAS's release operation accepts (RELEASABLE_STATUSES in maasserver.models.node).
RELEASABLE = frozenset(
    {
        NodeStatus.ALLOCATED,
        NodeStatus.RESERVED,
        NodeStatus.BROKEN,
        NodeStatus.DEPLOYING,
        NodeStatus.DEPLOYED,
        NodeStatus.FAILED_DEPLOYMENT,
        NodeStatus.FAILED_DISK_ERASING,
        NodeStatus.FAILED_RELEASING,
    }
)

# States from which the backend starts a commissioning itself.
COMMISSION_FROM = frozenset(
    {NodeStatus.NEW, NodeStatus.FAILED_COMMISSIONING, NodeStatus.FAILED_TESTING}
)
# States the backend refuses to act on: a person has to look at the machine in MAAS.
HANDS_OFF = frozenset(
    {
        NodeStatus.BROKEN,
        NodeStatus.MISSING,
        NodeStatus.RETIRED,
        NodeStatus.RESERVED,
        NodeStatus.RESCUE_MODE,
        NodeStatus.ENTERING_RESCUE_MODE,
        NodeStatus.EXITING_RESCUE_MODE,
        NodeStatus.FAILED_ENTERING_RESCUE_MODE,
        NodeStatus.FAILED_EXITING_RESCUE_MODE,
        NodeStatus.FAILED_RELEASING,
        NodeStatus.FAILED_DISK_ERASING,
    }
)
