"""Ironic's node provision states (ironic.common.states), and how the backend groups them."""

from __future__ import annotations

ENROLL = "enroll"
VERIFYING = "verifying"
MANAGEABLE = "manageable"
INSPECTING = "inspecting"
INSPECT_WAIT = "inspect wait"
INSPECT_FAILED = "inspect failed"
CLEANING = "cleaning"
CLEAN_WAIT = "clean wait"
CLEAN_FAILED = "clean failed"
CLEAN_HOLD = "clean hold"
AVAILABLE = "available"
DEPLOYING = "deploying"
DEPLOY_WAIT = "wait call-back"
DEPLOY_HOLD = "deploy hold"
DEPLOY_FAILED = "deploy failed"
ACTIVE = "active"
DELETING = "deleting"
ERROR = "error"  # an undeploy that failed
ADOPTING = "adopting"
ADOPT_FAILED = "adopt failed"
RESCUE = "rescue"
SERVICE = "service"

# The conductor is working on the node and moves it on by itself.
BUSY = frozenset({
    VERIFYING, INSPECTING, INSPECT_WAIT, CLEANING, CLEAN_WAIT, DEPLOYING, DEPLOY_WAIT,
    DELETING, ADOPTING, "rescuing", "rescue wait", "unrescuing", "servicing", "service wait",
})
# Where a wait for something else ends: the operation failed; last_error says why.
FAILED = frozenset({
    INSPECT_FAILED, CLEAN_FAILED, DEPLOY_FAILED, ERROR, ADOPT_FAILED, "rescue failed",
    "unrescue failed", "service failed",
})
# States the backend refuses to act on: a person is holding or using the node.
HANDS_OFF = frozenset({
    CLEAN_HOLD, DEPLOY_HOLD, RESCUE, "rescuing", "rescue wait", "rescue failed",
    "unrescuing", "unrescue failed", SERVICE, "servicing", "service wait", "service failed",
    "service hold",
})
