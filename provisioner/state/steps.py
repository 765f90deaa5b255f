"""The steps of a host's install that a run records as it finishes them, so that the next run
continues from the step after the last finished one instead of starting over."""

from __future__ import annotations

from enum import StrEnum

from provisioner.state.states import NodeState


class Step(StrEnum):
    """The last step a host finished since its current install began."""

    NONE = ""  # nothing of an install yet (or an install under way: it restarts whole)
    INSTALLED = "installed"  # the OS is on disk and answered SSH
    CONFIGURED = "configured"  # site.yml applied after that install


def step_after(state: NodeState, step: Step) -> Step:
    """The recorded step once a host enters ``state``: a new install (or a blank host) starts
    from nothing; reaching deployed or configured finishes that step; other states keep it."""
    if state in (NodeState.ENROLLED, NodeState.DEPLOYING):
        return Step.NONE
    if state is NodeState.DEPLOYED:
        return Step.INSTALLED
    if state is NodeState.CONFIGURED:
        return Step.CONFIGURED
    return step
