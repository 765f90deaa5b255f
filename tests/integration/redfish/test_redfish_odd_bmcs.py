"""BMCs that answer oddly, as small mockups written here and served by sushy-static."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.bmc.base import PowerAction
from provisioner.bmc.factory import open_redfish
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.client import ClientOptions, RedfishClient
from provisioner.redfish.errors import (
    BMCBadResponse,
    BMCNotFound,
    BMCUnsupported,
    RedfishError,
)
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import (
    fake_system,
    sushy_emulator,
    sushy_static,
    write_emulator_config,
)

OPTS = ClientOptions(verify_tls=False, retries=0)


def _doc(root: Path, path: str, doc: object) -> None:
    folder = root / path
    folder.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (folder / "index.json").write_text(text)


@pytest.fixture(scope="module")
def odd(tmp_path_factory) -> Iterator[str]:
    """Two BMC trees side by side: /redfish/v1 with an odd system, and broken bits."""
    root = tmp_path_factory.mktemp("odd")
    _doc(root, "", {"@odata.id": "/redfish/v1/", "Systems": {"@odata.id": "/redfish/v1/Systems"},
                    "RedfishVersion": "1.6.0"})
    _doc(root, "Systems", {"Members": [{"@odata.id": "/redfish/v1/Systems/odd"}]})
    _doc(root, "Systems/odd", {"@odata.id": "/redfish/v1/Systems/odd", "Id": "odd",
                               "PowerState": "Sleeping", "Boot": {}})
    _doc(root, "Empty", {"Members": []})
    _doc(root, "NotJson", "<html>maintenance page</html>")
    _doc(root, "Null", "null")
    with sushy_static(root, root) as url:
        yield url


def test_unknown_power_state_and_missing_reset_action(odd):
    bmc = open_redfish(odd, "u", Secret("p"), OPTS)
    try:
        with pytest.raises(BMCBadResponse, match="unknown PowerState 'Sleeping'"):
            bmc.power_state()
        with pytest.raises(BMCUnsupported, match=r"no ComputerSystem\.Reset action"):
            bmc._reset("On")
        # No allowable values: the standard ResetTypes are assumed, but never PowerCycle.
        with pytest.raises(BMCUnsupported, match="no ResetType for power cycle"):
            bmc._require(PowerAction.CYCLE)
        facts = bmc.discover()  # nothing but the system: still read
        assert facts.power_state == "Sleeping" and facts.nics == []
    finally:
        bmc.close()


def test_non_json_answer_and_empty_systems(odd):
    client = RedfishClient(odd, "u", Secret("p"), OPTS)
    client.login()
    with pytest.raises(BMCBadResponse, match="not JSON"):
        client.get("/redfish/v1/NotJson")
    # A `null` body is JSON: the error says what it is, not "not JSON".
    with pytest.raises(BMCBadResponse, match="a JSON null body where a Redfish resource") as got:
        client.get("/redfish/v1/Null")
    assert "not JSON" not in str(got.value) and got.value.path == "/redfish/v1/Null"
    client.root = {"Systems": {"@odata.id": "/redfish/v1/Empty"}}
    with pytest.raises(BMCNotFound, match="lists no ComputerSystem"):
        RedfishBMC(client).system_path()
    client.close()


def test_refused_patch_carries_status(tmp_path):
    conf = write_emulator_config(tmp_path, [fake_system("1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                                                        "x", ["52:54:00:18:00:0c"])])
    with sushy_emulator(conf) as url:
        client = RedfishClient(url, "u", Secret("p"), OPTS)
        client.login()
        with pytest.raises(RedfishError, match="PATCH was refused") as info:
            client.patch("/redfish/v1/Systems/1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                         {"AssetTag": "rack1"})
        assert info.value.status == 400
        client.close()
