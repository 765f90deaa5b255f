"""Node states and the transitions allowed between them: the one table that says so."""

from __future__ import annotations

from enum import StrEnum


class NodeState(StrEnum):
    """Where a host stands in its life cycle."""

    ENROLLED = "enrolled"  # in the inventory, nothing known yet
    DISCOVERED = "discovered"  # its BMC was read: MACs, serials, disks
    DEPLOYING = "deploying"  # an OS install is under way
    DEPLOYED = "deployed"  # the OS runs from disk and answers SSH
    CONFIGURED = "configured"  # site.yml ran
    VALIDATED = "validated"  # health checks passed
    FAILED = "failed"  # something failed; `reason` says what
    MAINTENANCE = "maintenance"  # taken out by a person; nothing touches it without --force


S = NodeState

# From each state, the states a host may move to. Re-entering the same state is listed where it
# is meaningful (a re-discovery, a retry of a deploy, a new health run).
TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    S.ENROLLED: frozenset({S.ENROLLED, S.DISCOVERED, S.FAILED, S.MAINTENANCE}),
    S.DISCOVERED: frozenset({S.DISCOVERED, S.DEPLOYING, S.FAILED, S.MAINTENANCE}),
    S.DEPLOYING: frozenset({S.DEPLOYING, S.DEPLOYED, S.FAILED, S.MAINTENANCE}),
    S.DEPLOYED: frozenset({S.DEPLOYING, S.CONFIGURED, S.FAILED, S.MAINTENANCE}),
    S.CONFIGURED: frozenset({S.DEPLOYING, S.CONFIGURED, S.VALIDATED, S.FAILED, S.MAINTENANCE}),
    S.VALIDATED: frozenset({S.DEPLOYING, S.CONFIGURED, S.VALIDATED, S.FAILED, S.MAINTENANCE}),
    # configured: site.yml applied on a retry of a host whose configure step had failed
    S.FAILED: frozenset({S.DISCOVERED, S.DEPLOYING, S.CONFIGURED, S.FAILED, S.VALIDATED,
                         S.MAINTENANCE}),
    S.MAINTENANCE: frozenset({S.ENROLLED, S.DISCOVERED, S.MAINTENANCE}),
}

# States in which `provision rack` has nothing left to do for a host.
DONE_STATES = frozenset({S.DEPLOYED, S.CONFIGURED, S.VALIDATED})
# States of a host not (yet) installed: a failed discovery marks it failed; a later state
# keeps its state (a deployed host whose BMC is slow today is not a host to reinstall).
FAILABLE = frozenset({S.ENROLLED, S.DISCOVERED, S.FAILED})
# States in which a host is in use: a reset would interrupt what runs on it.
SERVING = frozenset({S.DEPLOYING, S.DEPLOYED, S.CONFIGURED, S.VALIDATED})


def allowed(src: NodeState, dst: NodeState) -> bool:
    """Whether a host may move from ``src`` to ``dst`` without --force."""
    return dst in TRANSITIONS[src]
