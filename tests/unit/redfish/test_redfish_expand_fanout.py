"""$expand answers are checked before they are trusted; a BMC's reads overlap on a few threads."""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar

import pytest
from pydantic import ValidationError

from provisioner.inventory.spec import RedfishSettings
from provisioner.redfish.errors import BMCDeadline
from provisioner.redfish.expand import Expanded, check_expanded, expand_query
from provisioner.redfish.fanout import Fanout, Gate
from provisioner.redfish.transport import host_deadline

COLL = "/redfish/v1/Chassis"


def root(**expand: object) -> dict[str, object]:
    return {"ProtocolFeaturesSupported": {"ExpandQuery": expand}}


@pytest.mark.parametrize(("features", "query"), [
    ({"ExpandAll": True, "Levels": True, "Links": True, "MaxLevels": 5, "NoLinks": True},
     ".($levels=1)"),
    ({"ExpandAll": False, "Levels": True, "Links": False, "MaxLevels": 1, "NoLinks": True},
     ".($levels=1)"),  # HPE iLO 5
    ({"ExpandAll": True, "Levels": False, "NoLinks": False}, "*"),  # no $levels syntax
    ({"Links": True}, ""),  # "~" expands Links only: never a collection's Members
    ({"NoLinks": True, "Levels": True, "MaxLevels": 0}, "."),
    ({}, ""),
])
def test_expand_query_follows_what_the_service_root_advertises(features, query):
    assert expand_query(root(**features)) == query
    assert expand_query({}) == ""
    assert expand_query({"ProtocolFeaturesSupported": "yes"}) == ""


def member(ident: str, **body: object) -> dict[str, object]:
    return {"@odata.id": f"{COLL}/{ident}", **body}


def test_an_expanded_collection_gives_bodies_and_keeps_bare_members_to_read():
    got = check_expanded({"@odata.id": COLL + "/", "Members@odata.count": 3, "Members": [
        member("a", Id="a"), member("b"), member("c/", Id="c")]}, COLL)
    assert isinstance(got, Expanded)
    assert got.order == [f"{COLL}/a", f"{COLL}/b", f"{COLL}/c/"]
    assert set(got.bodies) == {f"{COLL}/a", f"{COLL}/c"}
    assert got.bare == [f"{COLL}/b"]


@pytest.mark.parametrize(("body", "why"), [
    ({"@odata.id": "/redfish/v1/Systems", "Members": []}, "not the collection"),
    ({"Members": {"a": 1}}, "no Members list"),
    ({"Members": [member("a", Id="a")], "Members@odata.count": 2}, "1 of 2"),
    ({"Members": [member("a", Id="a")], "Members@odata.nextLink": f"{COLL}?$skip=1"},
     "paged"),
    ({"Members": [{"@odata.id": "/redfish/v1/Managers/bmc", "Id": "bmc"}]},
     "not a member of"),
    ({"Members": [{"@odata.id": "/redfish/v1/ChassisX/1", "Id": "1"}]}, "not a member of"),
    ({"Members": [member("a", Id="a"), member("a/", Id="a")]}, "listed twice"),
    ({"Members": ["/redfish/v1/Chassis/a"]}, "not a reference"),
    # AMI (DGX H100): expanded bodies without Id, Name and ChassisType
    ({"Members": [member("a", Id="a"), member("b", Status={"State": "Enabled"})]},
     "without its Id"),
])
def test_an_expanded_answer_that_is_not_the_collection_is_refused(body, why):
    got = check_expanded(body, COLL)
    assert isinstance(got, str) and why in got


def test_a_page_of_members_is_enough_to_look_bodies_up():
    body = {"Members": [member("a", Id="a")], "Members@odata.count": 9,
            "Members@odata.nextLink": f"{COLL}?$skip=1"}
    got = check_expanded(body, COLL, whole=False)
    assert isinstance(got, Expanded) and list(got.bodies) == [f"{COLL}/a"]


def test_fanout_keeps_order_nests_without_deadlock_and_carries_the_deadline():
    fan = Fanout(3)
    var: ContextVar[str] = ContextVar("var", default="unset")
    seen: list[str] = []

    def inner(i: int) -> int:
        seen.append(var.get())
        time.sleep(0.01)
        return i * 10

    def outer(i: int) -> list[int]:
        return fan.map(inner, range(i, i + 4))  # nested on the same three threads

    var.set("host")
    try:
        assert fan.map(outer, range(5)) == [[j * 10 for j in range(i, i + 4)]
                                            for i in range(5)]
    finally:
        fan.close()
    assert seen and set(seen) == {"host"}
    assert threading.active_count() < 20


def test_fanout_raises_the_first_failure_after_the_others_finished():
    fan = Fanout(4)
    done: list[int] = []

    def work(i: int) -> int:
        time.sleep(0.02)
        if i in (2, 5):
            raise ValueError(f"item {i}")
        done.append(i)
        return i

    with pytest.raises(ValueError, match="item 2"):
        fan.map(work, range(8))
    fan.close()
    assert 0 in done


def test_gate_narrows_when_the_bmc_refuses_concurrency_and_waits_within_the_deadline():
    gate = Gate(4)
    with gate.slot("bmc", "/a"), gate.slot("bmc", "/b"), gate.slot("bmc", "/c"):
        assert gate.refused("bmc") is True
        assert gate.width == 1
    with gate.slot("bmc", "/d"):
        assert gate.refused("bmc") is False  # alone: a plain 503, not concurrency
        with host_deadline(0.2), pytest.raises(BMCDeadline) as exc, gate.slot("bmc", "/e"):
            pass
    assert "/e" in str(exc.value) and "discovery_deadline_s" in str(exc.value)


def test_connections_setting_is_validated():
    assert RedfishSettings().connections == 4
    assert RedfishSettings().timeout_s == 30
    assert RedfishSettings(connections=1).connections == 1
    for bad in (0, 17):
        with pytest.raises(ValidationError, match="connections"):
            RedfishSettings(connections=bad)


def test_a_wide_fan_out_reads_each_bmc_with_fewer_connections():
    from provisioner.workflow.discover import MAX_CONNECTIONS, connections_per_bmc

    assert connections_per_bmc(4, 1) == 4
    assert connections_per_bmc(4, 512) == 4
    assert connections_per_bmc(4, 1024) * 1024 <= MAX_CONNECTIONS
    assert connections_per_bmc(4, 100_000) == 1
