"""The Ironic backend against a real OpenStack Ironic (all-in-one, SQLite, 127.0.0.1) whose
redfish driver talks to a real sushy-emulator over libvirt's test:///default driver.

Three hosts walk through enrol (`provision ironic enroll`, idempotent), out-of-band inspection
compared with the site, provide, deploy (the `ramdisk` interface, iPXE), re-image (`rebuild`)
and release (undeploy); a host whose BMC password is wrong fails with Ironic's own error and
passes once the password file is fixed; in the walk, a deploy that fails (Ironic's first fetch of
the kernel refused) is retried.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.deploy.ironic.client import IronicClient
from provisioner.state import NodeState, StateStore
from provisioner.testing.libvirt_bmc import EmulatedServer, libvirt_test_bmc
from provisioner.testing.redfish_peers import make_tls
from tests.support.ironic_rig import (
    BMC_PASSWORD,
    BMC_USER,
    FileServer,
    host_entry,
    servers,
    start_ironic,
    write_site,
)

pytestmark = pytest.mark.slow
QUIET = ["--skip-configure", "--no-ssh-wait", "--json"]


@dataclass
class Peers:
    ironic: str
    bmc_port: int
    ca: Path
    files: FileServer
    servers: list[EmulatedServer]
    client: IronicClient


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    root = tmp_path_factory.mktemp("ironic-walk")
    tls = make_tls(root / "tls")
    found = servers(4)
    boot = root / "files"
    boot.mkdir(parents=True, exist_ok=True)
    (boot / "vmlinuz").write_bytes(b"kernel " * 1000)
    (boot / "initrd").write_bytes(b"initrd " * 1000)
    files = FileServer(boot)
    with files.running(), libvirt_test_bmc(root / "bmc", found, auth=(BMC_USER, BMC_PASSWORD),
                                           tls=tls) as bmc_url:
        service = start_ironic(root / "ironic", http_root=boot / "httpboot",
                               conductor_group="hall-a",
                               http_url=files.url + "/httpboot")
        try:
            client = IronicClient(service.url, microversion="1.81")
            yield Peers(service.url, int(bmc_url.rsplit(":", 1)[1]), tls.ca, files, found,
                        client)
        finally:
            service.stop()  # before the BMC goes (Ironic's shutdown waits on BMCs it polls)


def ironic_block(peers: Peers, *, inspect: bool = True) -> dict:
    return {
        "inspect": inspect,
        "url": peers.ironic,
        "boot_interface": "ipxe",
        "deploy_interface": "ramdisk",
        "inspect_interface": "redfish",
        "ramdisk": {"kernel_url": f"{peers.files.url}/vmlinuz",
                    "ramdisk_url": f"{peers.files.url}/initrd"},
        "bmc_verify_ca": str(peers.ca),
        "conductor_group": "{room}",
        "poll_interval_s": 1,
        "manage_timeout_s": 120,
        "inspect_timeout_s": 120,
        "provide_timeout_s": 120,
    }


def summary(output: str) -> dict:
    return json.loads(output[output.index("{\n"):])


def invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.output


def test_three_hosts_enrol_inspect_deploy_rebuild_release(peers: Peers, tmp_path: Path,
                                                           state_dir: Path):
    walk = peers.servers[:3]
    site = write_site(tmp_path / "walk", "irwalk", ironic=ironic_block(peers),
                      hosts=[host_entry(s, i + 1, port=peers.bmc_port)
                             for i, s in enumerate(walk)],
                      passwords={"bmc": BMC_PASSWORD})

    code, out, text = invoke("rack", "--site", str(site), "--dry-run", "--json")
    assert code == 0, text
    plan = json.loads(out)["backend"]
    assert plan["backend"] == "ironic" and plan["problems"] == []
    assert [h["state"] for h in plan["hosts"]] == ["absent"] * 3
    assert plan["hosts"][0]["actions"][:3] == [
        f"enrol (redfish, BMC https://127.0.0.1:{peers.bmc_port}, conductor group hall-a)",
        f"port {walk[0].macs[0]} (the only PXE port)", "manage (Ironic checks the BMC)"]
    assert peers.client.find_node(walk[0].name) is None  # a dry run changes nothing

    code, out, text = invoke("ironic", "enroll", "--site", str(site), "--json")
    assert code == 0, text
    first = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert all(h["action"].startswith("enrolled") and h["provision_state"] == "manageable"
               for h in first.values()), first
    code, out, text = invoke("ironic", "enroll", "--site", str(site), "--json")
    assert code == 0, text
    again = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert {h["action"] for h in again.values()} == {"unchanged"}  # idempotent
    assert {h["uuid"] for h in again.values()} == {h["uuid"] for h in first.values()}

    for s in walk:
        node = peers.client.node(s.name)
        assert node["automated_clean"] is False
        assert node["conductor_group"] == "hall-a"
        assert node["properties"]["root_device"] == {"serial": f"s== {s.disk_serials[1]}"}
        assert node["driver_info"]["redfish_password"] == "******"  # Ironic never shows it
        assert node["driver_info"]["redfish_system_id"] == f"/redfish/v1/Systems/{s.uuid}"
        ports = peers.client.ports(node=node["uuid"])
        assert [(p["address"], p["pxe_enabled"]) for p in ports] == [(s.macs[0], True)]

    # Ironic's first fetch of the kernel fails: one host's deploy fails and is retried
    peers.files.refuse["/vmlinuz"] = 1
    code, out, text = invoke("rack", "--site", str(site), *QUIET)
    assert code == 0, text
    data = summary(out)
    assert data["ok"] == 3, data
    for h in data["hosts"]:
        assert {"enrol", "inspect", "provide", "deploy"} <= set(h["phases"]), h
    assert sorted(h["attempts"] for h in data["hosts"]) == [1, 1, 2], data["hosts"]
    retried = next(h["host"] for h in data["hosts"] if h["attempts"] == 2)
    store = StateStore.for_site("irwalk")
    try:
        failed = [e for e in store.events(retried) if e.kind == "deploy.attempt_failed"]
        assert len(failed) == 1, failed
        assert "went to 'deploy failed' during deploy" in failed[0].message
        assert "vmlinuz" in failed[0].message or "404" in failed[0].message, failed[0].message
        for s in walk:
            assert store.get(s.name).state == NodeState.DEPLOYED
            events = [e.message for e in store.events(s.name)]
            assert any("Ironic found 2 NIC(s), 3 disk(s)" in m and "matches our discovery" in m
                       for m in events), events
            node = peers.client.node(s.name)
            assert node["provision_state"] == "active"
            # inspection added the data NIC's port; only the provisioning MAC PXE boots
            pxe = {p["address"]: p["pxe_enabled"] for p in peers.client.ports(node=node["uuid"])}
            assert pxe == {s.macs[0]: True, s.macs[1]: False}
    finally:
        store.close()

    code, out, text = invoke("reimage", walk[0].name, "--site", str(site), "--dry-run",
                             "--json")
    assert code == 0, text
    assert json.loads(out)["backend"]["hosts"][0]["actions"] == ["rebuild (root disk only)"]

    code, out, text = invoke("reimage", walk[0].name, "--site", str(site), "--yes", *QUIET)
    assert code == 0, text
    store = StateStore.for_site("irwalk")
    try:
        events = [e.message for e in store.events(walk[0].name, limit=30)]
        assert any("rebuild (root disk only)" in m for m in events), events
    finally:
        store.close()
    assert peers.client.node(walk[0].name)["provision_state"] == "active"

    code, out, text = invoke("ironic", "release", walk[1].name, "--site", str(site), "--yes",
                             "--json")
    assert code == 0, text
    assert json.loads(out)["hosts"] == [{"host": walk[1].name, "result": "undeployed",
                                         "ok": True}]
    code, out, text = invoke("ironic", "nodes", "--site", str(site), "--json")
    states = {n["host"]: n["provision_state"] for n in json.loads(out)["nodes"]}
    assert states == {walk[0].name: "active", walk[1].name: "available",
                      walk[2].name: "active"}

    # the BMC password went to Ironic's driver_info only: not into our state, events or output
    db = b"".join(p.read_bytes() for p in state_dir.rglob("*") if p.is_file())
    assert BMC_PASSWORD.encode() not in db
    assert BMC_PASSWORD not in text


def test_wrong_bmc_password_fails_with_ironics_reason_then_recovers(
        peers: Peers, tmp_path: Path, state_dir: Path):
    server = peers.servers[3]
    site = write_site(tmp_path / "badpw", "irbadpw", ironic=ironic_block(peers, inspect=False),
                      hosts=[host_entry(server, 1, port=peers.bmc_port)],
                      passwords={"bmc": "not-the-password"})
    code, out, text = invoke("rack", "--site", str(site), *QUIET)
    assert code == 3, text
    host = summary(out)["hosts"][0]
    assert host["status"] == "failed" and host["attempts"] == 2
    assert "went to 'enroll' during manage" in host["reason"]
    assert "401" in host["reason"] or "nauthorized" in host["reason"], host["reason"]
    assert "not-the-password" not in text

    (site.parent / "bmc.password").write_text(BMC_PASSWORD + "\n")
    code, out, text = invoke("rack", "--site", str(site), *QUIET)
    assert code == 0, text
    assert peers.client.node(server.name)["provision_state"] == "active"

