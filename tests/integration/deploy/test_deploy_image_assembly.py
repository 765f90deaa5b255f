"""The lab image's disk assembly (no loop devices, no mounts) on a tiny fake root tree.

The full debootstrap build runs in the VM test; this checks in seconds that the pieces fit:
MBR boot code, a bootable FAT /boot holding SYSLINUX, kernel, initrd and a config naming the
root filesystem's UUID, and the ext4 root as the last partition.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from provisioner.deploy.images import builder
from tests.support import machine

TOOLS = ("mkfs.vfat", "syslinux", "mcopy", "mmd", "mtype", "sfdisk", "mkfs.ext4", "dumpe2fs")


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    machine.require_tools(TOOLS)
    root = tmp_path / "rootfs"
    for d in ("boot", "etc/ssh", "etc/cloud/cloud.cfg.d", "usr/share/doc/pkg", "var/lib/apt/lists",
              "var/cache/apt/archives", "var/lib/dbus", "var/log"):  # fmt: skip
        (root / d).mkdir(parents=True)
    (root / "boot/vmlinuz-6.1.0-9-cloud-amd64").write_bytes(b"K" * 4096)
    (root / "boot/initrd.img-6.1.0-9-cloud-amd64").write_bytes(b"I" * 4096)
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("build machine key")
    (root / "etc/machine-id").write_text("0123456789abcdef\n")
    (root / "var/lib/dbus/machine-id").symlink_to("/etc/machine-id")
    (root / "usr/share/doc/pkg/copyright").write_text("licence")
    (root / "usr/share/doc/pkg/changelog.gz").write_text("x")
    (root / "var/lib/apt/lists/deb.debian.org_Packages").write_text("x" * 1000)
    (root / "var/cache/apt/archives/x.deb").write_text("x")
    (root / "var/log/dpkg.log").write_text("x")
    return root


def test_first_boot_identity_and_trim(fake_root: Path) -> None:
    root_uuid = str(uuid.uuid4())
    kver = builder._chroot_setup(fake_root, root_uuid)
    assert kver == "6.1.0-9-cloud-amd64"
    assert (fake_root / "etc/fstab").read_text().startswith(f"UUID={root_uuid} / ext4")
    assert (fake_root / "etc/machine-id").read_text() == ""  # regenerated per host
    assert not (fake_root / "var/lib/dbus/machine-id").exists()
    assert not list((fake_root / "etc/ssh").glob("ssh_host_*"))  # no shared host keys
    assert "datasource_list: [NoCloud, None]" in (
        fake_root / "etc/cloud/cloud.cfg.d/90-provisioner.cfg"
    ).read_text()
    assert (fake_root / "usr/share/doc/pkg/copyright").exists()
    assert not (fake_root / "usr/share/doc/pkg/changelog.gz").exists()
    assert not list((fake_root / "var/lib/apt/lists").iterdir())
    assert (fake_root / "var/cache/apt/archives/partial").is_dir()
    assert "path-exclude=/usr/share/doc/*" in (
        fake_root / "etc/dpkg/dpkg.cfg.d/01-provisioner-nodoc"
    ).read_text()


def test_disk_assembly(fake_root: Path, tmp_path: Path) -> None:
    root_uuid = str(uuid.uuid4())
    kver = builder._chroot_setup(fake_root, root_uuid)
    work = tmp_path / "work"
    work.mkdir()
    boot = builder._boot_partition(fake_root, kver, root_uuid, work)
    rootfs = work / "root.ext4"
    subprocess.run(
        ["mkfs.ext4", "-q", "-L", "provroot", "-U", root_uuid, "-d", str(fake_root), str(rootfs), "16M"],
        check=True,
    )
    disk = tmp_path / "disk.raw"
    builder._assemble(boot, rootfs, disk)

    table = json.loads(
        subprocess.run(["sfdisk", "--json", str(disk)], capture_output=True, text=True, check=True).stdout
    )["partitiontable"]
    assert table["label"] == "dos"
    p1, p2 = table["partitions"]
    assert p1["type"] == "ef" and p1.get("bootable") is True and p1["start"] == 2048
    assert p2["type"] == "83" and p2["start"] == p1["start"] + p1["size"]
    data = disk.read_bytes()
    assert data[510:512] == b"\x55\xaa"
    mbr = Path("/usr/lib/syslinux/mbr/mbr.bin").read_bytes()[:440]
    assert data[:440] == mbr
    # the root partition holds the filesystem with the UUID the boot config names
    part = tmp_path / "p2.ext4"
    part.write_bytes(data[p2["start"] * 512 : (p2["start"] + p2["size"]) * 512])
    info = subprocess.run(["dumpe2fs", "-h", str(part)], capture_output=True, text=True, check=True).stdout
    assert root_uuid in info
    # the FAT partition boots SYSLINUX with our kernel, initrd and config
    fat = f"{disk}@@{p1['start'] * 512}"
    cfg = subprocess.run(["mtype", "-i", fat, "::/syslinux.cfg"], capture_output=True, text=True, check=True).stdout
    assert f"root=UUID={root_uuid}" in cfg and "console=ttyS0" in cfg
    listing = subprocess.run(["mdir", "-a", "-b", "-/", "-i", fat, "::/"], capture_output=True, text=True, check=True).stdout
    for name in ("VMLINUZ", "INITRD.IMG", "LDLINUX.SYS", "LDLINUX.C32", "EFI/BOOT/BOOTX64.EFI"):
        assert name in listing.upper()
    # and systemd-boot for UEFI, with the same kernel command line
    entry = subprocess.run(
        ["mtype", "-i", fat, "::/loader/entries/provisioner.conf"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"options root=UUID={root_uuid}" in entry and "linux /vmlinuz" in entry
