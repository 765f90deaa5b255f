"""`provision firmware update` against stand-in UpdateService BMCs (provisioner/testing/
update_peer.py, written from the DMTF schema and checked by DMTF's Service Validator), each
behind a TLS proxy, with images served by the updater's own HTTP server.

One rack, one run: a host whose BMC reboots mid-task and whose NIC firmware needs a host
reset, a host whose task fails, a host whose image checksum is wrong (nothing sent), a host
whose BMC says done but still runs the old version, and a host in use (spared).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore
from provisioner.testing.update_peer import UpdatePeer, firmware_rack_site, image_bytes

USER, PASSWORD = "admin", "fw-Canary-Pa55"

PEERS = {
    # host: (inventory, modes)
    "a": ({"BMC": {"Name": "BMC", "Version": "1.0"}, "BIOS": {"Name": "BIOS", "Version": "1.0"},
           "NIC.Slot.1": {"Name": "ConnectX-7", "Version": "28.39.1002"}},
          {"BMC": "reboot", "NIC.Slot.1": "staged"}),
    "b": ({"BIOS": {"Name": "BIOS", "Version": "1.0"}}, {"BIOS": "fail"}),
    "c": ({"CPLD": {"Name": "CPLD", "Version": "1"}}, {}),
    "d": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {"BMC": "noop"}),
    "e": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {}),
}


def _image(images: Path, component: str, version: str) -> tuple[str, str]:
    path = images / f"{component}-{version}.bin"
    path.write_bytes(image_bytes(component, version))
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()


def _profiles(images: Path) -> str:
    bmc, bmc_sha = _image(images, "BMC", "2.0")
    bios, bios_sha = _image(images, "BIOS", "2.0")
    nic, nic_sha = _image(images, "NIC.Slot.1", "28.40.1000")
    cpld, _ = _image(images, "CPLD", "2")
    return f"""
profiles:
  full:
    provisioning_nic: {{rule: first-onboard-up}}
    firmware:
      - {{component: "NIC.Slot.*", version: "28.40.*", image: {{url: "{nic}", sha256: "{nic_sha}"}}}}
      - {{component: BIOS, version: "2.0", image: {{url: "{bios}", sha256: "{bios_sha}"}}}}
      - {{component: BMC, version: "2.0", image: {{url: "{bmc}", sha256: "{bmc_sha}"}}}}
  bios:
    provisioning_nic: {{rule: first-onboard-up}}
    firmware: [{{component: BIOS, version: "2.0", image: {{url: "{bios}", sha256: "{bios_sha}"}}}}]
  cpld:
    provisioning_nic: {{rule: first-onboard-up}}
    firmware: [{{component: CPLD, version: "2", image: {{url: "{cpld}", sha256: "{"0" * 64}"}}}}]
  bmc:
    provisioning_nic: {{rule: first-onboard-up}}
    firmware: [{{component: BMC, version: "2.0", image: {{url: "{bmc}", sha256: "{bmc_sha}"}}}}]
"""


PROFILE_OF = {"a": "full", "b": "bios", "c": "cpld", "d": "bmc", "e": "bmc"}


@pytest.fixture
def rack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[tuple[Path, dict[str, UpdatePeer]]]:
    monkeypatch.setenv("FW_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    with ExitStack() as stack:
        yield firmware_rack_site(stack, tmp_path, "fwtest", USER, PASSWORD, {n: (inv, modes, {}) for n, (inv, modes) in PEERS.items()},
                                 PROFILE_OF, _profiles)


def test_dry_run_shows_the_ordered_plan_and_sends_nothing(rack):
    site, peers = rack
    result = CliRunner().invoke(app, ["firmware", "update", "a", "--site", str(site),
                                      "--dry-run", "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    steps = json.loads(result.stdout)["plans"]["a"]["steps"]
    assert [(s["component"], s["order"]) for s in steps] == [
        ("BMC", "bmc"), ("BIOS", "bios"), ("ConnectX-7 [NIC.Slot.1]", "nic")]
    # nothing sent but the login the BMC refused (it offers no sessions)
    assert not peers["a"].fetched and not any(
        m == "POST" and not p.endswith("/SessionService/Sessions") for m, p, *_ in peers["a"].seen)


def test_update_rack_isolates_each_hosts_failure(rack):
    site, peers = rack
    store = StateStore.for_site(load_site(site))
    store.ensure_hosts(["e"])
    for state in (NodeState.DISCOVERED, NodeState.DEPLOYING, NodeState.DEPLOYED,
                  NodeState.CONFIGURED, NodeState.VALIDATED):
        store.transition("e", state, reason="test: a host in use")
    result = CliRunner().invoke(app, ["firmware", "update", "a", "b", "c", "d", "e",
                                      "--site", str(site), "--yes", "--timeout", "4",
                                      "--json"])
    assert result.exit_code == 3, result.stdout + result.stderr
    res = {r["host"]: r for r in json.loads(result.stdout)}
    # a: BMC first (it rebooted mid-task and forgot the task), then BIOS, then the NIC,
    # whose new firmware runs only after the one host reset at the end.
    assert res["a"]["ok"], res["a"]["error"]
    a = peers["a"]
    assert {k: v["Version"] for k, v in a.inventory.items()} == {
        "BMC": "2.0", "BIOS": "2.0", "NIC.Slot.1": "28.40.1000"}
    order = [body for m, p, _h, body in a.seen if p.endswith("SimpleUpdate")]
    assert ["BMC" in order[0], "BIOS" in order[1], "NIC.Slot.1" in order[2]] == [True] * 3
    assert a.resets == ["ForceRestart"]
    assert res["b"]["reason"] == "job failed"
    assert "image signature invalid" in res["b"]["error"]
    assert peers["b"].inventory["BIOS"]["Version"] == "1.0"
    assert res["c"]["reason"] == "checksum mismatch"
    assert not peers["c"].fetched  # the wrong image never reached the BMC
    assert res["d"]["reason"] == "not applied"
    assert "BMC runs 1.0" in res["d"]["error"]
    assert res["e"]["reason"] == "serving" and not peers["e"].fetched
    # Each BMC fetched its images from the updater's server, and only those.
    assert all(uri.startswith("http://127.0.0.1:") and "/firmware/" in uri
               for uri in a.fetched)
    history = [e.message for e in store.events("a") if e.kind == "firmware"]
    assert "BMC: 1.0 -> 2.0" in history
    assert any("28.40.1000 (after a host reset)" in m for m in history)


def test_no_secret_travels_with_the_update(rack):
    site, peers = rack
    result = CliRunner().invoke(app, ["firmware", "update", "a", "--site", str(site), "--yes",
                                      "--timeout", "4"])
    assert result.exit_code == 0, result.stdout + result.stderr
    a = peers["a"]
    # the update really went through this BMC: three SimpleUpdates, three images fetched
    assert len([p for m, p, _h, _b in a.seen if m == "POST" and p.endswith("SimpleUpdate")]) == 3
    assert len(a.fetched) == 3
    # the password goes to its own BMC only to log in (a session it may refuse), in no other body
    logins = [b for m, p, _h, b in a.seen if m == "POST" and p.endswith("/SessionService/Sessions")]
    assert all(PASSWORD in b for b in logins)
    for _m, path, _headers, body in a.seen:
        assert PASSWORD not in body or path.endswith("/SessionService/Sessions")
    assert all(PASSWORD not in uri for uri in a.fetched)
    assert PASSWORD not in result.stdout + result.stderr
