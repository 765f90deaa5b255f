"""`provision rack` and `provision reimage` on a MAAS site, driving the MAAS contract server.

The contract server (maas_contract_server.py) stands in for a MAAS 3.x region: it is built from
MAAS's published API 2.0 documentation and handlers, with real paths, states and errors, and it
checks the OAuth signature. MAAS powers hosts itself and the MACs are in the inventory, so the
run needs no BMC; SSH waiting and site.yml are skipped because no host really boots here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from maas_contract_server import DEPLOYED, MAASContractServer
from maas_testsite import write_site
from typer.testing import CliRunner

from provisioner.cli.main import app

HOSTS = ["gpu-m01-u03", "gpu-m01-u05", "gpu-m01-u07", "gpu-m01-u09"]
QUIET = ["--skip-configure", "--no-ssh-wait", "--json"]


@pytest.fixture
def site_file(tmp_path: Path, maas_server: MAASContractServer, maas_env: None,
              monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    return write_site(tmp_path, maas_server.url)


def summary(output: str) -> dict:
    start = output.index("{\n")
    return json.loads(output[start:])


def test_rack_then_reimage_through_maas(maas_server: MAASContractServer, site_file: Path):
    maas_server.fail_deploy.add("gpu-m01-u05")
    runner = CliRunner()

    res = runner.invoke(app, ["rack", "--site", str(site_file), *QUIET])
    assert res.exit_code == 3, res.output  # partial failure
    data = summary(res.stdout)
    status = {h["host"]: h for h in data["hosts"]}
    assert (data["ok"], data["failed"], data["skipped"]) == (3, 1, 0)
    assert status["gpu-m01-u05"]["status"] == "failed"
    assert "Failed deployment" in status["gpu-m01-u05"]["reason"]
    assert status["gpu-m01-u05"]["attempts"] == 2  # retried once (settings.deploy_retries)
    for name in ("gpu-m01-u03", "gpu-m01-u07", "gpu-m01-u09"):
        assert status[name]["status"] == "ok"
        assert {"enlist", "commission", "storage", "deploy"} <= set(status[name]["phases"])
        assert maas_server.by_hostname(name).record["status"] == DEPLOYED
    assert len(maas_server.actions_for("gpu-m01-u05", "create")) == 1  # enlisted once

    # Re-running resumes: deployed hosts are skipped, the failed one is tried again.
    maas_server.fail_deploy.clear()
    res = runner.invoke(app, ["rack", "--site", str(site_file), *QUIET])
    assert res.exit_code == 0, res.output
    data = summary(res.stdout)
    assert (data["ok"], data["skipped"]) == (1, 3)

    # Re-image one host: only it is released and redeployed.
    before = len(maas_server.actions)
    res = runner.invoke(app, ["reimage", "gpu-m01-u07", "--site", str(site_file), "--yes",
                              *QUIET])
    assert res.exit_code == 0, res.output
    data = summary(res.stdout)
    assert [(h["host"], h["status"]) for h in data["hosts"]] == [("gpu-m01-u07", "ok")]
    later = maas_server.actions[before:]
    assert {a.hostname for a in later} == {"gpu-m01-u07"}
    assert [a.op for a in later] == ["release", "set_storage_layout", "deploy"]
    assert later[0].params["erase"] == ["false"]  # root disk only: data disks are kept
    for name in HOSTS:
        assert maas_server.by_hostname(name).record["status"] == DEPLOYED


def test_rack_with_a_bad_api_key_exits_2(maas_server: MAASContractServer, site_file: Path,
                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MAAS_API_KEY", "a:b:c")
    res = CliRunner().invoke(app, ["rack", "--site", str(site_file), *QUIET])
    assert res.exit_code == 2, res.output
    assert "MAAS refused GET version/" in res.output and "HTTP 401" in res.output
    assert maas_server.machine_actions() == []
