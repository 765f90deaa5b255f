"""A 2xx GET answer that is only a Redfish error object (written by the project after the
answers captures hold: csm EX235n, ilo-redfish-emulator DL380a Gen12)."""

from __future__ import annotations

import pytest

from provisioner.redfish.client import _refuse_error_answer
from provisioner.redfish.errors import BMCBadResponse, BMCNotFound


def _error(*ids: str) -> dict:
    return {"error": {"code": "iLO.0.10.ExtendedInfo", "message": "See ExtendedInfo",
                      "@Message.ExtendedInfo": [{"MessageId": i} for i in ids]}}


def test_resource_missing_reads_as_not_found():
    with pytest.raises(BMCNotFound, match="/redfish/v1/Chassis/1/NetworkAdapters/8"):
        _refuse_error_answer(_error("Base.1.18.ResourceMissingAtURI"), "bmc1",
                             "/redfish/v1/Chassis/1/NetworkAdapters/8")


def test_other_errors_are_bad_responses():
    with pytest.raises(BMCBadResponse, match="InternalError"):
        _refuse_error_answer(_error("Base.1.8.InternalError"), "bmc1", "/redfish/v1/Systems/1")


def test_success_only_and_resources_pass():
    _refuse_error_answer(_error("Base.1.4.Success"), "bmc1", "/redfish/v1/Systems/1")
    _refuse_error_answer({"@odata.id": "/redfish/v1/Systems/1", "error": {}}, "bmc1", "/x")
    _refuse_error_answer({"Id": "1", "Members": []}, "bmc1", "/x")
