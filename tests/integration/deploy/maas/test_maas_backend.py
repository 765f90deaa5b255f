"""The MAAS backend driven through the MAAS contract server (maas_contract_server.py).

The server is not MAAS: it reproduces MAAS 3.x API 2.0's paths, parameters, states, timings
and errors from MAAS's published API documentation and handlers, and checks OAuth signatures.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from maas_contract_server import DEPLOYED, FAILED_DEPLOYMENT, NEW, READY, MAASContractServer
from maas_testsite import BMC_PASSWORD, requests_for

from provisioner.deploy.base import DeployOutcome, DeployRequest, backend_class
from provisioner.deploy.maas import MAASBackend
from provisioner.deploy.maas.errors import MAASAuthError, MAASError, MAASNotReady, MAASTimeout
from provisioner.inventory import Site


class Progress:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, str]] = []

    def __call__(self, host: str, phase: str, message: str) -> None:
        self.lines.append((host, phase, message))

    def phases(self, host: str) -> list[str]:
        return [p for h, p, _ in self.lines if h == host]


def run_all(
    backend: MAASBackend, site: Site, reqs: list[DeployRequest]
) -> dict[str, DeployOutcome]:
    backend.prepare(site, reqs)
    progress = Progress()
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda r: backend.deploy(r, progress), reqs))
    backend.close()
    return {o.host: o for o in outcomes}


def test_backend_is_registered_under_maas():
    assert backend_class("maas") is MAASBackend


def test_rack_enlists_commissions_and_deploys_with_one_failure(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.fail_deploy.add("gpu-m01-u05")
    reqs = requests_for(maas_site)
    outcomes = run_all(MAASBackend(), maas_site, reqs)

    assert {h for h, o in outcomes.items() if o.ok} == {"gpu-m01-u03", "gpu-m01-u07", "gpu-m01-u09"}
    failed = outcomes["gpu-m01-u05"]
    sid = maas_server.by_hostname("gpu-m01-u05").record["system_id"]
    assert "Failed deployment" in failed.reason and sid in failed.reason
    assert "Installation failed" in failed.reason
    for name in ("gpu-m01-u03", "gpu-m01-u07", "gpu-m01-u09"):
        m = maas_server.by_hostname(name)
        assert m.record["status"] == DEPLOYED
        assert set(outcomes[name].phases) >= {"enlist", "commission", "storage", "deploy"}
        assert m.record["power_type"] == "redfish"
        assert m.power["power_user"] == "root" and m.power["power_pass"] == BMC_PASSWORD
        assert sorted(m.record["tag_names"]) == ["profile-hgx-h100", "rack-m01"]
        assert m.record["distro_series"] == "jammy" and m.record["hwe_kernel"] == "hwe-22.04"
        assert m.user_data is not None and m.user_data.startswith("#cloud-config")
        assert "ops@laptop" in m.user_data and "name: provision" in m.user_data
        assert m.layout["storage_layout"] == "flat"
    assert maas_server.by_hostname("gpu-m01-u09").power["power_address"] == "10.21.0.109:8443"
    # the planned provisioning address is pinned as MAAS's static IP on the boot interface
    for h in maas_site.hosts:
        rec = maas_server.by_hostname(h.name).record
        assert rec["ip_addresses"] == [str(h.addresses["provisioning"])]
        assert [(lk["mode"], lk.get("ip_address")) for lk in rec["boot_interface"]["links"]] == [
            ("static", str(h.addresses["provisioning"]))
        ]
    # root disk: the profile's BOSS hint on most hosts, the per-host serial on u07
    u03 = maas_server.by_hostname("gpu-m01-u03")
    assert u03.record["boot_disk"]["model"] == "DELLBOSS VD"
    assert u03.layout["root_device"] == str(u03.record["boot_disk"]["id"])
    u07 = maas_server.by_hostname("gpu-m01-u07")
    assert u07.record["boot_disk"]["serial"] == "S6CKNA0T200124"
    assert u07.layout["root_device"] == str(u07.record["boot_disk"]["id"])
    assert maas_server.auth_failures == 0


def test_failed_commissioning_is_an_outcome_with_maas_message(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.fail_commission.add("gpu-m01-u03")
    reqs = requests_for(maas_site, ["gpu-m01-u03", "gpu-m01-u05"])
    outcomes = run_all(MAASBackend(), maas_site, reqs)
    bad = outcomes["gpu-m01-u03"]
    assert not bad.ok
    sid = maas_server.by_hostname("gpu-m01-u03").record["system_id"]
    assert f"MAAS machine {sid} went to 'Failed commissioning' during commission" in bad.reason
    assert "50-maas-01-commissioning failed" in bad.reason
    assert outcomes["gpu-m01-u05"].ok
    assert maas_server.actions_for("gpu-m01-u03", "deploy") == []


def test_new_machine_is_commissioned_and_existing_one_renamed_and_repowered(
    maas_server: MAASContractServer, maas_site: Site
):
    # Enlisted earlier by PXE (status New, no power settings) under MAAS's random name.
    sid = maas_server.add_machine("bold-moth", ["b8:3f:d2:10:00:03"], status=NEW,
                                  power_type="")
    outcomes = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert outcomes["gpu-m01-u03"].ok, outcomes["gpu-m01-u03"].reason
    m = maas_server.machines[sid]
    assert m.record["hostname"] == "gpu-m01-u03"
    assert m.power["power_address"] == "10.21.0.103"
    assert [a.op for a in maas_server.actions_for("gpu-m01-u03")][:2] == ["update", "commission"]
    assert maas_server.actions_for("gpu-m01-u03", "create") == []


def test_already_deployed_host_is_left_alone(maas_server: MAASContractServer, maas_site: Site):
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=DEPLOYED, owner="admin",
                            power={"power_address": "10.21.0.103", "power_user": "root",
                                   "power_pass": BMC_PASSWORD})
    outcomes = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert outcomes["gpu-m01-u03"].ok
    assert outcomes["gpu-m01-u03"].reason == "already deployed in MAAS"
    assert maas_server.actions_for("gpu-m01-u03") == []


def test_machine_of_another_user_is_never_touched(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=DEPLOYED, owner="alice")
    req = requests_for(maas_site, ["gpu-m01-u03"])
    outcomes = run_all(MAASBackend(), maas_site, req)
    assert not outcomes["gpu-m01-u03"].ok
    assert "owned by 'alice'" in outcomes["gpu-m01-u03"].reason
    backend = MAASBackend(maas_site)
    with pytest.raises(MAASError, match="owned by 'alice'") as exc:
        backend.release(req[0], erase=True)
    assert exc.value.system_id == maas_server.by_hostname("gpu-m01-u03").record["system_id"]
    assert maas_server.machine_actions() == []


def test_release_and_redeploy_touch_only_the_named_host(
    maas_server: MAASContractServer, maas_site: Site
):
    outcomes = run_all(MAASBackend(), maas_site, requests_for(maas_site))
    assert all(o.ok for o in outcomes.values())
    before = len(maas_server.actions)

    backend = MAASBackend()
    reqs = requests_for(maas_site, ["gpu-m01-u05"])
    backend.prepare(maas_site, reqs)
    backend.release(reqs[0], erase=True)
    assert maas_server.by_hostname("gpu-m01-u05").record["status"] == READY
    out = backend.deploy(reqs[0], Progress())
    assert out.ok, out.reason

    later = maas_server.actions[before:]
    assert {a.hostname for a in later if a.hostname} == {"gpu-m01-u05"}
    release = [a for a in later if a.op == "release"]
    assert len(release) == 1
    assert release[0].params["erase"] == ["true"] and release[0].params["quick_erase"] == ["true"]
    for name in ("gpu-m01-u03", "gpu-m01-u07", "gpu-m01-u09"):
        assert maas_server.by_hostname(name).record["status"] == DEPLOYED


def test_release_without_erase_and_of_absent_host(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=FAILED_DEPLOYMENT,
                            owner="admin")
    backend = MAASBackend(maas_site)
    r03, r05 = requests_for(maas_site, ["gpu-m01-u03", "gpu-m01-u05"])
    backend.release(r03)
    backend.release(r05)  # not in MAAS: nothing to do
    (release,) = maas_server.actions_for("gpu-m01-u03", "release")
    assert release.params["erase"] == ["false"]
    assert maas_server.by_hostname("gpu-m01-u03").record["status"] == READY


def test_failed_deployment_left_over_is_released_and_retried(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=FAILED_DEPLOYMENT,
                            owner="admin", power={"power_address": "10.21.0.103",
                                                  "power_user": "root",
                                                  "power_pass": BMC_PASSWORD})
    outcomes = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert outcomes["gpu-m01-u03"].ok
    ops = [a.op for a in maas_server.actions_for("gpu-m01-u03")]
    assert ops == ["release", "unlink_subnet", "link_subnet", "set_storage_layout", "deploy"]


def test_deploy_timeout_names_state_and_system_id(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.deploy_s = 60
    req = requests_for(maas_site, ["gpu-m01-u03"])[0]
    req.timeout_s = 0.3
    out = run_all(MAASBackend(), maas_site, [req])["gpu-m01-u03"]
    sid = maas_server.by_hostname("gpu-m01-u03").record["system_id"]
    assert not out.ok
    assert out.reason == f"gpu-m01-u03: MAAS machine {sid} still 'Deploying' after 0s of deploy"
    # MAAS was told to stop, so the next attempt starts from Allocated, not a running deploy
    (abort,) = maas_server.actions_for("gpu-m01-u03", "abort")
    assert "timed out" in abort.params["comment"][0]
    assert maas_server.by_hostname("gpu-m01-u03").record["status_name"] == "Allocated"


def test_commission_timeout_aborts_and_raises_typed_error(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.commission_s = 60
    backend = MAASBackend(maas_site)
    sid = maas_server.add_machine("x", ["b8:3f:d2:10:00:99"], status=NEW)
    client, _, _ = backend._connect()
    client.commission(sid)
    from provisioner.deploy.maas.status import NodeStatus

    with pytest.raises(MAASTimeout) as exc:
        backend._wait(client, sid, "x", phase="commission", want={NodeStatus.READY},
                      timeout_s=0.1, progress=None)
    assert exc.value.system_id == sid
    assert maas_server.machines[sid].record["status_name"] == "New"  # aborted
    # an abort MAAS refuses is logged; the timeout stays the error
    maas_server.machines[sid].record.update(status=4, status_name="Ready")
    backend._abort(client, sid, "x", "deploy", 1)
    assert len([a for a in maas_server.actions if a.op == "abort"]) == 1


def test_unmatched_root_disk_hint_fails_that_host_only(
    maas_server: MAASContractServer, maas_site: Site
):
    # u07 pins serial S6CKNA0T200124; give it hardware without that disk.
    maas_server.hardware["b8:3f:d2:10:00:07"] = [
        {"id": 1, "name": "sda", "type": "physical", "model": "DELLBOSS VD",
         "serial": "OTHER", "id_path": None, "path": "/dev/disk/by-dname/sda",
         "size": 480_000_000_000, "tags": []}
    ]
    reqs = requests_for(maas_site, ["gpu-m01-u05", "gpu-m01-u07"])
    outcomes = run_all(MAASBackend(), maas_site, reqs)
    assert outcomes["gpu-m01-u05"].ok
    bad = outcomes["gpu-m01-u07"]
    assert not bad.ok and "no disk of MAAS machine" in bad.reason
    assert "serial=S6CKNA0T200124" in bad.reason and "serial OTHER" in bad.reason
    assert maas_server.actions_for("gpu-m01-u07", "deploy") == []


def test_hostname_taken_by_other_macs_is_refused(maas_server: MAASContractServer, maas_site: Site):
    maas_server.add_machine("gpu-m01-u03", ["aa:bb:cc:00:00:01"], status=READY)
    out = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert "already has a machine called gpu-m01-u03" in out["gpu-m01-u03"].reason
    assert maas_server.machine_actions() == []


def test_broken_machine_is_not_touched(maas_server: MAASContractServer, maas_site: Site):
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=8,
                            power={"power_address": "10.21.0.103", "power_user": "root",
                                   "power_pass": BMC_PASSWORD})
    out = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert "in state 'Broken'" in out["gpu-m01-u03"].reason
    assert "not touching it" in out["gpu-m01-u03"].reason
    assert maas_server.machine_actions() == []


def test_bad_api_key_is_refused_with_401(
    maas_server: MAASContractServer, maas_site: Site, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("MAAS_API_KEY", maas_server.api_key[:-4] + "XXXX")
    backend = MAASBackend()
    with pytest.raises(MAASAuthError) as exc:
        backend.prepare(maas_site, requests_for(maas_site))
    assert exc.value.status == 401
    assert "Invalid signature" in str(exc.value)
    assert exc.value.exit_code == 2
    assert maas_server.auth_failures == 1


def test_secrets_never_reach_logs_or_outcomes(
    maas_server: MAASContractServer, maas_site: Site, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    maas_server.fail_deploy.add("gpu-m01-u03")
    maas_server.add_machine("gpu-m01-u05", ["b8:3f:d2:10:00:05"], status=READY,
                            power={"power_address": "old", "power_user": "root",
                                   "power_pass": "old"})
    outcomes = run_all(MAASBackend(), maas_site, requests_for(maas_site))
    token_secret = maas_server.token_secret
    text = caplog.text + "".join(o.reason + o.log for o in outcomes.values())
    text += repr(MAASBackend(maas_site)._connect()[0])
    assert "updating MAAS machine" in caplog.text  # the power update was logged ...
    assert BMC_PASSWORD not in text  # ... without the password
    assert token_secret not in text


def test_macs_spread_over_two_machines_are_refused(
    maas_server: MAASContractServer, maas_site: Site
):
    a = maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"])
    b = maas_server.add_machine("stale", ["b8:3f:d2:10:00:83"])
    (req,) = requests_for(maas_site, ["gpu-m01-u03"])
    req.macs = ("b8:3f:d2:10:00:83",)  # the host's second port, from Redfish discovery
    out = run_all(MAASBackend(), maas_site, [req])["gpu-m01-u03"]
    assert not out.ok and "belong to several MAAS machines" in out.reason
    assert a in out.reason and b in out.reason
    assert maas_server.machine_actions() == []


def test_the_redfish_system_discovery_read_is_maas_node_id(
    maas_server: MAASContractServer, maas_site: Site
):
    (req,) = requests_for(maas_site, ["gpu-m01-u03"])
    req.system_path = "/redfish/v1/Systems/System.Embedded.1"  # what discovery read (Dell)
    assert run_all(MAASBackend(), maas_site, [req])["gpu-m01-u03"].ok
    assert maas_server.by_hostname("gpu-m01-u03").power["node_id"] == "System.Embedded.1"


def test_release_refused_while_maas_is_commissioning(
    maas_server: MAASContractServer, maas_site: Site
):
    from maas_contract_server import COMMISSIONING

    sid = maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=COMMISSIONING)
    with pytest.raises(MAASError, match="cannot be released") as exc:
        MAASBackend(maas_site).release(requests_for(maas_site, ["gpu-m01-u03"])[0])
    assert exc.value.system_id == sid


def test_static_address_needs_the_subnet_in_maas(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.subnets = [s for s in maas_server.subnets if s["cidr"] != "10.20.0.0/22"]
    reqs = requests_for(maas_site, ["gpu-m01-u03"])
    # checked before anything starts ...
    with pytest.raises(MAASNotReady, match=r"has no subnet for the provisioning addresses 10\.20"):
        MAASBackend().prepare(maas_site, reqs)
    # ... and again per host, should the subnet vanish while hosts commission
    backend = MAASBackend(maas_site)
    out = backend.deploy(reqs[0], Progress())
    assert "MAAS has no subnet containing its provisioning address 10.20.0." in out.reason
    assert maas_server.actions_for("gpu-m01-u03", "deploy") == []


def test_missing_image_stops_the_run_before_commissioning(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.boot_resources = [r for r in maas_server.boot_resources
                                  if r["name"] != "ubuntu/jammy"]
    with pytest.raises(MAASNotReady) as exc:
        MAASBackend().prepare(maas_site, requests_for(maas_site))
    assert "has no amd64 image ubuntu/jammy (it has: ubuntu/focal)" in str(exc.value)
    assert exc.value.exit_code == 5
    assert maas_server.actions == []


def test_address_taken_in_maas_is_reported_with_maas_message(
    maas_server: MAASContractServer, maas_site: Site
):
    planned = str(maas_site.host("gpu-m01-u03").addresses["provisioning"])
    other = maas_server.add_machine("squatter", ["aa:bb:cc:00:00:09"])
    maas_server.machines[other].record["ip_addresses"] = [planned]
    out = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    reason = out["gpu-m01-u03"].reason
    assert f"HTTP 400: ip_address: IP address {planned} already in use." in reason
    assert "?op=link_subnet for machine" in reason


def test_maas_events_of_a_failed_machine_are_passed_on(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.fail_deploy.add("gpu-m01-u03")
    (req,) = requests_for(maas_site, ["gpu-m01-u03"])
    backend = MAASBackend()
    backend.prepare(maas_site, [req])
    progress = Progress()
    assert not backend.deploy(req, progress).ok
    events = [m for h, p, m in progress.lines if m.startswith("MAAS event: ")]
    assert events[-1].endswith(
        "ERROR Failed deployment: Installation failed (refer to the installation log for more "
        "information)."
    )
    assert any(" INFO Deploying" in e for e in events)


def test_missing_gpu_after_commissioning_fails_the_host_before_deploy(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.gpus_missing["gpu-m01-u05"] = 1
    reqs = requests_for(maas_site, ["gpu-m01-u03", "gpu-m01-u05"])
    outcomes = run_all(MAASBackend(), maas_site, reqs)
    assert outcomes["gpu-m01-u03"].ok
    bad = outcomes["gpu-m01-u05"]
    sid = maas_server.by_hostname("gpu-m01-u05").record["system_id"]
    assert f"MAAS commissioning of {sid} found 7 NVIDIA GPU(s), profile hgx-h100 has 8" in (
        bad.reason
    )
    assert "0000:18:00.0" not in bad.reason and "0000:db:00.0" in bad.reason
    assert maas_server.actions_for("gpu-m01-u05", "deploy") == []


def test_ready_machine_with_stale_gpu_inventory_is_commissioned_again(
    maas_server: MAASContractServer, maas_site: Site
):
    # Commissioned while a GPU was off the bus; the GPU has been reseated since.
    maas_server.gpus_missing["gpu-m01-u03"] = 1
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=READY,
                            power={"power_address": "10.21.0.103", "power_user": "root",
                                   "power_pass": BMC_PASSWORD})
    maas_server.gpus_missing.clear()
    progress = Progress()
    backend = MAASBackend()
    (req,) = requests_for(maas_site, ["gpu-m01-u03"])
    backend.prepare(maas_site, [req])
    out = backend.deploy(req, progress)
    assert out.ok, out.reason
    assert [a.op for a in maas_server.actions_for("gpu-m01-u03")][:1] == ["commission"]
    assert ("gpu-m01-u03", "commission", "GPU count differs: commissioning again") in (
        progress.lines
    )


def test_gpu_still_missing_after_recommissioning_fails(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.gpus_missing["gpu-m01-u03"] = 2
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=READY,
                            power={"power_address": "10.21.0.103", "power_user": "root",
                                   "power_pass": BMC_PASSWORD})
    out = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert "found 6 NVIDIA GPU(s)" in out["gpu-m01-u03"].reason
    assert len(maas_server.actions_for("gpu-m01-u03", "commission")) == 1


def test_stale_rack_tag_is_removed_other_tags_kept(
    maas_server: MAASContractServer, maas_site: Site
):
    sid = maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=READY,
                                  power={"power_address": "10.21.0.103", "power_user": "root",
                                         "power_pass": BMC_PASSWORD})
    for tag in ("rack-r99", "virtual"):
        maas_server.tags.setdefault(tag, {"name": tag, "definition": "", "comment": "",
                                          "kernel_opts": "", "resource_uri": ""})
        maas_server.machines[sid].record["tag_names"].append(tag)
    out = run_all(MAASBackend(), maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert out["gpu-m01-u03"].ok
    assert sorted(maas_server.machines[sid].record["tag_names"]) == [
        "profile-hgx-h100", "rack-m01", "virtual"
    ]
