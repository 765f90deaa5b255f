"""The deploy ramdisk builder's pieces that need no kernel download: scripts and copied tools."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from provisioner.deploy.ramdisk import builder
from provisioner.exceptions import DeployError
from tests.support import machine


def test_kexec_load_is_one_of_the_ramdisk_scripts() -> None:
    assert "kexec-load.sh" in builder.SCRIPTS
    for name in builder.SCRIPTS:
        assert (builder.FILES / name).is_file(), name
    # the scripts' digest is part of the cache key: a changed kexec-load.sh rebuilds the ramdisk
    assert len(builder._script_digest()) == 16


def test_kexec_and_its_libraries_are_copied(tmp_path: Path) -> None:
    machine.require_tools([str(t) for t in (*builder.TOOLS, builder.KEXEC)])
    builder._install_tools(tmp_path)
    kexec = tmp_path / "usr/local/sbin/kexec"
    assert kexec.is_file() and os.access(kexec, os.X_OK)
    ldd = subprocess.run(["ldd", builder.KEXEC], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"(/\S+)\s+\(0x", ldd)
    assert libs  # kexec-tools links libc (and Xen's libraries on Debian)
    for lib in libs:
        assert (tmp_path / lib.lstrip("/")).is_file(), lib
    for tool in builder.TOOLS:
        assert (tmp_path / "usr/local/sbin" / Path(tool).name).is_file()


def test_a_build_without_kexec_fails_before_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(builder, "KEXEC", str(tmp_path / "no-such-kexec"))

    def no_run(*args: object, **kwargs: object) -> str:
        raise AssertionError("nothing may be downloaded or run")

    monkeypatch.setattr(builder, "run", no_run)
    with pytest.raises(DeployError, match="kexec-tools") as err:
        builder._build("linux-image-6.1.0-28-cloud-amd64", tmp_path)
    assert "apt-get install kexec-tools" in (err.value.hint or "")
    with pytest.raises(DeployError, match="kexec-tools"):
        builder._install_tools(tmp_path / "root")
    assert not (tmp_path / "root").exists()
