"""A state file that is damaged, truncated, empty, read-only or on a full disk: one clear message
naming the file and the way out, exit 2 (damaged) or 5 (cannot write), never a traceback; read
commands keep working with a read-only state directory; `provision state check|backup|restore`
find and repair the damage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode
from provisioner.state import NodeState, StateStore
from tests.support import machine

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "inventory" / "example"
HOST = "gpu-r01-u03"
runner = CliRunner()


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example site's state dir, with a history worth losing."""
    d = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(d))
    store = StateStore(d / "example.sqlite", site="example")
    names = [f"gpu-r01-u{u:02d}" for u in range(3, 35, 2)]
    store.ensure_hosts(names)
    for n in names:
        store.record_facts(n, {"nics": [{"mac": f"b8:3f:d2:00:00:{i:02x}", "note": "x" * 400}
                                        for i in range(12)]})
        store.transition(n, NodeState.DISCOVERED, reason="BMC discovered")
    store.close()
    return d


def cli(*args: str) -> object:
    return runner.invoke(app, [*args, "--site", "example"])


def test_a_damaged_file_is_named_with_the_way_out(state: Path) -> None:
    (state / "example.sqlite").write_bytes(b"this is not SQLite" * 300)
    for argv in (["status"], ["history", HOST], ["maintenance", HOST], ["rack", "--dry-run"]):
        res = cli(*argv)
        assert res.exit_code == ExitCode.BAD_INPUT, (argv, res.output)
        assert f"the state file {state / 'example.sqlite'} is damaged" in res.output
        assert "provision state restore BACKUP --site example" in res.output
        assert "Traceback" not in res.output


def test_a_truncated_file_is_damaged_not_a_site_without_state(state: Path) -> None:
    db = state / "example.sqlite"
    data = db.read_bytes()
    assert len(data) > 64 * 1024  # the hosts' pages run past the cut
    db.write_bytes(data[: len(data) // 2])
    res = cli("status", "--json")
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "is damaged (database disk image is malformed)" in res.output
    res = cli("state", "check")
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    # cut to nothing: not read as a new, empty site (every host would look uninstalled)
    db.write_bytes(b"")
    for argv in (["status"], ["rack", HOST]):
        res = cli(*argv)
        assert res.exit_code == ExitCode.BAD_INPUT, res.output
        assert "is damaged (the file is empty: truncated?)" in res.output
    assert db.stat().st_size == 0  # nothing written over it


def test_check_backup_and_restore_bring_a_site_back(state: Path, tmp_path: Path) -> None:
    res = cli("state", "check", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is True and doc["hosts"] == 16 and doc["problems"] == []
    backup = tmp_path / "backups" / "example.bak"
    res = cli("state", "backup", str(backup))
    assert res.exit_code == 0, res.output
    db = state / "example.sqlite"
    db.write_bytes(db.read_bytes()[:8192])  # damaged after the backup
    assert cli("status").exit_code == ExitCode.BAD_INPUT
    res = cli("state", "restore", str(backup), "--yes")
    assert res.exit_code == 0, res.output
    kept = [p for p in state.iterdir() if p.name.startswith("example.sqlite.replaced-")
            and not p.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1 and kept[0].stat().st_size == 8192  # the damaged file is kept, not deleted
    res = cli("status", "--json", HOST)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["state"] == "discovered"


def test_restore_is_refused_while_a_run_holds_a_host(state: Path, tmp_path: Path) -> None:
    backup = tmp_path / "example.bak"
    assert cli("state", "backup", str(backup)).exit_code == 0
    lease = StateStore.for_site("example").hold("provision reimage --site example", [HOST])
    try:
        res = cli("state", "restore", str(backup), "--yes")
    finally:
        lease.release()
    assert res.exit_code == ExitCode.LOCKED, res.output
    assert "`provision state restore --site example` needs the whole site" in res.output


def _in_namespace(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `provision ARGS` in a private mount namespace after ``script`` set up its mounts."""
    provision = [sys.executable, "-c", "from provisioner.cli.main import main; main()"]
    return subprocess.run(
        ["unshare", "-m", "sh", "-ec", f'{script}\nexec "$@"', "sh", *provision, *args],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@machine.needs("root")
def test_a_read_only_state_directory_reads_and_refuses_writes_clearly(state: Path) -> None:
    ro = f'mount --bind "{state}" "{state}"\nmount -o remount,bind,ro "{state}"'
    for argv in (["status", "--json"], ["history", HOST, "--json"], ["hosts", "--json"],
                 ["state", "check"], ["rack", "--dry-run"]):
        res = _in_namespace(ro, *argv, "--site", "example")
        assert res.returncode == 0, (argv, res.stdout, res.stderr)
    assert json.loads(_in_namespace(ro, "status", "--json", HOST, "--site", "example").stdout)[
        0]["state"] == "discovered"
    for argv in (["maintenance", HOST], ["power", "off", HOST], ["state", "prune"]):
        res = _in_namespace(ro, *argv, "--site", "example")
        assert res.returncode == ExitCode.NOT_READY, (argv, res.stdout, res.stderr)
        assert f"the state directory {state} is read-only" in res.stderr
        assert "read-only commands (status, history, hosts) work meanwhile" in res.stderr
        assert "Traceback" not in res.stderr


@machine.needs("root")
def test_a_full_disk_refuses_the_change_whole_and_reads_go_on(state: Path, tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    state.rename(staging)
    state.mkdir()
    full = (f'mount -t tmpfs -o size=2m tmpfs "{state}"\ncp -a "{staging}"/. "{state}"/\n'
            f'dd if=/dev/zero of="{state}/filler" bs=4096 2>/dev/null || true')
    res = _in_namespace(full, "maintenance", HOST, "-r", "PSU", "--site", "example")
    assert res.returncode == ExitCode.NOT_READY, (res.stdout, res.stderr)
    assert "no space left for the state file" in res.stderr
    assert "the change was rolled back, nothing is half-written" in res.stderr
    assert "Traceback" not in res.stderr
    res = _in_namespace(full, "status", "--json", HOST, "--site", "example")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[0]["state"] == "discovered"
