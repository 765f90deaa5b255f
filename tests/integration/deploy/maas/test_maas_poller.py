"""Waiting on many machines costs one MAAS read per interval (against the MAAS contract server,
which reproduces MAAS API 2.0's `GET /machines/?id=...` filter; it is not MAAS)."""

from __future__ import annotations

import pytest
from maas_contract_server import COMMISSIONING, MAASContractServer

from provisioner.deploy.maas.apikey import parse_api_key
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.errors import MAASNotFound
from provisioner.deploy.maas.poller import StatePoller


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def poller_and_ids(maas_server: MAASContractServer):
    maas_server.commission_s = 3600
    client = MAASClient(maas_server.url, parse_api_key(maas_server.api_key))
    ids = [maas_server.add_machine(f"h{i:02d}", [f"aa:bb:cc:00:01:{i:02x}"],
                                   status=COMMISSIONING) for i in range(20)]
    clock = Clock()
    return StatePoller(client, max_age_s=9.0, clock=clock), ids, clock


def test_one_read_per_interval_for_all_waiting_machines(poller_and_ids, maas_server):
    poller, ids, clock = poller_and_ids
    for sid in ids:  # each machine starts being waited on
        assert poller.read(sid).system_id == sid
    assert poller.requests == 20
    for _ in range(4):  # then each round of polls costs one request for all twenty
        clock.now += 10
        before = poller.requests
        states = {poller.read(sid).status_name for sid in ids}
        assert states == {"Commissioning"}
        assert poller.requests == before + 1
    assert maas_server.machine_reads == 0


def test_fresh_read_after_an_action_skips_the_cache(poller_and_ids, maas_server):
    poller, ids, _clock = poller_and_ids
    poller.read(ids[0])
    maas_server.machines[ids[0]].record.update(status=4, status_name="Ready")
    assert poller.read(ids[0]).status_name == "Commissioning"  # cached, still young
    assert poller.read(ids[0], fresh=True).status_name == "Ready"


def test_machine_deleted_while_waited_on(poller_and_ids, maas_server):
    poller, ids, clock = poller_and_ids
    poller.read(ids[0])
    poller.read(ids[1])
    del maas_server.machines[ids[0]]
    with pytest.raises(MAASNotFound, match="disappeared") as exc:
        poller.read(ids[0], fresh=True)
    assert exc.value.system_id == ids[0]
    poller.forget(ids[1])
    clock.now += 10
    assert poller.read(ids[2]).system_id == ids[2]
