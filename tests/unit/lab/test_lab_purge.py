"""`lab down --purge`: the lab's state, logs and image cache go; nothing of other sites does."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.lab import purge
from provisioner.lab.plan import LabPlan
from tests.support import machine

runner = CliRunner()


@pytest.fixture
def homes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Path]:
    paths = {k: tmp_path / k for k in ("state", "cache", "home", "labstate")}
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(paths["state"]))
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(paths["cache"]))
    monkeypatch.setenv("HOME", str(paths["home"]))
    monkeypatch.setenv("PROVISIONER_LAB_NETNS", "plabpurge")
    monkeypatch.setenv("PROVISIONER_LAB_STATE_DIR", str(paths["labstate"]))
    monkeypatch.delenv("PROVISIONER_LAB_SLOT", raising=False)
    return paths


def _touch(path: Path, size: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def test_purge_removes_only_the_labs_leftovers(homes: dict[str, Path]) -> None:
    plan = LabPlan.from_env()
    state, cache = homes["state"], homes["cache"]
    lab = [
        _touch(state / "lab.sqlite", 4096),
        _touch(state / "lab.sqlite-wal"),
        _touch(state / "lab.lock"),
        _touch(state / "lab-logs" / "site-20261124-101010.log", 2000),
        _touch(state / "lab-embedded" / "dnsmasq.log"),
        _touch(cache / "images" / "0123abcd" / "disk.raw", 1 << 20),
        _touch(cache / "images" / "0123abcd.lock", 0),
        _touch(homes["home"] / ".cache/provisioner/ansible-facts" / plan.lab_hosts[0].name),
    ]
    others = [
        _touch(state / "example.sqlite"),
        _touch(state / "example-logs" / "site-1.log"),
        _touch(state / "lab2.sqlite"),
        _touch(cache / "ramdisk" / "feed" / "initrd.img"),  # every embedded site's ramdisk
        _touch(cache / "served-images" / "beef" / "disk.raw"),
        _touch(homes["home"] / ".cache/provisioner/ansible-facts" / "gpu-r01-u03"),
    ]
    kept = purge.describe(purge.leftovers(plan))
    assert any(line.startswith(f"state database: {state / 'lab.sqlite'} and 2 more") for line in kept)
    assert any(line.startswith("lab OS image cache: ") and "1.0 MiB" in line for line in kept)
    assert any(line.startswith("site.yml logs: ") for line in kept)

    removed = purge.purge(plan)
    assert {i.what for i in removed} >= {"state database", "site.yml logs", "lab OS image cache"}
    for p in lab:
        assert not p.exists(), p
    for p in others:
        assert p.exists(), p
    assert purge.leftovers(plan) == []


def test_the_shared_ramdisk_cache_is_named_and_never_purged(homes: dict[str, Path]) -> None:
    # #36 item 10: `lab down`'s kept list left out the ramdisk cache (a few hundred MiB)
    plan = LabPlan.from_env()
    initrd = _touch(homes["cache"] / "ramdisk" / "feed" / "initrd.img", 2 << 20)
    _touch(homes["cache"] / "ramdisk" / "feed.lock", 0)
    (line,) = purge.describe(purge.shared_leftovers())
    assert line == f"deploy ramdisk cache: {initrd.parent} (2.0 MiB)"
    purge.purge(plan)
    assert initrd.exists()


def test_an_image_being_built_is_not_purged(homes: dict[str, Path]) -> None:
    image = _touch(homes["cache"] / "images" / "feedface" / "work" / "x")
    lock = _touch(homes["cache"] / "images" / "feedface.lock", 0)
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # a build in another process holds it
        pid = os.fork()
        if pid == 0:  # the child stands in for `lab down --purge` while the build runs
            os._exit(0 if not purge.purge(LabPlan.from_env()) else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert image.exists()


@machine.needs("root")
def test_lab_down_says_what_it_keeps_and_purge_removes_it(homes: dict[str, Path]) -> None:
    _touch(homes["state"] / "lab.sqlite")
    _touch(homes["cache"] / "ramdisk" / "feed" / "initrd.img")
    res = runner.invoke(app, ["lab", "down"])
    assert res.exit_code == 0, res.output
    assert "kept (`provision lab down --purge` removes them):" in res.output
    assert "state database: " in res.output
    assert "deploy ramdisk cache: " in res.output
    res = runner.invoke(app, ["lab", "down", "--purge"])
    assert res.exit_code == 0, res.output
    assert "purged state database: " in res.output
    assert not (homes["state"] / "lab.sqlite").exists()
    assert "deploy ramdisk cache: " in res.output  # named as kept, not purged
