"""The ramdisk's root-disk selection (pick-disk.sh) against fake sysfs trees.

The script is POSIX sh run by busybox in the ramdisk; here it runs under the host's busybox sh
(or dash) with SYSFS/DEVDIR pointing at a tree laid out like the kernel's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.deploy.ramdisk import FILES

SCRIPT = FILES / "pick-disk.sh"
SHELLS = [s for s in ("busybox", "dash") if shutil.which(s)]


def _disk(
    root: Path,
    name: str,
    *,
    gb: float,
    serial: str | None = None,
    vpd_serial: str | None = None,
    wwid: str | None = None,
    model: str | None = None,
    removable: bool = False,
    by_path: str | None = None,
) -> None:
    d = root / "sys/block" / name
    (d / "device").mkdir(parents=True)
    (d / "size").write_text(f"{int(gb * 1e9 / 512)}\n")
    (d / "removable").write_text("1\n" if removable else "0\n")
    if serial is not None:
        (d / "serial").write_text(serial + "\n")
    if vpd_serial is not None:  # SCSI unit serial number page: 4-byte header, then the serial
        (d / "device/vpd_pg80").write_bytes(b"\x00\x80\x00" + bytes([len(vpd_serial)]) + vpd_serial.encode())
    if wwid is not None:
        (d / "device/wwid").write_text(wwid + "\n")
    if model is not None:
        (d / "device/model").write_text(model.ljust(16) + "\n")
    if by_path is not None:
        links = root / "dev/disk/by-path"
        links.mkdir(parents=True, exist_ok=True)
        (links / by_path).symlink_to(f"../../{name}")


@pytest.fixture
def server(tmp_path: Path) -> Path:
    """A server with a BOSS mirror (root), two NVMe data disks and a USB stick."""
    _disk(tmp_path, "nvme0n1", gb=3840.8, serial="S6DATA0001", wwid="eui.0025385b11a2c3d4",
          model="SAMSUNG MZQL23T8HCLS", by_path="pci-0000:41:00.0-nvme-1")  # fmt: skip
    _disk(tmp_path, "nvme1n1", gb=3840.8, serial="S6DATA0002", wwid="eui.0025385b11a2c3d5",
          model="SAMSUNG MZQL23T8HCLS", by_path="pci-0000:42:00.0-nvme-1")  # fmt: skip
    _disk(tmp_path, "sda", gb=480.1, vpd_serial="BOSS0A1B2C", wwid="naa.5000c500a1b2c3d4",
          model="Dell BOSS-N1", by_path="pci-0000:03:00.0-ata-1")  # fmt: skip
    _disk(tmp_path, "sdb", gb=32.0, serial="USB123", model="Cruzer", removable=True)
    (tmp_path / "sys/block/loop0").mkdir()
    return tmp_path


def pick(root: Path, shell: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [shell, "sh", str(SCRIPT), *args] if shell == "busybox" else [shell, str(SCRIPT), *args]
    env = {"SYSFS": str(root / "sys"), "DEVDIR": str(root / "dev"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=30)


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (("--serial", "BOSS0A1B2C"), "sda"),  # SCSI serial from VPD page 0x80
        (("--serial", "S6DATA0002"), "nvme1n1"),
        (("--wwn", "0x5000C500A1B2C3D4"), "sda"),  # Redfish/lsblk spelling of naa.5000c5...
        (("--wwn", "eui.0025385b11a2c3d4"), "nvme0n1"),
        (("--by-path", "/dev/disk/by-path/pci-0000:42:00.0-nvme-1"), "nvme1n1"),
        (("--model", "Dell BOSS-N1", "--min-gb", "400", "--max-gb", "1000"), "sda"),
        (("--max-gb", "1000"), "sda"),  # the USB stick is removable: never a candidate
    ],
)
def test_picks_exactly_the_hinted_disk(server: Path, shell: str, args: tuple[str, ...], want: str) -> None:
    r = pick(server, shell, *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want


def test_refuses_when_no_disk_matches_and_lists_candidates(server: Path, shell: str) -> None:
    r = pick(server, shell, "--serial", "PLAB-HOST03-NOPE")
    assert r.returncode == 3
    assert r.stdout == ""
    first = r.stderr.splitlines()[0]
    assert "no disk matches the hint serial=PLAB-HOST03-NOPE" in first
    assert first.endswith("; refusing to guess")
    assert r.stderr.splitlines()[1] == "disks seen:"
    for name in ("nvme0n1", "nvme1n1", "sda"):
        assert f"  {name} serial=" in r.stderr
    assert "sdb" not in r.stderr and "loop0" not in r.stderr


def test_refuses_when_several_disks_match(server: Path, shell: str) -> None:
    r = pick(server, shell, "--model", "SAMSUNG MZQL23T8HCLS")
    assert r.returncode == 3
    assert "2 disks match ( nvme0n1 nvme1n1 )" in r.stderr


def test_no_hint_needs_a_single_disk(tmp_path: Path, shell: str) -> None:
    _disk(tmp_path, "vda", gb=10, serial="ONLY")
    assert pick(tmp_path, shell).stdout.strip() == "vda"
    _disk(tmp_path, "vdb", gb=10, serial="OTHER")
    assert pick(tmp_path, shell).returncode == 3


def test_unknown_argument_is_an_error(server: Path, shell: str) -> None:
    r = pick(server, shell, "--colour", "blue")
    assert r.returncode == 2
    assert "unknown argument --colour" in r.stderr
