"""kexec-load.sh in the real deploy ramdisk, in a VM (qemu, TCG): mount, load, and boot by kexec.

The directory-tree tests (test_deploy_kexec_load.py) cannot mount or load anything; here the
built ramdisk (its kernel, busybox, blkid, modules and kexec) runs the script against a virtio
disk, then ``kexec -e`` starts the entry it loaded. The "installed OS" is the same Debian kernel
with a tiny initrd whose /init prints its command line and powers off. The ramdisk's /init is
replaced by a harness (a cpio appended to its initrd) that brings up devices as the real init
does and runs the script instead of the deploy. The disk must come out byte for byte unchanged.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from provisioner.deploy.images import builder as images
from provisioner.deploy.ramdisk import Ramdisk, build_ramdisk
from tests.support import machine
from tests.support.qemu_lab import busybox_initrd, cpio_gz

pytestmark = [pytest.mark.lab, pytest.mark.slow]

TOOLS = (
    "qemu-system-x86_64",
    "cpio",
    "mkfs.vfat",
    "syslinux",
    "mcopy",
    "mmd",
    "sfdisk",
    "mkfs.ext4",
)
HARNESS = """#!/bin/busybox sh
export PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /run /tmp /mnt
/bin/busybox --install -s
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
exec >/dev/console 2>&1 </dev/console
/lib/systemd/systemd-udevd --daemon --resolve-names=never
udevadm trigger --type=subsystems --action=add; udevadm trigger --type=devices --action=add
udevadm settle --timeout=60
for m in virtio_pci virtio_blk; do modprobe -q "$m"; done
udevadm settle --timeout=30
sh /kexec-load.sh /dev/vda; rc=$?
echo "HARNESS rc=$rc mounted=$(grep -c ' /tmp/kexec-load' /proc/mounts) left=[$(ls /tmp)]"
[ "$rc" = 0 ] && kexec -e
echo "HARNESS kexec -e returned"
poweroff -f
"""
SECOND = """#!/bin/busybox sh
/bin/busybox mkdir -p /proc
/bin/busybox mount -t proc proc /proc
/bin/busybox echo "SECOND-KERNEL-UP cmdline=[$(/bin/busybox cat /proc/cmdline)]"
/bin/busybox poweroff -f
"""


@pytest.fixture(scope="module")
def ramdisk() -> Ramdisk:
    machine.require_tools([*TOOLS, str(images.SYSTEMD_BOOT)])
    return build_ramdisk()


def _installed_root(tmp: Path, rd: Ramdisk) -> Path:
    """A root tree with the ramdisk's kernel as the installed kernel and the reporting initrd."""
    root = tmp / "rootfs"
    (root / "boot").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text("ID=debian\n")
    shutil.copy(rd.kernel, root / f"boot/vmlinuz-{rd.kernel_version}")
    (root / f"boot/initrd.img-{rd.kernel_version}").write_bytes(
        busybox_initrd(tmp / "tiny", SECOND))
    return root


def _boot(tmp: Path, rd: Ramdisk, disk: Path) -> str:
    harness = tmp / "harness"
    harness.mkdir()
    (harness / "init").write_text(HARNESS)
    (harness / "init").chmod(0o755)
    initrd = tmp / "initrd.img"
    # a second archive after the ramdisk's: its /init replaces the deploy's
    initrd.write_bytes(rd.initrd.read_bytes() + cpio_gz(harness))
    before = hashlib.sha256(disk.read_bytes()).hexdigest()
    proc = subprocess.run(
        ["qemu-system-x86_64", "-machine", "pc,accel=tcg", "-m", "1024", "-smp", "2",
         "-kernel", str(rd.kernel), "-initrd", str(initrd),
         "-append", "console=ttyS0 panic=-1 quiet",
         "-drive", f"file={disk},if=virtio,format=raw",
         "-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot"],
        capture_output=True, timeout=400, check=False,
    )  # fmt: skip
    console = proc.stdout.decode(errors="replace").replace("\r", "")
    assert hashlib.sha256(disk.read_bytes()).hexdigest() == before, "the disk was written"
    assert "HARNESS rc=0 mounted=0 left=[]" in console, console[-3000:]
    return console


def test_lab_image_boots_by_kexec(ramdisk: Ramdisk, tmp_path: Path) -> None:
    root = _installed_root(tmp_path, ramdisk)
    kver = ramdisk.kernel_version
    (root / "vmlinuz").symlink_to(f"boot/vmlinuz-{kver}")
    (root / "initrd.img").symlink_to(f"boot/initrd.img-{kver}")
    root_uuid = str(uuid.uuid4())
    work = tmp_path / "work"
    work.mkdir()
    boot = images._boot_partition(root, kver, root_uuid, work)  # the lab image's FAT /boot
    rootfs = tmp_path / "root.ext4"
    subprocess.run(
        ["mkfs.ext4", "-q", "-U", root_uuid, "-d", str(root), str(rootfs), "64M"], check=True
    )
    disk = tmp_path / "disk.raw"
    images._assemble(boot, rootfs, disk)
    console = _boot(tmp_path, ramdisk, disk)
    args = f"root=UUID={root_uuid} ro console=tty0 console=ttyS0,115200n8 no_timer_check"
    assert (
        f"kexec: loaded /vmlinuz + /initrd.img (BLS loader/entries/provisioner.conf on /dev/vda1; kexec -s) {args}"
        in console
    )
    assert f"SECOND-KERNEL-UP cmdline=[{args}]" in console


def test_grub_on_an_ext4_root_boots_by_kexec(ramdisk: Ramdisk, tmp_path: Path) -> None:
    root = _installed_root(tmp_path, ramdisk)
    kver = ramdisk.kernel_version
    args = 'root=LABEL=groot ro console=ttyS0 quiet "$(reboot)" `poweroff`; x'
    (root / "boot/grub").mkdir()
    (root / "boot/grub/grub.cfg").write_text(
        f"set default=\"0\"\nfunction load_video {{\n  insmod all_video\n}}\n"
        f"menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple' {{\n"
        f"\tload_video\n\tsearch --no-floppy --fs-uuid --set=root 1234\n"
        f"\tlinux\t/boot/vmlinuz-{kver} {args} $vt_handoff\n\tinitrd\t/boot/initrd.img-{kver}\n}}\n"
    )  # fmt: skip
    fs = tmp_path / "root.ext4"
    subprocess.run(["mkfs.ext4", "-q", "-L", "groot", "-d", str(root), str(fs), "64M"], check=True)
    esp = tmp_path / "esp.fat"
    subprocess.run(["mkfs.vfat", "-C", str(esp), "8192"], check=True, capture_output=True)
    subprocess.run(["mmd", "-i", str(esp), "::/EFI"], check=True)
    # GPT: an ESP with nothing to boot, a partition with no filesystem, the ext4 root
    disk = tmp_path / "disk.raw"
    with disk.open("wb") as f:
        f.truncate((2048 + 16384 + 8192 + 131072 + 2048) * 512)
    layout = "label: gpt\nstart=2048, size=16384, type=U\nsize=8192, type=S\nsize=131072, type=L\n"
    subprocess.run(["sfdisk", "-q", str(disk)], input=layout.encode(), check=True)
    for img, start in ((esp, 2048), (fs, 2048 + 16384 + 8192)):
        subprocess.run(["dd", f"if={img}", f"of={disk}", "bs=512", f"seek={start}", "conv=notrunc", "status=none"], check=True)  # fmt: skip
    console = _boot(tmp_path, ramdisk, disk)
    assert (
        f"kexec: loaded /boot/vmlinuz-{kver} + /boot/initrd.img-{kver} (GRUB boot/grub/grub.cfg entry "
        f"'Debian GNU/Linux' on /dev/vda3; kexec -s; GRUB variables dropped: $vt_handoff) {args}"
    ) in console
    # the command line reached the second kernel verbatim; nothing of it ran in the ramdisk
    assert f"SECOND-KERNEL-UP cmdline=[{args}]" in console
