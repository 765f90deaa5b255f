"""Every command that changes a host takes that host's lock: while another process holds it,
power, boot, discover, health, bios apply, firmware update, rack, reimage, configure and
maintenance refuse the host (exit 4, naming the holder) and touch nothing; other hosts of the
site go on. `lab up/down` need the whole site. Read commands never wait.

The site's BMCs point at a closed loopback port, so a command that wrongly went ahead fails at
once on this machine, with no traffic leaving it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode, SiteLocked
from provisioner.state import StateStore
from tests.support import machine

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()

SITE = """\
site: locks
settings:
  deploy_backend: embedded
  ssh_user: provision
  redfish: {verify_tls: false, timeout_s: 2, retries: 0}
  embedded: {interface: lo, server_address: 127.0.0.1, http_port: 9}
networks:
  provisioning: {cidr: 127.0.10.0/24}
credentials:
  bmc: {username: root, password: {env: LOCKS_BMC_PASSWORD}}
profiles:
  node:
    provisioning_nic: {port_id: NIC.1}
    bios: {BootMode: Uefi}
    firmware:
      - {component: "*BIOS*", version: "1.0"}
racks:
  - name: r1
    index: 1
    defaults: {profile: node}
    hosts:
      - {u: 1, name: lock-a, bmc: {address: 127.0.0.1, port: 9, credentials: bmc, system: A}}
      - {u: 2, name: lock-b, bmc: {address: 127.0.0.1, port: 9, credentials: bmc, system: B}}
"""

HOLDER = """
import sys
from provisioner.state import StateStore
from tests.support import machine
store = StateStore(sys.argv[1], site=sys.argv[2])
lease = store.hold(sys.argv[3], sys.argv[4].split(","))
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "inventory" / "locks" / "site.yml"
    path.parent.mkdir(parents=True)
    path.write_text(SITE)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LOCKS_BMC_PASSWORD", "not-used")
    return path


@pytest.fixture
def held(site: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holds lock-a, as `provision reimage lock-a` would."""
    state = tmp_path / "state" / "locks.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state), "locks", "provision reimage --site locks",
         "lock-a"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)


VERBS = {
    "power": ["power", "off", "lock-a"],
    "boot": ["boot", "pxe", "lock-a"],
    "discover": ["discover", "lock-a"],
    "health": ["health", "lock-a"],
    "bios apply": ["bios", "apply", "lock-a", "--yes"],
    "firmware update": ["firmware", "update", "lock-a", "--yes"],
    "rack": ["rack", "lock-a"],
    "reimage": ["reimage", "lock-a", "--yes"],
    "configure": ["configure", "lock-a"],
    "maintenance": ["maintenance", "lock-a"],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_held_host_is_refused_by_every_command_that_changes_it(
    verb: str, site: Path, held: subprocess.Popen[str], tmp_path: Path
) -> None:
    res = runner.invoke(app, [*VERBS[verb], "--site", str(site)])
    assert res.exit_code == ExitCode.LOCKED, res.output
    assert "lock-a: `provision reimage --site locks`" in res.output
    assert f"(pid {held.pid} " in res.output
    assert "Traceback" not in res.output
    # nothing was recorded for the held host
    store = StateStore(tmp_path / "state" / "locks.sqlite", site="locks", readonly=True)
    known = {r.name for r in store.all()}
    assert ([e.kind for e in store.events("lock-a")] if "lock-a" in known else []) in (
        [], ["enrolled"])


def test_other_hosts_go_on_while_one_is_held(site: Path, held: subprocess.Popen[str],
                                             tmp_path: Path) -> None:
    res = runner.invoke(app, ["power", "off", "lock-a", "lock-b", "--site", str(site), "--json"])
    # lock-b was tried (its BMC is a closed port: a partial failure), lock-a left out
    assert res.exit_code == ExitCode.PARTIAL_FAILURE, res.output
    assert [r["host"] for r in json.loads(res.stdout)] == ["lock-b"]
    assert "skipped lock-a: in use by `provision reimage --site locks`" in res.stderr
    store = StateStore(tmp_path / "state" / "locks.sqlite", site="locks", readonly=True)
    assert [e.kind for e in store.events("lock-b") if e.kind == "power"] == ["power"]
    assert "lock-a" not in {r.name for r in store.all()}  # not even enrolled


def test_maintenance_of_the_other_host_while_one_is_held(site: Path,
                                                         held: subprocess.Popen[str]) -> None:
    res = runner.invoke(app, ["maintenance", "lock-b", "--site", str(site), "-r", "PSU"])
    assert res.exit_code == 0, res.output
    assert "lock-b: enrolled -> maintenance" in res.output


@machine.needs("root")
def test_lab_up_and_down_need_the_whole_site(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    from provisioner.lab import daemons, lab

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_LAB_NETNS", "plablock")
    monkeypatch.setenv("PROVISIONER_LAB_STATE_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("PROVISIONER_INVENTORY", str(tmp_path / "inv"))
    monkeypatch.delenv("PROVISIONER_LAB_SLOT", raising=False)
    monkeypatch.setattr(lab, "LOCK_DIR", tmp_path / "lock")
    monkeypatch.setattr(daemons, "missing_tools", lambda firmware="bios": [])
    built: list[str] = []
    monkeypatch.setattr(lab, "_up", lambda plan: built.append(plan.netns))  # builds nothing
    holder = StateStore.for_site("lab").hold("provision health --site lab", ["lab-host01"])
    try:
        for verb in ("up", "down"):
            res = runner.invoke(app, ["lab", verb])
            assert res.exit_code == ExitCode.LOCKED, res.output
            assert "is in use by `provision health --site lab`" in res.output
            assert f"`provision lab {verb}` needs the whole site" in res.output
    finally:
        holder.release()
    assert built == []
    # while the lab is rebuilt, no per-host run of its site starts
    refused = pytest.raises(SiteLocked, match="being changed as a whole by `provision lab down`")
    with lab._whole_site("provision lab down"), refused:
        StateStore.for_site("lab").hold("provision power on", ["lab-host01"])


def test_read_commands_never_wait_for_a_writer(site: Path, tmp_path: Path) -> None:
    state = tmp_path / "state" / "locks.sqlite"
    StateStore(state, site="locks").ensure_hosts(["lock-a"])
    writer = sqlite3.connect(state, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another command in the middle of a write
    writer.execute("UPDATE hosts SET reason='mid-write' WHERE name='lock-a'")
    try:
        for argv in (["status", "--json"], ["history", "lock-a", "--json"]):
            res = runner.invoke(app, [*argv, "--site", str(site)])
            assert res.exit_code == 0, res.output
        assert json.loads(runner.invoke(app, ["status", "--json", "--site", str(site)]).stdout)[0][
            "reason"] == ""  # the last committed state
    finally:
        writer.execute("ROLLBACK")
        writer.close()
