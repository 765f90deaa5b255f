"""What a deploy request tells a backend beyond the provisioning MAC: typed, no free-form dict."""

from __future__ import annotations

import dataclasses

from provisioner.deploy.base import DeployRequest
from provisioner.inventory.model import Host


def test_the_system_id_is_the_last_segment_of_the_system_path():
    req = DeployRequest(host=None, mac="b8:3f:d2:10:00:03",  # type: ignore[arg-type]
                        system_path="/redfish/v1/Systems/System.Embedded.1/")
    assert req.system_id == "System.Embedded.1"
    assert DeployRequest(host=None, mac="").system_id is None  # type: ignore[arg-type]


def test_a_request_has_no_free_form_extra():
    names = {f.name for f in dataclasses.fields(DeployRequest)}
    assert "extra" not in names
    assert {"macs", "system_path", "bmc_vendor", "user_data"} <= names
    assert DeployRequest.__annotations__["host"] in ("Host", Host)
