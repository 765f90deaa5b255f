"""Dry run of the MAAS backend against the MAAS contract server: what would change, nothing changed.

The contract server (maas_contract_server.py) reproduces MAAS 3.x API 2.0 from its published
documentation; it is not MAAS.
"""

from __future__ import annotations

import io

from maas_contract_server import DEPLOYED, NEW, READY, MAASContractServer
from maas_testsite import BMC_PASSWORD, requests_for
from rich.console import Console

from provisioner.deploy.maas import MAASBackend
from provisioner.inventory import Site

POWER = {"power_address": "10.21.0.107", "power_user": "root", "power_pass": BMC_PASSWORD}


def test_dry_run_shows_what_would_change_and_changes_nothing(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.add_machine("bold-moth", ["b8:3f:d2:10:00:05"], status=READY, power_type="ipmi")
    maas_server.add_machine("gpu-m01-u07", ["b8:3f:d2:10:00:07"], status=DEPLOYED,
                            owner="admin", power=POWER)
    maas_server.add_machine("gpu-m01-u09", ["b8:3f:d2:10:00:09"], status=DEPLOYED, owner="alice")
    tags_before = set(maas_server.tags)

    plan = MAASBackend().plan(maas_site, requests_for(maas_site))

    u03 = plan.host("gpu-m01-u03")
    assert u03.system_id is None and u03.maas_status == "absent"
    assert u03.actions[0] == (
        "enlist gpu-m01-u03 with MAC b8:3f:d2:10:00:03, power redfish at 10.21.0.103"
    )
    assert "commission" in u03.actions and u03.actions[-1] == "deploy ubuntu/jammy kernel hwe-22.04"

    u05 = plan.host("gpu-m01-u05")
    assert u05.maas_status == "Ready"
    assert "rename 'bold-moth' to 'gpu-m01-u05'" in u05.actions
    assert "set power type redfish (10.21.0.105)" in u05.actions
    assert "tag profile-hgx-h100, rack-m01 (new tag)" in u05.actions
    assert any(a.startswith("boot disk sda (") and "DELLBOSS VD" in a for a in u05.actions)
    assert "commission" not in u05.actions

    assert plan.host("gpu-m01-u07").actions == []  # already deployed: no change
    assert not plan.host("gpu-m01-u07").changes
    assert plan.host("gpu-m01-u09").blocked == (
        f"MAAS machine {plan.host('gpu-m01-u09').system_id} is owned by 'alice'"
    )

    text = plan.render()
    assert "dry run, nothing changed" in text
    assert "gpu-m01-u07 [b8:3f:d2:10:00:07]" in text and "  - no change" in text
    assert "  - refuse: MAAS machine" in text
    assert plan.to_dict()["hosts"][0]["host"] == "gpu-m01-u03"
    out = io.StringIO()
    Console(file=out, width=200).print(plan)
    table = out.getvalue()
    assert "gpu-m01-u05" in table and "refuse: MAAS machine" in table and "no change" in table

    assert maas_server.actions == []
    assert set(maas_server.tags) == tags_before


def test_dry_run_of_reimage_shows_release_and_erase(
    maas_server: MAASContractServer, maas_site: Site
):
    maas_server.add_machine("gpu-m01-u07", ["b8:3f:d2:10:00:07"], status=DEPLOYED,
                            owner="admin", power=POWER)
    maas_server.add_machine("gpu-m01-u03", ["b8:3f:d2:10:00:03"], status=NEW, power_type="")
    reqs = requests_for(maas_site, ["gpu-m01-u03", "gpu-m01-u07"])
    plan = MAASBackend().plan(maas_site, reqs, reimage=True, erase=True)
    u07 = plan.host("gpu-m01-u07")
    assert "release and erase all its disks (quick)" in u07.actions
    assert "boot disk nvme1n1 (" in " ".join(u07.actions)  # the per-host serial hint
    u03 = plan.host("gpu-m01-u03")
    assert "commission" in u03.actions
    assert any("(after commissioning)" in a for a in u03.actions)
    assert maas_server.actions == []


def test_dry_run_reports_an_unmatched_root_disk(maas_server: MAASContractServer, maas_site: Site):
    maas_server.hardware["b8:3f:d2:10:00:07"] = []
    maas_server.add_machine("gpu-m01-u07", ["b8:3f:d2:10:00:07"], status=READY, power=POWER)
    plan = MAASBackend().plan(maas_site, requests_for(maas_site, ["gpu-m01-u07"]))
    assert any(a.startswith("FAIL: gpu-m01-u07: no disk of MAAS machine")
               for a in plan.host("gpu-m01-u07").actions)


def test_dry_run_notices_stale_redfish_password(maas_server: MAASContractServer, maas_site: Site):
    maas_server.add_machine("gpu-m01-u07", ["b8:3f:d2:10:00:07"], status=READY,
                            power=dict(POWER, power_pass="old"))
    plan = MAASBackend().plan(maas_site, requests_for(maas_site, ["gpu-m01-u07"]))
    actions = plan.host("gpu-m01-u07").actions
    assert "update Redfish power parameters (10.21.0.107)" in actions
    assert BMC_PASSWORD not in plan.render() and "old" not in plan.render()


def test_dry_run_while_maas_deploys_only_waits(maas_server: MAASContractServer, maas_site: Site):
    from maas_contract_server import DEPLOYING

    maas_server.add_machine("gpu-m01-u07", ["b8:3f:d2:10:00:07"], status=DEPLOYING,
                            owner="admin", power=POWER)
    plan = MAASBackend().plan(maas_site, requests_for(maas_site, ["gpu-m01-u07"]))
    assert plan.host("gpu-m01-u07").actions == ["wait for the deployment MAAS is running"]


def test_dry_run_reports_region_problems(maas_server: MAASContractServer, maas_site: Site):
    maas_server.boot_resources = []
    plan = MAASBackend().plan(maas_site, requests_for(maas_site, ["gpu-m01-u03"]))
    assert plan.problems == [
        f"MAAS at {maas_server.url} has no amd64 image ubuntu/jammy (it has: none)"
    ]
    assert "PROBLEM: MAAS at" in plan.render()
    assert plan.to_dict()["problems"] == plan.problems
