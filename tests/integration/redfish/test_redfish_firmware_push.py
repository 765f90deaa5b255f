"""`provision firmware update` to BMCs that take the image pushed to them: stand-in
UpdateService peers (provisioner/testing/update_peer.py, written from the DMTF schema; no
emulator implements UpdateService), each behind a TLS proxy.

One rack, one run: a multipart-only BMC (BMC now, BIOS staged OnReset), a legacy HttpPushUri
BMC (HttpPushUriTargets claimed, set and released), a BMC whose SimpleUpdate fetches only over
FTP (so the image is pushed) and answers the push with no task, a multipart BMC whose task
fails, one that receives a different image than the one checked (its task refuses it), a
legacy BMC whose push targets another client holds, a BMC with no way to take an image at
all, which fails alone with what it lacks, and stand-ins that say they are a Supermicro, a
Dell and HPE iLOs, so that each vendor's quirks are checked on the wire.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.state import StateStore
from provisioner.testing.update_peer import UpdatePeer, firmware_rack_site, image_bytes

USER, PASSWORD = "admin", "push-Canary-Pa55"
FW = "/redfish/v1/UpdateService/FirmwareInventory"


def _sha(component: str, version: str) -> str:
    return hashlib.sha256(image_bytes(component, version)).hexdigest()


BMC_BIOS = {"BMC": {"Name": "BMC", "Version": "1.0"}, "BIOS": {"Name": "BIOS", "Version": "1.0"}}
PEERS: dict[str, tuple[dict[str, Any], dict[str, str], dict[str, Any]]] = {
    # host: (inventory, modes, peer options)
    "m": (BMC_BIOS, {}, {"methods": frozenset({"multipart"}),
                         "expect_sha256": {"BMC": _sha("BMC", "2.0"),
                                           "BIOS": _sha("BIOS", "2.0")}}),
    "p": ({"NIC.Slot.1": {"Name": "ConnectX-7", "Version": "28.39.1002"}}, {},
          {"methods": frozenset({"push"})}),
    "f": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {},
          {"methods": frozenset({"simple", "multipart"}), "protocols": ("FTP",),
           "push_without_task": True}),
    "t": ({"BIOS": {"Name": "BIOS", "Version": "1.0"}}, {"BIOS": "fail"},
          {"methods": frozenset({"multipart"}), "apply_times": ("Immediate",)}),
    "c": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {},
          {"methods": frozenset({"multipart"}), "expect_sha256": {"BMC": "ab" * 32}}),
    "x": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {}, {"methods": frozenset()}),
    "b": ({"NIC.Slot.1": {"Name": "ConnectX-7", "Version": "28.39.1002"}}, {},
          {"methods": frozenset({"push"}), "push_busy": True}),
    # A Supermicro: its class pushes the BMC as its Manager, keeping its configuration.
    "s": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {},
          {"methods": frozenset({"simple", "multipart"}), "manufacturer": "Supermicro",
           "target_aliases": {"/redfish/v1/Managers/1": f"{FW}/BMC"}}),
    # A Dell: SimpleUpdate without Targets, the BIOS OnReset as a Scheduled job.
    "d": (BMC_BIOS, {}, {"methods": frozenset({"simple", "multipart"}),
                         "manufacturer": "Dell Inc.", "staged_as": "dell",
                         "simple_apply_times": ("Immediate", "OnReset")}),
    # HPE iLOs: SimpleUpdate without a task, progress in Oem.Hpe.State; one ends in Error.
    "h": ({"BMC": {"Name": "iLO 5", "Version": "1.0"}}, {},
          {"methods": frozenset({"simple", "push"}), "manufacturer": "HPE",
           "hpe_progress": True, "polls_to_finish": 3}),
    "e": ({"BMC": {"Name": "iLO 5", "Version": "1.0"}}, {"BMC": "fail"},
          {"methods": frozenset({"simple"}), "manufacturer": "HPE", "hpe_progress": True}),
}
PROFILE_OF = {"m": "bmcbios", "p": "nic", "f": "bmc", "t": "bios", "c": "bmc", "x": "bmc",
              "b": "nic", "s": "bmc", "d": "bmcbios", "h": "bmc", "e": "bmc"}


def _profiles(images: Path) -> str:
    def entry(component: str, glob: str, version: str, want: str) -> str:
        path = images / f"{component}-{version}.bin"
        path.write_bytes(image_bytes(component, version))
        return (f'{{component: "{glob}", version: "{want}", image: {{url: "{path}", '
                f'sha256: "{_sha(component, version)}"}}}}')

    bmc, bios = entry("BMC", "BMC", "2.0", "2.0"), entry("BIOS", "BIOS", "2.0", "2.0")
    nic = entry("NIC.Slot.1", "NIC.Slot.*", "28.40.1000", "28.40.*")
    nic_rule = "    provisioning_nic: {rule: first-onboard-up}\n"
    return (f"profiles:\n  bmcbios:\n{nic_rule}    firmware: [{bmc}, {bios}]\n"
            f"  nic:\n{nic_rule}    firmware: [{nic}]\n"
            f"  bmc:\n{nic_rule}    firmware: [{bmc}]\n"
            f"  bios:\n{nic_rule}    firmware: [{bios}]\n")


@pytest.fixture
def rack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[tuple[Path, dict[str, UpdatePeer]]]:
    monkeypatch.setenv("FW_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    with ExitStack() as stack:
        yield firmware_rack_site(stack, tmp_path, "fwpush", USER, PASSWORD, PEERS,
                                 PROFILE_OF, _profiles)


def test_push_updates_and_a_bmc_without_any_way_fails_alone(rack):
    site, peers = rack
    result = CliRunner().invoke(app, ["firmware", "update", *PEERS, "--site", str(site),
                                      "--yes", "--timeout", "4", "--json"])
    assert result.exit_code == 3, result.stdout + result.stderr
    res = {r["host"]: r for r in json.loads(result.stdout)}

    # m: multipart only; the BMC applied now, the BIOS staged OnReset and run by the one
    # host reset; both images arrived whole (the peer checks their sha256).
    assert res["m"]["ok"], res["m"]["error"]
    m = peers["m"]
    assert {k: v["Version"] for k, v in m.inventory.items()} == {"BMC": "2.0", "BIOS": "2.0"}
    assert [r["params"] for r in m.received] == [
        {"Targets": [f"{FW}/BMC"], "@Redfish.OperationApplyTime": "Immediate"},
        {"Targets": [f"{FW}/BIOS"], "@Redfish.OperationApplyTime": "OnReset"}]
    assert [r["sha256"] for r in m.received] == [_sha("BMC", "2.0"), _sha("BIOS", "2.0")]
    assert m.resets == ["ForceRestart"] and not m.fetched
    uploads = [h for meth, p, h, _b in m.seen if meth == "POST" and p.endswith("/upload")]
    assert all(h["Content-Type"].startswith("multipart/form-data; boundary=")
               and int(h["Content-Length"]) > 4096 for h in uploads)

    # p: legacy push: targets claimed and set, raw image, claim released.
    assert res["p"]["ok"], res["p"]["error"]
    p = peers["p"]
    assert p.inventory["NIC.Slot.1"]["Version"] == "28.40.1000"
    assert p.received[0]["targets"] == [f"{FW}/NIC.Slot.1"] and p.received[0]["apply"] == "OnReset"
    assert p.push_targets == [] and p.push_busy is False
    patches = [json.loads(b) for meth, _p, _h, b in p.seen if meth == "PATCH"]
    assert patches[0]["HttpPushUriTargetsBusy"] is True
    assert patches[-1] == {"HttpPushUriTargets": [], "HttpPushUriTargetsBusy": False}

    # f: SimpleUpdate fetches only over FTP: pushed instead; 204 without a task, verified by
    # reading the version back.
    assert res["f"]["ok"], res["f"]["error"]
    assert peers["f"].received[0]["method"] == "multipart" and not peers["f"].fetched
    assert not any(path.endswith("SimpleUpdate") for _m, path, _h, _b in peers["f"].seen)

    assert res["t"]["reason"] == "job failed" and "image signature invalid" in res["t"]["error"]
    assert peers["t"].received[0]["params"] == {
        "Targets": [f"{FW}/BIOS"]}  # OnReset is not offered: no apply time sent
    assert res["c"]["reason"] == "job failed" and "checksum" in res["c"]["error"]
    assert peers["c"].inventory["BMC"]["Version"] == "1.0"

    assert res["x"]["reason"] == "unsupported"
    for lack in ("no SimpleUpdate action", "no MultipartHttpPushUri", "no HttpPushUri"):
        assert lack in res["x"]["error"]
    assert "hint: update this BMC with the vendor's tool" in res["x"]["error"]
    assert not any(meth == "POST" and "Update" in path for meth, path, _h, _b in peers["x"].seen)

    # b: another client holds HttpPushUriTargets: nothing is changed or pushed.
    assert res["b"]["reason"] == "BMC error" and "HttpPushUriTargetsBusy" in res["b"]["error"]
    assert not peers["b"].received
    assert not any(meth in ("PATCH", "POST") for meth, _p, _h, _b in peers["b"].seen
                   if "UpdateService" in _p)

    # s: the vendor's quirks reach the wire: multipart though SimpleUpdate fetches HTTP.
    assert res["s"]["ok"], res["s"]["error"]
    (sent,) = peers["s"].received
    assert sent["params"]["Targets"] == ["/redfish/v1/Managers/1"]
    assert sent["params"]["Oem"]["Supermicro"]["BMC"]["PreserveCfg"] is True
    assert sent["params"]["@Redfish.OperationApplyTime"] == "Immediate"
    assert not peers["s"].fetched

    # d: iDRAC-like: fetched by SimpleUpdate without Targets; the BIOS job stays Scheduled
    # (TaskState Running) until the one host reset, then completes.
    assert res["d"]["ok"], res["d"]["error"]
    d = peers["d"]
    assert {k: v["Version"] for k, v in d.inventory.items()} == {"BMC": "2.0", "BIOS": "2.0"}
    bodies = [json.loads(b) for meth, path, _h, b in d.seen
              if meth == "POST" and path.endswith("SimpleUpdate")]
    assert [("Targets" in b, b.get("@Redfish.OperationApplyTime")) for b in bodies] == [
        (False, "Immediate"), (False, "OnReset")]
    assert d.resets == ["ForceRestart"] and not d.received

    # h: iLO-like: no task; Oem.Hpe.State was watched until the flash ended; never pushed to
    # its (non-DMTF) HttpPushUri. e: the flash ended in Error, which fails that host.
    assert res["h"]["ok"], res["h"]["error"]
    assert peers["h"].inventory["BMC"]["Version"] == "2.0" and not peers["h"].received
    assert not any("Targets" in json.loads(b) for meth, path, _h, b in peers["h"].seen
                   if meth == "POST" and path.endswith("SimpleUpdate"))
    assert res["e"]["reason"] == "job failed" and "UpdateFailed" in res["e"]["error"]

    store = StateStore.for_site(load_site(site))
    history = [e.message for e in store.events("m") if e.kind == "firmware"]
    assert any("sent by MultipartHttpPushUri" in h and "apply OnReset" in h for h in history)


def test_no_secret_in_a_pushed_body(rack):
    site, peers = rack
    CliRunner().invoke(app, ["firmware", "update", "m", "p", "--site", str(site), "--yes",
                             "--timeout", "4"])
    for name in ("m", "p"):
        assert peers[name].received
        for _m, _p, headers, body in peers[name].seen:
            if _p.endswith("/SessionService/Sessions"):
                continue  # the login to its own BMC (refused: it offers no sessions)
            assert PASSWORD not in body
            assert "Authorization" in headers or "X-Auth-Token" in headers or _p.rstrip("/") == "/redfish/v1"


def test_dry_run_says_how_each_image_would_go(rack):
    site, peers = rack
    result = CliRunner().invoke(app, ["firmware", "update", "m", "p", "x", "--site", str(site),
                                      "--dry-run", "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    plans = json.loads(result.stdout)["plans"]
    assert [s["via"] for s in plans["m"]["steps"]] == [
        f"MultipartHttpPushUri, Targets {FW}/BMC, apply Immediate",
        f"MultipartHttpPushUri, Targets {FW}/BIOS, apply OnReset"]
    assert plans["p"]["steps"][0]["via"] == f"HttpPushUri, Targets {FW}/NIC.Slot.1, apply OnReset"
    assert plans["x"]["steps"][0]["via"].startswith("no way: no SimpleUpdate action")
    for peer in peers.values():  # read only
        assert not peer.received and not any(m in ("POST", "PATCH") for m, p, *_ in peer.seen
                                             if not p.endswith("/SessionService/Sessions"))
    table = CliRunner().invoke(app, ["firmware", "update", "m", "--site", str(site),
                                     "--dry-run"])
    assert "via MultipartHttpPushUri" in table.stdout
