"""The node state store: states, allowed transitions, and the SQLite file that keeps them."""

from provisioner.state.states import DONE_STATES, TRANSITIONS, NodeState, allowed
from provisioner.state.store import Event, HealthRun, HostRecord, StateStore, default_state_dir

__all__ = [
    "DONE_STATES",
    "TRANSITIONS",
    "Event",
    "HealthRun",
    "HostRecord",
    "NodeState",
    "StateStore",
    "allowed",
    "default_state_dir",
]
