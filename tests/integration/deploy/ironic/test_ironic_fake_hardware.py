"""Many hosts at once through a real OpenStack Ironic (all-in-one, SQLite, 127.0.0.1) with its
`fake-hardware` hardware type (no BMC behind it): the rack runner's waves and states over the
Ironic backend, every waiting host read from one node list per poll, and a host a person put in
maintenance failing with the reason they gave; and a site moving from the embedded backend
(`provision ironic enroll` from the MACs our discovery stored, twice: idempotent)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.deploy.base import DeployRequest
from provisioner.deploy.ironic.backend import IronicBackend
from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.service import IronicService
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore
from provisioner.workflow.rack import HostResult, RackOptions, RackRunner
from tests.support.ironic_rig import start_ironic, write_site

pytestmark = pytest.mark.slow
HOSTS = 24


@pytest.fixture(scope="module")
def ironic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IronicService]:
    service = start_ironic(tmp_path_factory.mktemp("ironic-fake") / "ironic",
                           sync_power_state_interval=-1)
    try:
        yield service
    finally:
        service.stop()


def ironic_client(service: IronicService) -> IronicClient:
    return IronicClient(service.url, microversion="1.81")


class Quiet:
    def phase(self, host: str, phase: str, message: str) -> None:
        pass

    def finished(self, result: HostResult) -> None:
        pass


def fake_site(tmp_path: Path, url: str) -> Path:
    hosts = [{"u": i, "name": f"fk{i:02d}", "provisioning_mac": f"52:54:00:2f:00:{i:02x}",
              "bmc": {"address": f"198.19.99.{i}", "credentials": "bmc"}}
             for i in range(1, HOSTS + 1)]
    block = {"url": url, "driver": "fake-hardware", "boot_interface": "fake",
             "deploy_interface": "fake", "inspect_interface": "fake", "inspect": False,
             "interfaces": {"power": "fake", "management": "fake"},
             "poll_interval_s": 0.5}
    return write_site(tmp_path / "fake", "irfake", ironic=block, hosts=hosts,
                      passwords={"bmc": "fake-bmc-pw"})


@pytest.mark.usefixtures("state_dir")
def test_many_hosts_one_list_call_per_poll_and_a_host_in_maintenance(ironic, tmp_path):
    site = load_site(fake_site(tmp_path, ironic.url))
    backend = IronicBackend()
    backend.prepare(site, [])
    held = site.host("fk07")
    uuid = backend.enrol(DeployRequest(host=held, mac=held.provisioning_mac or "")).uuid
    backend.client.set_maintenance(uuid, "fan 3 failed (ticket 1234)")  # as a person would

    store = StateStore.for_site(site)
    try:
        runner = RackRunner(site, store, backend, open_bmc=None, reporter=Quiet(),
                            options=RackOptions(configure=False, wait_ssh=False,
                                                max_parallel=HOSTS))
        result = runner.run(site.hosts)
        states = {h.name: store.get(h.name).state for h in site.hosts}
    finally:
        store.close()

    assert result.wave.size == HOSTS
    failed = {r.host: r for r in result.failed}
    assert list(failed) == ["fk07"]
    assert "in maintenance: fan 3 failed (ticket 1234)" in failed["fk07"].reason
    assert failed["fk07"].attempts == 2  # retried (deploy_retries), still held
    assert states.pop("fk07") == NodeState.FAILED
    assert set(states.values()) == {NodeState.DEPLOYED}
    for r in result.ok:
        assert {"enrol", "manage", "provide", "deploy"} <= set(r.phases), r

    calls = backend.client.calls_by
    poller = backend.poller
    # every wait read the whole list: the list requests are the poller's own
    assert calls["GET /v1/nodes"] == poller.pages == poller.polls
    # each list call answered many waiting hosts at once (one call per poll, not per host)
    assert poller.reads >= 4 * poller.polls, (poller.reads, poller.polls)
    # and no wait read a single node: the per-node reads are enrolment's (by name, by the
    # MAC's port, then the node: two or three per attempt), whatever the waits' length
    attempts = sum(r.attempts for r in result.results) + 1  # + fk07's enrolment above
    assert calls["GET /v1/nodes/{id}"] <= 3 * attempts


@pytest.mark.usefixtures("state_dir")
def test_a_site_moves_from_the_embedded_backend_by_enrolling_twice(ironic, tmp_path):
    """A site the embedded backend installed: no MAC pinned in the site file, the ones our
    discovery found in the state. `provision ironic enroll` enrols every host from those
    MACs; a second run changes nothing; our own states stay as they were."""
    from typer.testing import CliRunner

    from provisioner.cli.main import app

    macs = {f"mv{i:02d}": f"52:54:00:2e:00:{i:02x}" for i in range(1, 5)}
    hosts = [{"u": i, "name": name, "bmc": {"address": f"198.19.98.{i}", "credentials": "bmc"}}
             for i, name in enumerate(macs, start=1)]
    block = {"url": ironic.url, "driver": "fake-hardware", "boot_interface": "fake",
             "deploy_interface": "fake", "inspect_interface": "fake", "inspect": False,
             "interfaces": {"power": "fake", "management": "fake"}, "poll_interval_s": 0.5}
    path = write_site(tmp_path / "moved", "irmoved", ironic=block, hosts=hosts,
                      passwords={"bmc": "fake-bmc-pw"})
    site = load_site(path)
    store = StateStore.for_site(site)
    try:
        store.ensure_hosts([h.name for h in site.hosts])
        for name, mac in list(macs.items())[:3]:  # mv04 was never discovered
            store.record_discovery(name, {"provisioning_mac": mac.upper(),
                                          "provisioning_mac_source": "discovery"})
        for name in ("mv01", "mv02"):  # installed by the embedded backend
            store.transition(name, NodeState.DEPLOYED, reason="installed, SSH answers",
                             force=True)
        before = {h.name: store.get(h.name).state for h in site.hosts}
    finally:
        store.close()

    runs = []
    for _ in range(2):
        res = CliRunner().invoke(app, ["ironic", "enroll", "--site", str(path), "--json"])
        assert res.exit_code != 0, res.output  # mv04: no MAC known, said so, the rest enrolled
        runs.append({h["host"]: h for h in json.loads(res.stdout)["hosts"]})
    first, again = runs
    assert "no provisioning MAC known" in first["mv04"]["error"]
    assert not first["mv04"]["ok"] and not again["mv04"]["ok"]
    for name in ("mv01", "mv02", "mv03"):
        assert first[name]["action"] == "enrolled", first[name]
        assert first[name]["provision_state"] == "manageable"
        assert again[name]["action"] == "unchanged", again[name]  # idempotent
        assert again[name]["uuid"] == first[name]["uuid"]
        ports = ironic_client(ironic).ports(node=first[name]["uuid"])
        assert [(p["address"], p["pxe_enabled"]) for p in ports] == [(macs[name], True)]

    store = StateStore.for_site(site)
    try:
        assert {h.name: store.get(h.name).state for h in site.hosts} == before
    finally:
        store.close()
