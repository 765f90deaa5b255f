"""`provision bios check` / `provision firmware check` against recorded real BMCs.

Dell iDRAC9 (R750), Supermicro (HGX H100) and HPE iLO 5 mockups from tests/fixtures/corpus are
served by sushy-static behind TLS proxies; the site's baselines are written against what those
recordings hold, so every verdict below is what an engineer reading the recording would say.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.testing.redfish_peers import fault_proxy, make_tls, sushy_static
from tests.conftest import corpus_path

MOCKUPS = {
    "dell": "dell-idrac9-poweredge-r750-ib-libredfish",
    "smc": "supermicro-sys-821ge-tnhr-hgx-h100-libredfish",
    "hpe": "hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish",
    "dgx": "nvidia-dgx-h100-libredfish",
    "xcc": "lenovo-xcc-sr670v2-libredfish",
    "gb200": "nvidia-gb200-nvl-tray-libredfish",
}

PROFILES = """
profiles:
  dell:
    provisioning_nic: {rule: first-onboard-up}
    bios:
      ProcVirtualization: Enabled       # as recorded
      AcPwrRcvryUserDelay: 120          # an integer attribute, as recorded
      SysProfile: PerfPerWattOptimizedOs  # drift: recorded PerfOptimized
      LogicalProc: Sometimes            # not a value the registry allows
      SystemModelName: R750-X           # read-only in the registry
    firmware:
      - {component: "*iDRAC.Embedded.1-1", version: "6.00.30.00"}
      - {component: "BIOS", version: "1.9.*"}   # recorded 1.8.2 (1.2.4 is the rollback copy)
      - {component: "*NIC.Slot.5-1", versions: ["24.39.*", "24.40.*"]}
  smc:
    provisioning_nic: {rule: first-onboard-up}
    bios:
      Above4GDecoding: Enabled          # Supermicro names it Above4GDecoding_0041
      PCIeACSCTL_1E3C: Disable
    firmware:
      - {component: "HGX_FW_GPU_SXM_*", version: "96.00.61.00.01"}
      - {component: "BMC", version: "11.01.01"}
      - {component: "Backup_BIOS", version: "1.4", required: false}  # "Not Present"
  hpe:
    provisioning_nic: {rule: first-onboard-up}
    firmware:
      - {component: "System ROM", version: "A42 v2.60 (08/11/2022)"}
      - component: "BlueField*"
        version: "24.41.1000"
        image: {url: "http://198.18.254.1:8080/fw/bf2.bfb", sha256: "%s"}
      - {component: "GPU*", version: "96.00.99.00.01"}
  dgx:
    provisioning_nic: {rule: first-onboard-up}
    bios:
      BootOption1: Network                    # as recorded
      AcpiSpcrConsoleRedirectionEnable: true  # a JSON boolean, as recorded
      AcpiSpcrBaudRate: "57600"               # drift: recorded 115200
    firmware:
      - {component: "HGX_FW_GPU_SXM_*", version: "96.00.89.00.01"}
      - {component: "HostBIOS_0", version: "01.02.*"}     # drift: recorded 01.01.03
  xcc:
    provisioning_nic: {rule: first-onboard-up}
    bios:
      Memory_ColdBootFast: Enabled            # as recorded; Bios/Pending holds every value
      BootModes_InfiniteBootRetri: Enabled    # misspelt
    firmware:
      - {component: "GPU*", version: "95.02.39.00.01"}
      - {component: "BMC-*", version: "42S-2.83"}   # the empty pending slot (-*) is no image
  gb200:
    provisioning_nic: {rule: first-onboard-up}
    bios:
      ActiveCores: 144                        # an integer, as recorded
      EGM: true                               # drift: recorded false
    firmware:
      - {component: "CX7_*", version: "28.43.*"}    # drift: recorded 28.42.1234
      - {component: "FW_BMC_0", version: "GB200Nvl-24.12-8"}
""" % ("ab" * 32)


@pytest.fixture(scope="module")
def site_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("baselines")
    tls = make_tls(root / "tls")
    site_dir = root / "site"
    site_dir.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    with ExitStack() as stack:
        hosts = []
        for u, (name, folder) in enumerate(MOCKUPS.items(), start=1):
            mockup = corpus_path("redfish", folder, "mockup", "redfish", "v1")
            url = stack.enter_context(sushy_static(mockup, root))
            (proxied,) = stack.enter_context(fault_proxy(url, root, tls=tls))
            port = urlsplit(proxied).port
            hosts.append(f"      - {{u: {u}, name: {name}, profile: {name}, "
                         f"bmc: {{address: 127.0.0.1, port: {port}}}}}")
        path = site_dir / "site.yml"
        path.write_text(
            "site: baselines\n"
            "settings:\n  redfish: {ca_bundle: bmc-ca.pem, timeout_s: 5, retries: 0}\n"
            "credentials:\n  bmc: {username: root, password: {env: BASELINE_BMC_PASSWORD}}\n"
            + PROFILES
            + "racks:\n  - name: r1\n    index: 1\n"
            "    defaults: {bmc: {credentials: bmc}}\n    hosts:\n" + "\n".join(hosts) + "\n")
        yield path


@pytest.fixture
def env(site_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BASELINE_BMC_PASSWORD", "calvin")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    return site_file


def _items(report: list[dict]) -> dict[str, dict[str, dict]]:
    return {r["host"]: {i["name"]: i for i in r["items"]} for r in report}


def test_bios_check_judges_each_attribute_against_the_recordings(env: Path, tmp_path: Path):
    junit, prom = tmp_path / "bios.xml", tmp_path / "bios.prom"
    result = CliRunner().invoke(app, ["bios", "check", "--site", str(env), "--json",
                                      "--junit", str(junit), "--textfile", str(prom)])
    assert result.exit_code == 3, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert {r["host"] for r in report} == {"dell", "smc", "dgx", "xcc", "gb200"}  # hpe: none
    items = _items(report)
    dell = items["dell"]
    assert dell["ProcVirtualization"]["status"] == "ok"
    assert dell["AcPwrRcvryUserDelay"]["status"] == "ok"
    assert (dell["SysProfile"]["status"], dell["SysProfile"]["have"]) == ("drift", "PerfOptimized")
    assert dell["LogicalProc"]["status"] == "invalid"
    assert "Enabled, Disabled" in dell["LogicalProc"]["hint"]
    assert dell["SystemModelName"]["status"] == "read-only"
    smc = items["smc"]
    assert smc["Above4GDecoding"]["status"] == "unknown"
    assert "'Above4GDecoding_0041'" in smc["Above4GDecoding"]["hint"]
    assert smc["PCIeACSCTL_1E3C"]["status"] in ("ok", "drift")
    dgx = items["dgx"]
    assert [dgx[n]["status"] for n in ("BootOption1", "AcpiSpcrConsoleRedirectionEnable",
                                       "AcpiSpcrBaudRate")] == ["ok", "ok", "drift"]
    xcc = items["xcc"]
    assert xcc["Memory_ColdBootFast"]["status"] == "ok"  # not "pending": Pending == current
    assert xcc["BootModes_InfiniteBootRetri"]["status"] == "unknown"
    assert "'BootModes_InfiniteBootRetry'" in xcc["BootModes_InfiniteBootRetri"]["hint"]
    gb = items["gb200"]
    assert (gb["ActiveCores"]["status"], gb["EGM"]["status"], gb["EGM"]["have"]) == (
        "ok", "drift", "false")
    warnings = {r["host"]: r["warnings"] for r in report}
    assert any("registry" in w for w in warnings["dgx"])  # trimmed recording: named, not silent
    suites = {s.get("name"): s for s in ET.parse(junit).getroot()}
    assert suites["dell"].get("failures") == "3"
    text = prom.read_text()
    assert 'provisioner_bios_compliant{host="dell"} 0' in text
    # Labels carry no verdict (a series keeps its name when the host is fixed).
    assert 'provisioner_bios_item_compliant{host="dell",entry="SysProfile",item="SysProfile"} 0' \
        in text
    assert 'provisioner_bios_readable{host="dell"} 1' in text


def test_firmware_check_matches_components_by_id_or_name(env: Path):
    result = CliRunner().invoke(app, ["firmware", "check", "--site", str(env), "--json"])
    assert result.exit_code == 3, result.stdout + result.stderr
    items = _items(json.loads(result.stdout))
    dell = items["dell"]
    idrac = [i for n, i in dell.items() if "iDRAC.Embedded.1-1" in n]
    assert idrac and all(i["status"] == "ok" for i in idrac)
    bios = [i for n, i in dell.items() if n.startswith("BIOS")]
    assert bios and {i["have"] for i in bios} == {"1.8.2"}  # the Previous- copy is not judged
    assert all(i["status"] == "drift" for i in bios)
    assert "image" in bios[0]["hint"]  # no image in the baseline: says how to add one
    assert all(i["status"] == "ok" for n, i in dell.items() if "NIC.Slot.5-1" in n)
    smc = items["smc"]
    gpus = [i for n, i in smc.items() if "[HGX_FW_GPU_SXM_" in n]
    assert len(gpus) == 8 and all(i["status"] == "ok" for i in gpus)
    assert smc["Backup_BIOS"]["status"] == "ok"  # not required, and not present
    hpe = items["hpe"]
    bf = next(i for n, i in hpe.items() if n.startswith("BlueField"))
    assert (bf["status"], bf["have"]) == ("drift", "24.40.1000")
    assert "provision firmware update" in bf["hint"]
    assert hpe["GPU*"]["status"] == "missing"
    dgx = items["dgx"]
    assert [i["status"] for n, i in dgx.items() if "HGX_FW_GPU_SXM_" in n] == ["ok"] * 8
    assert (dgx["HostBIOS_0"]["status"], dgx["HostBIOS_0"]["have"]) == ("drift", "01.01.03")
    xcc = items["xcc"]
    assert not any("Pending" in n for n in xcc)
    assert all(i["status"] == "ok" for n, i in xcc.items())
    gb = items["gb200"]
    cx7 = [i for n, i in gb.items() if "[CX7_" in n]
    assert cx7 and {(i["status"], i["have"]) for i in cx7} == {("drift", "28.42.1234")}
    assert all(i["status"] == "ok" for n, i in gb.items() if "FW_BMC_0" in n)


def test_table_names_drift_per_host_within_80_columns(env: Path):
    result = CliRunner(env={"COLUMNS": "80"}).invoke(
        app, ["firmware", "check", "dell", "--site", str(env)])
    assert result.exit_code == 3
    assert "firmware baseline: 0/1 hosts compliant" in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    assert "1.8.2" in result.stdout and "drift" in result.stdout


def test_hosts_without_a_baseline_are_refused_with_a_hint(env: Path):
    result = CliRunner().invoke(app, ["bios", "check", "hpe", "--site", str(env)])
    assert result.exit_code == 2
    assert "has a bios baseline" in result.stdout + result.stderr


APPLY_PROFILES = """
profiles:
  dell-ok:
    provisioning_nic: {rule: first-onboard-up}
    bios: {SysProfile: PerfPerWattOptimizedOs, ProcVirtualization: Enabled}
  dell-bad:
    provisioning_nic: {rule: first-onboard-up}
    bios: {SysProfile: PerfPerWattOptimizedOs, LogicalProc: Sometimes}
  hpe:
    provisioning_nic: {rule: first-onboard-up}
    bios: {Sriov: Disabled}
"""


@pytest.fixture(scope="module")
def apply_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """d1/d2/d3 on one iDRAC recording (three listeners), h1 on the iLO one; yields the site
    file and the two sushy-static request logs."""
    root = tmp_path_factory.mktemp("apply")
    tls = make_tls(root / "tls")
    site_dir = root / "site"
    site_dir.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    with ExitStack() as stack:
        dell_dir, hpe_dir = root / "dell", root / "hpe"
        dell_dir.mkdir()
        hpe_dir.mkdir()
        dell = stack.enter_context(sushy_static(
            corpus_path("redfish", MOCKUPS["dell"], "mockup", "redfish", "v1"), dell_dir))
        hpe = stack.enter_context(sushy_static(
            corpus_path("redfish", MOCKUPS["hpe"], "mockup", "redfish", "v1"), hpe_dir))
        d_urls = stack.enter_context(fault_proxy(dell, root, tls=tls, listen=("127.0.0.1",) * 3))
        (h_url,) = stack.enter_context(fault_proxy(hpe, root, tls=tls))
        hosts = [(1, "d1", "dell-ok", d_urls[0]), (2, "d2", "dell-bad", d_urls[1]),
                 (3, "d3", "dell-ok", d_urls[2]), (4, "h1", "hpe", h_url)]
        lines = [f"      - {{u: {u}, name: {n}, profile: {p}, bmc: {{address: 127.0.0.1, "
                 f"port: {urlsplit(url).port}}}}}" for u, n, p, url in hosts]
        path = site_dir / "site.yml"
        path.write_text(
            "site: bios-apply\n"
            "settings:\n  redfish: {ca_bundle: bmc-ca.pem, timeout_s: 5, retries: 0}\n"
            "credentials:\n  bmc: {username: root, password: {env: BASELINE_BMC_PASSWORD}}\n"
            + APPLY_PROFILES
            + "racks:\n  - name: r1\n    index: 1\n"
            "    defaults: {bmc: {credentials: bmc}}\n    hosts:\n" + "\n".join(lines) + "\n")
        yield path, next(dell_dir.glob("static-*.log")), next(hpe_dir.glob("static-*.log"))


def test_bios_apply_refuses_before_sending_spares_serving_hosts_and_verifies(
        apply_site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site, dell_log, hpe_log = apply_site
    monkeypatch.setenv("BASELINE_BMC_PASSWORD", "calvin")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    from provisioner.inventory import load_site
    from provisioner.state import NodeState, StateStore

    store = StateStore.for_site(load_site(site))
    store.ensure_hosts(["d3"])
    for state in (NodeState.DISCOVERED, NodeState.DEPLOYING, NodeState.DEPLOYED,
                  NodeState.CONFIGURED, NodeState.VALIDATED):
        store.transition("d3", state, reason="test: a host in use")
    before = len(dell_log.read_text())
    result = CliRunner().invoke(app, ["bios", "apply", "d1", "d2", "d3", "h1", "--site",
                                      str(site), "--yes", "--timeout", "1", "--json"])
    assert result.exit_code == 3, result.stdout + result.stderr
    res = {r["host"]: r for r in json.loads(result.stdout)}
    # sushy-static accepts every PATCH and applies nothing: read-back is what catches it.
    assert res["d1"]["reason"] == "not applied after reset"
    assert "SysProfile=PerfPerWattOptimizedOs not applied after the reset at " \
        in res["d1"]["error"]
    assert "the BIOS shows SysProfile=PerfOptimized" in res["d1"]["error"]
    assert res["d2"]["reason"] == "baseline refused"
    assert "LogicalProc=Sometimes is invalid" in res["d2"]["error"]
    assert res["d3"]["reason"] == "serving"
    assert "provision maintenance d3" in res["d3"]["error"]
    assert res["h1"]["reason"] == "not applied after reset"
    sent = dell_log.read_text()[before:]
    assert sent.count('"SysProfile": "PerfPerWattOptimizedOs"') == 1  # d1 only
    assert "LogicalProc" not in sent
    assert '"ApplyTime": "OnReset"' in sent
    assert '"ResetType": "ForceRestart"' in sent
    hpe_sent = hpe_log.read_text()
    assert '{"Attributes": {"Sriov": "Disabled"}}' in hpe_sent
    assert "PATCH /redfish/v1/systems/1/bios/settings/" in hpe_sent
    events = {h: [e for e in store.events(h) if e.kind == "bios"] for h in res}
    assert all(len(e) == 1 for e in events.values()), events
    assert store.get("d3").state is NodeState.VALIDATED
    record = events["d1"][0].data or {}
    assert record["outcome"] == "not-applied"
    assert record["not_applied"] == {"SysProfile": "PerfPerWattOptimizedOs"}

    # Finding 7: the value never applies; the next apply does not reboot the host again
    # for it, and says when the reset was; check names it "not-applied", not "pending".
    resets = dell_log.read_text().count("ComputerSystem.Reset")
    again = CliRunner().invoke(app, ["bios", "apply", "d1", "--site", str(site), "--yes",
                                     "--timeout", "1", "--json"])
    assert again.exit_code == 3, again.stdout + again.stderr
    (one,) = json.loads(again.stdout)
    assert one["reason"] == "not applied before"
    assert f"not applied after the reset at {record['reset_at']}" in one["error"]
    assert dell_log.read_text().count("ComputerSystem.Reset") == resets
    check = CliRunner().invoke(app, ["bios", "check", "d1", "--site", str(site), "--json"])
    (report,) = json.loads(check.stdout)
    (item,) = [i for i in report["items"] if i["name"] == "SysProfile"]
    assert item["status"] == "not-applied" and record["reset_at"] in item["hint"]

def test_bios_apply_without_reboot_only_stages(apply_site, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch):
    site, _dell_log, hpe_log = apply_site
    monkeypatch.setenv("BASELINE_BMC_PASSWORD", "calvin")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    before = len(hpe_log.read_text())
    result = CliRunner().invoke(app, ["bios", "apply", "h1", "--site", str(site),
                                      "--no-reboot", "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    (res,) = json.loads(result.stdout)
    assert res["detail"] == "staged Sriov: applied at the host's next reset"
    sent = hpe_log.read_text()[before:]
    assert "Sriov" in sent and "ComputerSystem.Reset" not in sent


def test_bios_apply_without_a_terminal_asks_for_yes(apply_site, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    site, _d, _h = apply_site
    monkeypatch.setenv("BASELINE_BMC_PASSWORD", "calvin")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["bios", "apply", "h1", "--site", str(site)])
    assert result.exit_code == 2
    assert "--yes" in result.stdout + result.stderr
