"""`provision firmware update` on a blade BMC serving two nodes, and after a run killed in
the middle of an update (#32 items 2 and 11), against the stand-in UpdateService BMC
(provisioner/testing/update_peer.py, written from the DMTF schema) behind TLS."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore
from provisioner.testing.update_peer import UpdatePeer, firmware_rack_site, image_bytes
from tests.support.waiting import wait_until

USER, PASSWORD = "admin", "blade-Pa55"
BLADE = {"BMC": {"Name": "BMC", "Version": "1.0"},
         "Node0.BIOS": {"Name": "Node0.BIOS", "Version": "1.0"},
         "Node1.BIOS": {"Name": "Node1.BIOS", "Version": "1.0"}}


def _image(images: Path, component: str, version: str) -> str:
    path = images / f"{component}-{version}.bin"
    path.write_bytes(image_bytes(component, version))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return f'{{url: "{path}", sha256: "{sha}"}}'


def _profiles(images: Path) -> str:
    # One glob for the BIOS, as an operator writes it: the inventory lists both nodes' BIOS.
    bmc = _image(images, "BMC", "2.0")
    return "profiles:\n" + "".join(
        f"  {node}:\n    provisioning_nic: {{rule: first-onboard-up}}\n    firmware:\n"
        f"      - {{component: \"*BIOS\", version: \"2.0\", "
        f"image: {_image(images, f'{system}.BIOS', '2.0')}}}\n"
        f"      - {{component: BMC, version: \"2.0\", image: {bmc}}}\n"
        for node, system in (("node0", "Node0"), ("node1", "Node1")))


@pytest.fixture
def blade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, UpdatePeer]]:
    monkeypatch.setenv("FW_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    with ExitStack() as stack:
        site, peers = firmware_rack_site(
            stack, tmp_path, "blade", USER, PASSWORD,
            {"chassis": (BLADE, {}, {"systems": ("Node0", "Node1")})},
            {"node0": "node0", "node1": "node1"}, _profiles,
            nodes={"chassis": {"node0": "Node0", "node1": "Node1"}})
        yield site, peers["chassis"]


def _update(site: Path, *hosts: str, timeout: str = "20") -> tuple[int, dict[str, dict]]:
    result = CliRunner().invoke(app, ["firmware", "update", *hosts, "--site", str(site),
                                      "--yes", "--json", "--timeout", timeout])
    return result.exit_code, {r["host"]: r for r in json.loads(result.stdout or "[]")}


def _targets(peer: UpdatePeer) -> list[str]:
    return [t.target for t in peer.tasks.values()]


def test_one_node_never_flashes_the_other_nodes_bios_nor_alone_the_shared_bmc(blade):
    site, peer = blade
    peer.modes["Node0.BIOS"] = "staged"  # its new image runs after node0's reset
    code, res = _update(site, "node0")
    assert code == 3 and res["node0"]["reason"] == "blocked", res
    assert res["node0"]["error"].startswith("updated Node0.BIOS; not updated: BMC: shared by "
                                            "node0, node1 on BMC 127.0.0.1:")
    # node0's own BIOS only: never Node1.BIOS, and the BMC both nodes share is not flashed
    # while node1 is not part of the run.
    assert _targets(peer) == ["Node0.BIOS"]
    assert peer.inventory["Node1.BIOS"]["Version"] == "1.0"
    assert peer.inventory["BMC"]["Version"] == "1.0"
    assert peer.reset_systems == ["Node0"]  # the reset is node0's, never node1's
    plan = CliRunner().invoke(app, ["firmware", "update", "node0", "--site", str(site),
                                    "--dry-run", "--json"])
    blocked = json.loads(plan.stdout)["plans"]["node0"]["blocked"]
    assert any("shared by node0, node1" in b and "node1 is not" in b for b in blocked), blocked


def test_both_nodes_flash_the_shared_bmc_once_and_both_histories_say_so(blade):
    site, peer = blade
    code, res = _update(site, "node0", "node1")
    assert code == 0, res
    assert _targets(peer).count("BMC") == 1  # not once per node
    assert sorted(_targets(peer)) == ["BMC", "Node0.BIOS", "Node1.BIOS"]
    assert _targets(peer)[0] == "BMC"  # the shared BMC before either node's own
    store = StateStore.for_site(load_site(site))
    for node in ("node0", "node1"):
        messages = [e.message for e in store.events(node) if e.kind == "firmware"]
        assert any(m.startswith("BMC: 1.0 -> 2.0") for m in messages), (node, messages)


def test_a_node_in_use_keeps_the_shared_bmc_from_being_flashed(blade):
    site, peer = blade
    store = StateStore.for_site(load_site(site))
    store.ensure_hosts(["node1"])
    for state in (NodeState.DISCOVERED, NodeState.DEPLOYING, NodeState.DEPLOYED):
        store.transition("node1", state, reason="test: node1 serves")
    code, res = _update(site, "node0", "node1")
    assert code == 3 and res["node1"]["reason"] == "serving"
    assert "BMC" not in _targets(peer) and "Node1.BIOS" not in _targets(peer)


def test_a_killed_run_is_picked_up_instead_of_sending_the_image_again(blade, tmp_path):
    site, peer = blade
    peer.inventory["BMC"]["Version"] = "2.0"  # only node0's own BIOS drifts
    peer.modes["Node0.BIOS"] = "hold"  # the BMC is still flashing when the client dies
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    with (tmp_path / "first.log").open("wb") as log:
        first = subprocess.Popen([sys.executable, "-m", "provisioner.cli.main", "firmware",
                                  "update", "node0", "--site", str(site), "--yes"],
                                 stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_until(lambda: "Node0.BIOS" in _targets(peer), "the first run's update")
            store = StateStore.for_site(load_site(site))
            wait_until(lambda: any((e.data or {}).get("phase") == "sent"
                                   for e in store.events("node0")), "the journalled task")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
    # Nothing else holds node0 now, but its BMC is still flashing: maintenance refuses.
    hold = CliRunner().invoke(app, ["maintenance", "node0", "--site", str(site)])
    assert hold.exit_code == 5, hold.stdout + hold.stderr
    assert "firmware update may still be running" in hold.stderr
    assert StateStore.for_site(load_site(site)).get("node0").state is not NodeState.MAINTENANCE
    # A run with a short deadline reports the update in progress and sends nothing.
    code, res = _update(site, "node0", timeout="1")
    assert code == 3 and res["node0"]["reason"] == "update in progress", res
    assert _targets(peer).count("Node0.BIOS") == 1
    # The next run waits for that task (the BMC finishes it meanwhile), records how it ended
    # and does not send the image a second time.
    polls = sum(1 for m, p, _h, _b in peer.seen if m == "GET" and "/TaskService/Tasks/" in p)
    threading.Thread(target=lambda: (wait_until(
        lambda: sum(1 for m, p, _h, _b in peer.seen if m == "GET"
                    and "/TaskService/Tasks/" in p) > polls + 1, "the task polled again"),
        peer.release()), daemon=True).start()
    code, res = _update(site, "node0")
    assert code == 0, res
    assert _targets(peer).count("Node0.BIOS") == 1
    assert "found after an interrupted run" in res["node0"]["detail"]
    history = [e.message for e in StateStore.for_site(load_site(site)).events("node0")
               if e.kind == "firmware"]
    assert any("completed (found after an interrupted run)" in m for m in history), history
    again = CliRunner().invoke(app, ["maintenance", "node0", "--site", str(site)])
    assert again.exit_code == 0, again.stdout + again.stderr


def test_firmware_check_judges_a_node_on_its_own_and_shared_components(blade):
    site, peer = blade
    peer.inventory["Node1.BIOS"]["Version"] = "2.0"  # node1 is at baseline, node0 is not
    result = CliRunner().invoke(app, ["firmware", "check", "--site", str(site), "--json"])
    items = {r["host"]: {i["name"]: i["status"] for i in r["items"]}
             for r in json.loads(result.stdout)}
    assert items["node0"] == {"Node0.BIOS": "drift", "BMC": "drift"}
    assert items["node1"] == {"Node1.BIOS": "ok", "BMC": "drift"}
