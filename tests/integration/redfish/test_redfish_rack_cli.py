"""`provision discover/power/boot` across a small emulated rack with broken BMCs among it.

Every BMC is real: sushy-emulator (fake driver, basic auth) behind TLS proxies that add
faults, a socket that never answers, a certificate from the wrong CA and a wrong password.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.state import NodeState, StateStore
from provisioner.testing.redfish_peers import (
    fake_system,
    fault_proxy,
    make_tls,
    silent_listener,
    sushy_emulator,
    write_emulator_config,
)
from provisioner.workflow.bmc_access import open_bmc

USER, PASSWORD = "admin", "rack-Pa55word"
U1 = "6f9619ff-8b86-d011-b42d-00c04fc96401"
U2 = "6f9619ff-8b86-d011-b42d-00c04fc96402"
U3 = "6f9619ff-8b86-d011-b42d-00c04fc96403"
DISKS = [
    {"Id": "d1", "Name": "disk 1", "CapacityBytes": 480103981056, "Protocol": "SATA"},
    {"Id": "d2", "Name": "disk 2", "CapacityBytes": 3840755982336, "Protocol": "SAS"},
]

HOSTS = {
    # name: (u, proxy key or special, credentials ref, extra bmc keys)
    "t1-u01": "good",
    "t1-u02": "flaky",  # 500s, then recovers
    "t1-u03": "sessions",  # grants sessions (must be logged out)
    "t1-u04": "nonics",  # a system without EthernetInterfaces members
    "t1-u05": "wrongpw",
    "t1-u06": "silent",
    "t1-u07": "badca",
}
EXPECT_FAIL = {"t1-u04": "no PXE NIC matched", "t1-u05": "auth failed",
               "t1-u06": "timeout", "t1-u07": "TLS"}


def _site_yaml(ports: dict[str, int]) -> str:
    lines = []
    for u, (name, kind) in enumerate(HOSTS.items(), start=1):
        extra = ""
        if kind == "wrongpw":
            extra = ", credentials: wrong"
        if kind == "badca":
            extra = ", ca_bundle: other-ca.pem"
        lines.append(f"      - {{u: {u}, bmc: {{address: 127.0.0.1, port: {ports[name]}{extra}}}}}")
    hosts = "\n".join(lines)
    return f"""site: rftest
settings:
  redfish: {{verify_tls: true, ca_bundle: bmc-ca.pem, timeout_s: 4, retries: 2, max_parallel: 8}}
  max_clock_skew_s: 30
networks:
  provisioning: {{cidr: 198.18.0.0/24, reserved: ["198.18.0.1-198.18.0.99"]}}
credentials:
  good: {{username: {USER}, password: {{env: RFTEST_BMC_PASSWORD}}}}
  wrong: {{username: {USER}, password: {{env: RFTEST_WRONG_PASSWORD}}}}
profiles:
  vm:
    gpus: 0
    ib_hcas: 0
    units: 1
    provisioning_nic: {{mac_prefix: "52:54:00:18:00"}}
racks:
  - name: t1
    index: 1
    units: 42
    host_name_template: "t1-u{{u:02d}}"
    defaults: {{profile: vm, bmc: {{vendor: generic, credentials: good}}}}
    hosts:
{hosts}
"""


@pytest.fixture(scope="module")
def rack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A site directory whose hosts' BMCs are all running; yields the site file."""
    root = tmp_path_factory.mktemp("rack")
    tls = make_tls(root / "tls")
    other = make_tls(root / "other")
    site_dir = root / "site"
    site_dir.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    shutil.copy(other.ca, site_dir / "other-ca.pem")
    with ExitStack() as stack:
        emu = {}
        for key, uuid, macs in (
            ("a", U1, ["52:54:00:18:00:01", "52:54:00:18:01:01"]),
            ("b", U2, ["52:54:00:18:00:02", "52:54:00:18:01:02"]),
            ("c", U3, []),
        ):
            conf = write_emulator_config(root / f"emu-{key}",
                                         [fake_system(uuid, f"node-{key}", macs, "Off")],
                                         drives={uuid: DISKS}, auth=(USER, PASSWORD))
            emu[key] = stack.enter_context(sushy_emulator(conf))
        logs = root / "logs"
        logs.mkdir()
        # One listener per BMC: the inventory refuses two hosts sharing a BMC address.
        good, wrongpw, badca = stack.enter_context(
            fault_proxy(emu["a"], logs, tls=tls, listen=("127.0.0.1",) * 3))
        (flaky,) = stack.enter_context(fault_proxy(emu["b"], logs, tls=tls,
                                                   args=["--fail-first", "2"]))
        (sessions,) = stack.enter_context(fault_proxy(emu["a"], logs, tls=tls,
                                                      args=["--sessions", "1"]))
        (nonics,) = stack.enter_context(fault_proxy(emu["c"], logs, tls=tls))
        silent = stack.enter_context(silent_listener())
        urls = {"good": good, "flaky": flaky, "sessions": sessions, "nonics": nonics,
                "wrongpw": wrongpw, "silent": silent, "badca": badca}
        ports = {name: int(urlsplit(urls[kind]).port or 0) for name, kind in HOSTS.items()}
        site_file = site_dir / "site.yml"
        site_file.write_text(_site_yaml(ports))
        yield site_file


@pytest.fixture
def env(rack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RFTEST_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("RFTEST_WRONG_PASSWORD", "not-the-password")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    return rack


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_discover_reads_good_bmcs_and_names_each_broken_one(env: Path):
    code, out, err = run("discover", "--site", str(env), "--json")
    assert code == 3, err
    results = {r["host"]: r for r in json.loads(out)}
    assert set(results) == set(HOSTS)
    for host, reason in EXPECT_FAIL.items():
        assert results[host]["ok"] is False
        assert results[host]["reason"] == reason, results[host]["error"]
    for host in ("t1-u01", "t1-u02", "t1-u03"):
        res = results[host]
        assert res["ok"], res["error"]
        facts = res["facts"]
        assert facts["provisioning_mac"].startswith("52:54:00:18:00:")
        assert {n["mac"] for n in facts["nics"]} >= {facts["provisioning_mac"]}
        assert [d["size_bytes"] for d in facts["drives"]] == [480103981056, 3840755982336]
        assert all(d["serial"] for d in facts["drives"])
        assert abs(facts["clock_skew_s"]) < 30
        assert facts["bmc_datetime"]
    assert results["t1-u02"]["facts"]["provisioning_mac"] == "52:54:00:18:00:02"
    assert results["t1-u03"]["facts"]["extra"]["auth"] == "session"
    assert results["t1-u01"]["facts"]["extra"]["auth"] == "basic"
    # The flaky BMC needed its two retries; the good one did not.
    assert (results["t1-u02"]["facts"]["extra"]["requests"]
            == results["t1-u01"]["facts"]["extra"]["requests"] + 2)
    assert PASSWORD not in out + err and "not-the-password" not in out + err

    store = StateStore.for_site(load_site(env))
    assert store.get("t1-u01").state == NodeState.DISCOVERED
    assert store.get("t1-u01").facts["provisioning_mac"] == "52:54:00:18:00:01"
    failed = store.get("t1-u05")
    assert failed.state == NodeState.FAILED and failed.reason == "discovery: auth failed"
    # Facts read before the NIC rule failed are kept for the engineer to look at.
    nonics = store.get("t1-u04")
    assert nonics.state == NodeState.FAILED and nonics.facts["nics"] == []
    assert nonics.facts["uuid"] == U3


def test_discover_table_lists_failures_with_reasons(env: Path):
    code, out, err = run("discover", "t1-u0[1-6]", "--site", str(env))
    assert code == 3
    assert "discovery: 3/6 hosts read" in out
    assert "t1-u06 timeout" in err and "t1-u05 auth failed" in err
    assert "no port matches the provisioning NIC rule (mac_prefix=52:54:00:18:00)" in err
    assert "discovery failed on 3 of 6 hosts" in err


def test_discover_only_healthy_hosts_exits_zero(env: Path):
    code, out, err = run("discover", "t1-u01", "t1-u03", "--site", str(env))
    assert code == 0, err
    assert "2/2 hosts read" in out


def test_power_and_boot(env: Path):
    code, out, err = run("power", "on", "t1-u01", "t1-u02", "--site", str(env), "--wait", "20")
    assert code == 0, out + err
    code, out, err = run("power", "status", "t1-u0[12]", "--site", str(env), "--json")
    assert code == 0
    assert {r["host"]: r["detail"] for r in json.loads(out)} == {"t1-u01": "On", "t1-u02": "On"}
    code, out, err = run("boot", "pxe", "t1-u01", "--site", str(env), "--json")
    assert code == 0, out + err
    (res,) = json.loads(out)
    assert res["detail"] == "Pxe (once)"
    assert "persistent" in res["warnings"][0]  # sushy-emulator keeps overrides Continuous
    code, out, err = run("boot", "disk", "t1-u01", "--persistent", "--site", str(env))
    assert code == 0, out + err
    # sushy-emulator turns UefiHttp without a URI into Pxe: read-back catches it.
    code, out, err = run("boot", "http", "t1-u01", "--site", str(env), "--json")
    assert code == 3
    assert json.loads(out)[0]["reason"] == "not applied"
    code, out, err = run("power", "off", "t1-u01", "--site", str(env))
    assert code == 0, out + err


def test_power_refuses_maintenance_hosts_unless_forced(env: Path):
    store = StateStore.for_site(load_site(env))
    store.ensure_hosts(["t1-u01"])
    store.transition("t1-u01", NodeState.MAINTENANCE, reason="bad PSU")
    code, out, err = run("power", "status", "t1-u01", "--site", str(env))
    assert code == 0  # reading is always allowed
    code, out, err = run("power", "cycle", "t1-u01", "--site", str(env))
    assert code == 0 and "in maintenance" in err
    code, out, err = run("power", "cycle", "t1-u01", "--site", str(env), "--force")
    assert code == 0, out + err
    assert "t1-u01" in out


def test_power_needs_hosts(env: Path):
    code, _out, err = run("power", "on", "--site", str(env))
    assert code == 2
    assert "name the hosts" in err


def test_power_status_reads_every_host_by_default(env: Path):
    # #36 item 10: a read verb reads the whole site without names, as status and discover do
    code, out, err = run("power", "status", "--site", str(env), "--json")
    assert code in (0, 3), out + err
    assert {r["host"] for r in json.loads(out)} == {h.name for h in load_site(env).hosts}


@pytest.fixture(scope="module")
def iso_url(tmp_path_factory) -> Iterator[str]:
    """A tiny ISO on a local HTTP server, downloaded by the emulated BMC like a real one."""
    www = tmp_path_factory.mktemp("www")
    (www / "installer.iso").write_bytes(b"\0" * 2048)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/installer.iso"
    server.shutdown()


def test_boot_from_an_iso_then_eject(env: Path, iso_url: str):
    code, out, err = run("boot", "cd", "t1-u03", "--image", iso_url, "--site", str(env),
                         "--json")
    assert code == 0, out + err
    assert json.loads(out)[0]["detail"] == f"Cd (once, {iso_url} inserted)"
    code, out, err = run("boot", "disk", "t1-u03", "--eject", "--persistent", "--site",
                         str(env), "--json")
    assert code == 0, out + err
    assert json.loads(out)[0]["detail"] == "Hdd (persistent, media ejected)"


def test_boot_option_mistakes_are_input_errors(env: Path, iso_url: str):
    code, _out, err = run("boot", "pxe", "t1-u01", "--image", iso_url, "--site", str(env))
    assert code == 2 and "--image goes with `boot cd`" in err
    code, _out, err = run("boot", "cd", "t1-u01", "--image", iso_url, "--eject",
                          "--site", str(env))
    assert code == 2 and "contradict" in err


def test_clock_skew_beyond_the_site_limit_is_flagged(env: Path):
    site = load_site(env)
    bmc = open_bmc(site, site.host("t1-u02"))
    try:
        bmc.set_clock(datetime.now(UTC) - timedelta(hours=2))
        code, out, err = run("discover", "t1-u02", "--site", str(env), "--json")
        assert code == 0, err
        (res,) = json.loads(out)
        assert res["clock_skew_alert"] is True
        assert -7300 < res["facts"]["clock_skew_s"] < -7100
        code, out, err = run("discover", "t1-u02", "--site", str(env))
        assert "BMC clock is off by -72" in err and "max_clock_skew_s=30" in err
    finally:
        bmc.set_clock()
        bmc.close()
