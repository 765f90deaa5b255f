"""The site's locks across processes: a lock per host, the site lock shared or whole, the deploy
server one run at a time, the holder named in every refusal, and nothing left by a dead run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.exceptions import SiteLocked
from provisioner.state import SiteLocks
from provisioner.state.locks import host_byte

REPO = Path(__file__).resolve().parents[3]

# A second process that takes locks and holds them until its stdin closes.
HOLDER = """
import sys
from provisioner.state import SiteLocks
locks = SiteLocks(__import__("pathlib").Path(sys.argv[1]), "t")
hosts = [h for h in sys.argv[3].split(",") if h]
lease = locks.acquire(sys.argv[2], hosts, site_wide="site-wide" in sys.argv[4:])
if "deploy-server" in sys.argv[4:]:
    lease.hold_deploy_server()
print("locked", flush=True)
sys.stdin.read()
"""


class Holder:
    def __init__(self, state: Path, command: str, hosts: list[str], *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(state), command, ",".join(hosts), *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == "locked", line

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for h in started:
        if h.proc.poll() is None:
            h.proc.kill()
            h.proc.wait()


def test_runs_on_different_hosts_go_on_at_once_and_a_held_host_names_its_holder(
    tmp_path: Path, holders: list[Holder]
) -> None:
    holders.append(Holder(tmp_path, "provision reimage --site t", ["a"]))
    locks = SiteLocks(tmp_path, "t")
    with locks.acquire("provision health --site t", ["b", "c"]) as lease:
        assert lease.hosts == ["b", "c"] and lease.busy == {}
    with pytest.raises(SiteLocked) as exc:
        locks.acquire("provision power off --site t", ["a"])
    msg = str(exc.value)
    assert "the host is in use by another run: a: `provision reimage --site t`" in msg
    assert f"pid {holders[0].pid}" in msg
    # a run over several hosts leaves the held one out and names who holds it
    with locks.acquire("provision health --site t", ["a", "b"]) as lease:
        assert lease.hosts == ["b"]
        assert lease.busy["a"].startswith("`provision reimage --site t` (pid ")
    with pytest.raises(SiteLocked, match="1 of the 2 hosts are in use"):
        locks.acquire("provision firmware update", ["a", "b"], partial=False)
    holders[0].release()
    with locks.acquire("provision power off --site t", ["a"]) as lease:
        assert lease.hosts == ["a"]


def test_two_leases_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    locks = SiteLocks(tmp_path, "t")
    first = locks.acquire("one", ["a"])
    try:
        with pytest.raises(SiteLocked, match="`one`"):
            locks.acquire("two", ["a"])
    finally:
        first.release()
    locks.acquire("two", ["a"]).release()


def test_site_wide_work_waits_for_no_one_and_is_refused_while_hosts_are_held(
    tmp_path: Path, holders: list[Holder]
) -> None:
    holders.append(Holder(tmp_path, "provision rack --site t", ["a"]))
    locks = SiteLocks(tmp_path, "t")
    with pytest.raises(SiteLocked) as exc:
        locks.acquire("provision lab down", site_wide=True)
    assert "is in use by `provision rack --site t`" in str(exc.value)
    assert "`provision lab down` needs the whole site" in str(exc.value)
    holders[0].release()
    holders.append(Holder(tmp_path, "provision lab up", [], "site-wide"))
    with pytest.raises(SiteLocked, match="being changed as a whole by `provision lab up`"):
        locks.acquire("provision power on", ["b"])


def test_the_deploy_server_is_one_run_at_a_time_and_the_next_waits(
    tmp_path: Path, holders: list[Holder]
) -> None:
    holders.append(Holder(tmp_path, "provision reimage --site t", ["a"], "deploy-server"))
    locks = SiteLocks(tmp_path, "t")
    lease = locks.acquire("provision reimage --site t", ["b"])  # its own host: at once
    told = threading.Event()
    holder_seen: list[str] = []
    done = threading.Event()

    def wait_for_server() -> None:
        lease.hold_deploy_server(on_wait=lambda who: (holder_seen.append(who), told.set()))
        done.set()

    t = threading.Thread(target=wait_for_server)
    t.start()
    try:
        assert told.wait(60), "the waiting run was never told who has the deploy server"
        assert holder_seen[0].startswith("`provision reimage --site t` (pid ")
        assert not done.is_set()  # still waiting while the first run has the server
        holders[0].release()
        t.join(60)
        assert done.is_set() and lease.deploy_server
        assert [h.deploy_server for h in locks.holders()] == [True]
    finally:
        t.join(60)
        lease.release()


def test_a_killed_run_leaves_no_lock_and_its_record_goes(
    tmp_path: Path, holders: list[Holder]
) -> None:
    holders.append(Holder(tmp_path, "provision rack --site t", ["a"], "deploy-server"))
    records = list((tmp_path / "t.runs").glob("*.json"))
    assert len(records) == 1
    os.kill(holders[0].pid, signal.SIGKILL)
    holders[0].proc.wait()
    locks = SiteLocks(tmp_path, "t")
    with locks.acquire("provision rack --site t", ["a"]) as lease:
        lease.hold_deploy_server()
        assert [h.pid for h in locks.holders()] == [os.getpid()]
    assert not records[0].exists()
    assert list((tmp_path / "t.runs").glob("*.json")) == []


def test_host_bytes_are_stable_and_distinct() -> None:
    names = [f"gpu-r{r:02d}-u{u:02d}" for r in range(1, 300) for u in range(1, 43)]
    assert len({host_byte(n) for n in names}) == len(names)
    assert host_byte("gpu-r01-u03") == host_byte("gpu-r01-u03") >= 1 << 32
