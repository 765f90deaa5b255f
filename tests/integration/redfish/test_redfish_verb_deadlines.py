"""#32 item 7: every verb that talks to BMCs has a per-host deadline, not only `discover`.

The BMC here spreads each valid answer over time: the project's fault proxy
(provisioner/testing/bmcproxy.py, ``--delay``) in front of the BIOS stand-in
(provisioner/testing/bios_peer.py) and of a recorded NVIDIA DGX H100 served by sushy-static.
Each answer comes well within the per-request timeout (30 s), so only the host's deadline
(``settings.redfish.host_deadline_s``) can end the verb: every verb needs more than three
answers of 0.8 s and the deadline is 2 s, whatever the machine's load. Before the deadline
covered these verbs they all succeeded, slowly.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.testing.bios_peer import bios_peer
from provisioner.testing.redfish_peers import fault_proxy, make_tls, sushy_static
from tests.conftest import corpus_path

USER, PASSWORD = "root", "calvin"
DELAY_S = "0.8"
REGISTRY = {"RegistryEntries": {"Attributes": [
    {"AttributeName": "SriovGlobalEnable", "Type": "Enumeration", "ReadOnly": False,
     "Value": [{"ValueName": v, "ValueDisplayName": v} for v in ("Enabled", "Disabled")]}]}}
DGX = "nvidia-dgx-h100-libredfish"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("deadlines")
    tls = make_tls(root / "tls")
    site_dir = root / "site"
    site_dir.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    with ExitStack() as stack:
        peer = stack.enter_context(bios_peer(USER, PASSWORD, {"SriovGlobalEnable": "Disabled"},
                                             REGISTRY, manufacturer="Dell Inc.",
                                             flavour="dell"))
        mockup = corpus_path("redfish", DGX, "mockup", "redfish", "v1")
        dgx = stack.enter_context(sushy_static(mockup, root))
        ports = {}
        for name, upstream in (("slow-bios", peer.url), ("slow-dgx", dgx)):
            (url,) = stack.enter_context(fault_proxy(upstream, root, tls=tls,
                                                     args=["--delay", DELAY_S]))
            ports[name] = urlsplit(url).port
        path = site_dir / "site.yml"
        path.write_text(
            "site: deadlines\nsettings:\n"
            "  redfish: {ca_bundle: bmc-ca.pem, timeout_s: 30, retries: 0, "
            "host_deadline_s: 2}\n"
            f"credentials:\n  bmc: {{username: {USER}, password: {{env: SLOW_BMC_PASSWORD}}}}\n"
            "profiles:\n  gpu:\n    provisioning_nic: {rule: first-onboard-up}\n"
            "    bios: {SriovGlobalEnable: Enabled}\n"
            "    firmware: [{component: \"HostBIOS_0\", version: \"01.02.*\"}]\n"
            "racks:\n  - name: r1\n    index: 1\n"
            "    defaults: {profile: gpu, bmc: {credentials: bmc}}\n    hosts:\n"
            + "".join(f"      - {{u: {u}, name: {name}, bmc: {{address: 127.0.0.1, "
                      f"port: {port}}}}}\n" for u, (name, port) in enumerate(ports.items(), 1)))
        yield path


@pytest.fixture
def run(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SLOW_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))

    def invoke(*args: str) -> Any:
        result = CliRunner().invoke(app, [*args, "--site", str(site), "--json"])
        assert result.exit_code == 3, result.stdout + result.stderr
        return {r["host"]: r for r in json.loads(result.stdout)}
    return invoke


def _cut_by_deadline(result: dict[str, Any]) -> None:
    assert result["reason"] == "deadline exceeded", result["error"]
    assert "settings.redfish.host_deadline_s (2 s)" in result["error"]


@pytest.mark.parametrize("verb", [("power", "status"), ("power", "on"),
                                  ("boot", "pxe"), ("bios", "check"), ("bios", "apply"),
                                  ("firmware", "check")])
def test_a_bmc_spreading_its_answers_costs_its_host_the_deadline(run, verb):
    extra = ("--yes",) if verb[0] == "bios" and verb[1] == "apply" else ()
    hosts = ("slow-bios",) if verb[0] == "bios" else ("slow-dgx",) \
        if verb[0] == "firmware" else ("slow-bios", "slow-dgx")
    results = run(*verb, *hosts, *extra)
    for host in hosts:
        _cut_by_deadline(results[host])


def test_power_waits_are_added_to_the_deadline_and_named(run):
    results = run("power", "on", "slow-bios", "--wait", "1")
    _cut_by_deadline(results["slow-bios"])
    assert "+ 1 s of waits this verb allows" in results["slow-bios"]["error"]
