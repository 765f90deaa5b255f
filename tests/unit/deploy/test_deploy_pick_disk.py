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


# --- the autoinstall guard: the installer's own globs on the installer's udev properties -------
# Stand-in: a `udevadm` on PATH that prints tests/fixtures/udev/<disk>.properties (the real one
# needs a running udev and real disks).

UDEV = Path(__file__).resolve().parents[2] / "fixtures" / "udev"


@pytest.fixture
def installer(tmp_path: Path) -> Path:
    """The disks of tests/fixtures/udev as sysfs shows them, plus the stand-in udevadm."""
    _disk(tmp_path, "sda", gb=480.1, vpd_serial="21142D3A1B2C", wwid="naa.500a07512d3a1b2c",
          model="Micron_5300_MTFD", by_path="pci-0000:00:17.0-ata-1")  # 16-char SCSI product
    for i in (0, 1):
        _disk(tmp_path, f"nvme{i}n1", gb=3840.8, serial=f"S64HNE0T10000{i}",
              wwid=f"eui.3634483052900123002538450000000{i}", model="SAMSUNG MZQL23T8HCLS-00A07",
              by_path=f"pci-0000:4{1 + i}:00.0-nvme-1")
    _disk(tmp_path, "sdb", gb=4000.8, vpd_serial="ZC1234AB", wwid="naa.5000c500a1b2c3d4",
          model="ST4000NM0295", by_path="pci-0000:3b:00.0-sas-phy0-lun-0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "udevadm"
    fake.write_text('#!/bin/sh\n# stand-in: udevadm info -q property -n /dev/NAME\n'
                    'for a in "$@"; do dev=$a; done\n'
                    f'cat "{UDEV}/${{dev##*/}}.properties" 2>/dev/null\n')
    fake.chmod(0o755)
    return tmp_path


def guard(root: Path, shell: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [shell, "sh", str(SCRIPT), *args] if shell == "busybox" else [shell, str(SCRIPT), *args]
    env = {"SYSFS": str(root / "sys"), "DEVDIR": str(root / "dev"),
           "PATH": f"{root / 'bin'}:/usr/bin:/bin"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=30)


def _guard_args(hint) -> list[str]:
    import shlex

    from provisioner.deploy import autoinstall

    return shlex.split(autoinstall._hint_args(hint, autoinstall.match_spec(hint)))


@pytest.mark.parametrize(
    ("hint_kw", "want"),
    [
        ({"serial": "21142D3A1B2C"}, "sda"),
        ({"model": "Micron 5300 MTFDDAK480TDS"}, "sda"),  # sysfs has "Micron_5300_MTFD" only
        ({"serial": "S64HNE0T100001"}, "nvme1n1"),
        ({"by_path": "pci-0000:3b:00.0-sas-phy0-lun-0"}, "sdb"),
        ({"wwn": "0x5000c500a1b2c3d4"}, "sdb"),
        ({"size_gb_min": 400, "size_gb_max": 500}, "sda"),  # pinned: subiquity has no bounds
    ],
)
def test_guard_and_installer_agree_on_the_disk(installer: Path, shell: str, hint_kw, want) -> None:
    from provisioner.inventory.spec import RootDiskHint

    ai = installer / "autoinstall.yaml"
    ai.write_text("storage:\n  layout:\n    match:\n      path: /dev/provisioner-root-disk\n")
    args = [a if a != "/autoinstall.yaml" else str(ai) for a in _guard_args(RootDiskHint(**hint_kw))]
    r = guard(installer, shell, *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want
    if "wwn" in hint_kw or "size_gb_min" in hint_kw:  # re-read by the installer: now the disk
        assert f"path: /dev/{want}\n" in ai.read_text()


def test_guard_refuses_when_the_installer_match_would_pick_another_disk_too(
        installer: Path, shell: str) -> None:
    # "*100001" is the suffix of nvme1n1's ID_SERIAL; a second disk whose serial ends the same
    # would be an arbitrary pick for the installer even though the hint is exact.
    r = guard(installer, shell, "--serial", "S64HNE0T100001", "--match-serial", "*0000[01]")
    assert r.returncode == 3
    assert "the installer match (serial=*0000[01]" in r.stderr and "selects 2 disk(s)" in r.stderr


def test_guard_refuses_a_sas_unit_serial_the_installer_cannot_see(installer: Path, shell: str) -> None:
    from provisioner.inventory.spec import RootDiskHint

    # sysfs knows ZC1234AB (VPD 0x80) but udev's ID_SERIAL of a SAS disk is "3" + its NAA.
    r = guard(installer, shell, *_guard_args(RootDiskHint(serial="ZC1234AB")))
    assert r.returncode == 3 and "selects 0 disk(s)" in r.stderr


def test_match_options_need_udevadm(server: Path, shell: str, tmp_path: Path) -> None:
    # A PATH with the script's tools but no udevadm (this machine may have a real one).
    bare = tmp_path / "bare"
    bare.mkdir()
    for tool in ("tr", "sed", "cat", "awk", "dd", "readlink", "basename"):
        found = shutil.which(tool)
        assert found, tool
        (bare / tool).symlink_to(found)
    exe = shutil.which(shell) or shell
    argv = [exe, "sh", str(SCRIPT)] if shell == "busybox" else [exe, str(SCRIPT)]
    env = {"SYSFS": str(server / "sys"), "DEVDIR": str(server / "dev"), "PATH": str(bare)}
    r = subprocess.run([*argv, "--serial", "BOSS0A1B2C", "--match-serial", "*BOSS0A1B2C"],
                       capture_output=True, text=True, env=env, check=False, timeout=30)
    assert r.returncode == 2 and "needs udevadm" in r.stderr
    r = subprocess.run([*argv, "--serial", "BOSS0A1B2C"], capture_output=True, text=True,
                       env=env, check=False, timeout=30)  # the ramdisk path needs no udevadm
    assert r.returncode == 0 and r.stdout.strip() == "sda", r.stderr


def test_mirrored_root_pins_both_disks(tmp_path: Path, shell: str) -> None:
    from provisioner.deploy import autoinstall
    from provisioner.inventory.spec import RootDiskHint

    # Two identical M.2 boot SSDs (a BOSS-like pair) next to a big NVMe data disk.
    _disk(tmp_path, "sda", gb=480.1, vpd_serial="BOOTA0001", model="MTFDDAV480TDU")
    _disk(tmp_path, "sdb", gb=480.1, vpd_serial="BOOTB0002", model="MTFDDAV480TDU")
    _disk(tmp_path, "nvme0n1", gb=3840.8, serial="DATA01", model="SAMSUNG MZQL23T8HCLS")
    import shlex

    import yaml

    ai = tmp_path / "autoinstall.yaml"
    ai.write_text(yaml.safe_dump({"storage": autoinstall.mirrored_storage()}))
    hint = RootDiskHint(model="MTFDDAV480TDU", size_gb_max=1000)
    args = [a if a != "/autoinstall.yaml" else str(ai)
            for a in shlex.split(autoinstall._hint_args(hint, None, mirror=True))]
    r = pick(tmp_path, shell, *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["sda", "sdb"]
    disks = [a["path"] for a in yaml.safe_load(ai.read_text())["storage"]["config"] if a["type"] == "disk"]
    assert disks == ["/dev/sda", "/dev/sdb"]
    # One boot SSD missing: the hint selects one disk, two are wanted: refuse.
    (tmp_path / "sys/block/sdb/size").write_text("0\n")
    r = pick(tmp_path, shell, "--model", "MTFDDAV480TDU", "--count", "2")
    assert r.returncode == 3 and "no disk" not in r.stderr and "2 wanted" in r.stderr
