"""Recognising iDRAC job-queue answers from their Redfish extended messages."""

from __future__ import annotations

from provisioner.bmc.vendors.dell import _is_already_committed, _is_job_running
from provisioner.redfish.errors import RedfishError, parse_extended_info

# Bodies as iDRAC 9 sends them (HTTP 400).
COMMITTED = {"error": {"@Message.ExtendedInfo": [{
    "Message": "Pending configuration values are already committed, unable to perform "
               "another set operation.",
    "MessageId": "IDRAC.2.8.SYS011", "Resolution": "Wait for the scheduled job to complete "
    "or delete the configuration jobs before attempting more set attribute operations.",
    "Severity": "Warning"}], "code": "Base.1.12.GeneralError",
    "message": "A general error has occurred. See ExtendedInfo for more information"}}
RUNNING = {"error": {"@Message.ExtendedInfo": [{
    "Message": "Unable to create a configuration job because a configuration job is already "
               "in progress.",
    "MessageId": "IDRAC.2.8.LC068", "Severity": "Warning"}],
    "code": "Base.1.12.GeneralError", "message": "A general error has occurred."}}
OTHER = {"error": {"@Message.ExtendedInfo": [{
    "Message": "The value Enabledd for the property PxeDev1EnDis is not in the list of "
               "acceptable values.", "MessageId": "Base.1.12.PropertyValueNotInList"}]}}


def _err(body: dict) -> RedfishError:
    return RedfishError("PATCH was refused", bmc="idrac", status=400,
                        extended=parse_extended_info(body))


def test_committed_and_running_are_recognised():
    assert _is_already_committed(_err(COMMITTED))
    assert not _is_job_running(_err(COMMITTED))
    assert _is_job_running(_err(RUNNING))
    assert not _is_already_committed(_err(OTHER)) and not _is_job_running(_err(OTHER))
