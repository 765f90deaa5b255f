"""The node state store: states, allowed transitions, and the SQLite file that keeps them."""

from provisioner.state.locks import Lease, SiteLocks
from provisioner.state.states import (
    DONE_STATES,
    FAILABLE,
    SERVING,
    TRANSITIONS,
    NodeState,
    allowed,
)
from provisioner.state.steps import Step
from provisioner.state.store import (
    Event,
    HealthRun,
    HostRecord,
    PruneReport,
    StateStore,
    default_state_dir,
)

__all__ = [
    "DONE_STATES",
    "FAILABLE",
    "SERVING",
    "TRANSITIONS",
    "Event",
    "HealthRun",
    "HostRecord",
    "Lease",
    "NodeState",
    "PruneReport",
    "SiteLocks",
    "StateStore",
    "Step",
    "allowed",
    "default_state_dir",
]
