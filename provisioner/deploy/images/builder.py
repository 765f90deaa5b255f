"""The lab OS image: Debian bookworm with cloud-init and OpenSSH, as a bootable disk image.

Built without loop devices or mounts (several builds may run on one CI machine): debootstrap
into a directory, ``mkfs.ext4 -d`` makes the root filesystem from it, a small FAT partition
holds the kernel, initrd and SYSLINUX (installed through mtools), and the pieces are copied into
an MBR-partitioned disk file. The root partition is last so the deploy ramdisk can grow it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from provisioner.deploy.images.cache import (
    build_slot,
    mark_done,
    read_manifest,
    recipe_key,
    sha256_file,
)
from provisioner.deploy.images.commands import require_tools, run
from provisioner.events import Event, emit
from provisioner.exceptions import DeployError

BUILDER_VERSION = "7"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# debootstrap resolves no virtual packages: python3-cffi-backend provides what
# python3-cryptography (pulled by cloud-init) needs, so it is named explicitly.
DEFAULT_PACKAGES = (
    "systemd-sysv",
    "udev",
    "linux-image-cloud-amd64",
    "openssh-server",
    "cloud-init",
    "python3-cffi-backend",
    "ifupdown",
    "sudo",
    "python3",
    "e2fsprogs",
    "netbase",
    "iproute2",
    "ca-certificates",
    "systemd-timesyncd",
    "less",
)
BOOT_MB = 64
SYSTEMD_BOOT = Path("/usr/lib/systemd/boot/efi/systemd-bootx64.efi")
SECTOR = 512

TRIM = (
    "var/cache/apt/*",
    "var/lib/apt/lists/*",
    "usr/share/man/*",
    "usr/share/info/*",
    "usr/share/locale/*",
    "var/cache/debconf/*-old",
    "var/log/*.log",
)
NODOC = """\
# written by provisioner's lab image builder: no docs, man pages or translations
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
"""
CLOUD_CFG = """\
# written by provisioner's lab image builder
datasource_list: [NoCloud, None]
# the deploy ramdisk already grew the root partition and filesystem
growpart: {mode: "off"}
resize_rootfs: false
# RSA and DSA host keys take long to generate on a slow (emulated) first boot
ssh_genkeytypes: [ed25519, ecdsa]
"""


@dataclass(frozen=True)
class ImageRecipe:
    """Everything that decides the image's content; its hash is the cache key."""

    suite: str = "bookworm"
    mirror: str = field(
        default_factory=lambda: os.environ.get("PROVISIONER_DEBIAN_MIRROR", DEFAULT_MIRROR)
    )
    packages: tuple[str, ...] = DEFAULT_PACKAGES
    format: Literal["raw", "qcow2"] = "raw"
    free_mb: int = 128  # room left in the root filesystem before the deploy grows it


@dataclass(frozen=True)
class BuiltImage:
    """A finished image in the cache."""

    path: Path
    format: str
    sha256: str
    size_bytes: int
    root_partition: int
    kernel: str


def _chroot_setup(root: Path, root_uuid: str) -> str:
    """Configure the tree for first boot; return the kernel version."""
    (root / "etc/fstab").write_text(f"UUID={root_uuid} / ext4 errors=remount-ro 0 1\n")
    (root / "etc/hostname").write_text("localhost\n")
    (root / "etc/cloud/cloud.cfg.d/90-provisioner.cfg").write_text(CLOUD_CFG)
    # every host must get its own identity on first boot
    (root / "etc/machine-id").write_text("")
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # Every byte is streamed to every host: drop what a server does not need (apt indexes come
    # back with `apt update`; docs stay out of later installs too).
    for junk in TRIM:
        for path in root.glob(junk):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    for doc in (root / "usr/share/doc").glob("*/*"):
        if doc.name == "copyright":
            continue  # the licences stay with the binaries
        if doc.is_dir() and not doc.is_symlink():
            shutil.rmtree(doc)
        else:
            doc.unlink()
    (root / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d/01-provisioner-nodoc").write_text(NODOC)
    # debootstrap copied the build machine's resolver, which the installed hosts cannot reach
    # (every lookup would stall before failing); the host's network config provides its own.
    resolv = root / "etc/resolv.conf"
    if resolv.is_symlink() or resolv.exists():
        resolv.unlink()
    resolv.write_text("# written at first boot from the host's network configuration\n")
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise DeployError(f"no kernel in {root}/boot: is linux-image-cloud-amd64 in the recipe?")
    return kernels[-1].name.removeprefix("vmlinuz-")


def _boot_partition(root: Path, kver: str, root_uuid: str, work: Path) -> Path:
    """A FAT partition that boots on both firmwares: SYSLINUX for BIOS, systemd-boot for UEFI."""
    boot = work / "boot.fat"
    run(["mkfs.vfat", "-n", "BOOT", "-C", boot, str(BOOT_MB * 1024)], what="making /boot (vfat)")
    run(["syslinux", "--install", boot], what="installing SYSLINUX")
    # no_timer_check: under emulation on a loaded machine the kernel's IO-APIC timer check can
    # fail and panic ("IO-APIC + timer doesn't work!") on first boot; real hardware is unaffected.
    args = f"root=UUID={root_uuid} ro console=tty0 console=ttyS0,115200n8 no_timer_check"
    files = {
        "syslinux.cfg": "DEFAULT linux\nTIMEOUT 1\nPROMPT 0\nLABEL linux\n"
        f"  LINUX /vmlinuz\n  INITRD /initrd.img\n  APPEND {args}\n",
        "loader.conf": "default provisioner.conf\ntimeout 0\n",
        "provisioner.conf": f"title Debian\nlinux /vmlinuz\ninitrd /initrd.img\noptions {args}\n",
    }
    for name, text in files.items():
        (work / name).write_text(text)
    shutil.copy(root / f"boot/vmlinuz-{kver}", work / "vmlinuz")
    shutil.copy(root / f"boot/initrd.img-{kver}", work / "initrd.img")
    fat = ["-i", str(boot)]
    run(["mmd", *fat, "::/EFI", "::/EFI/BOOT", "::/loader", "::/loader/entries"], what="/boot dirs")
    for src, dst in (
        (work / "vmlinuz", "::/vmlinuz"),
        (work / "initrd.img", "::/initrd.img"),
        (work / "syslinux.cfg", "::/syslinux.cfg"),
        (SYSTEMD_BOOT, "::/EFI/BOOT/BOOTX64.EFI"),
        (work / "loader.conf", "::/loader/loader.conf"),
        (work / "provisioner.conf", "::/loader/entries/provisioner.conf"),
    ):
        run(["mcopy", *fat, src, dst], what=f"copying {dst} to /boot")
    return boot


def _assemble(boot: Path, rootfs: Path, disk: Path) -> None:
    boot_sectors = boot.stat().st_size // SECTOR
    root_sectors = rootfs.stat().st_size // SECTOR
    boot_start = 2048
    root_start = boot_start + boot_sectors
    total = root_start + root_sectors + 2048
    with disk.open("wb") as f:
        f.truncate(total * SECTOR)
    layout = (
        "label: dos\n"
        f"start={boot_start}, size={boot_sectors}, type=ef, bootable\n"
        f"start={root_start}, size={root_sectors}, type=83\n"
    )
    run(
        ["sfdisk", "--no-reread", "--no-tell-kernel", disk],
        what="partitioning",
        input=layout.encode(),
    )
    mbr = next(
        (
            p
            for p in (Path("/usr/lib/syslinux/mbr/mbr.bin"), Path("/usr/lib/SYSLINUX/mbr.bin"))
            if p.exists()
        ),
        None,
    )
    if mbr is None:
        raise DeployError("SYSLINUX's mbr.bin not found", hint="apt-get install syslinux-common")
    with disk.open("r+b") as f:
        f.write(mbr.read_bytes()[:440])  # boot code only; the partition table stays
        for src, start in ((boot, boot_start), (rootfs, root_start)):
            f.seek(start * SECTOR)
            with src.open("rb") as s:
                shutil.copyfileobj(s, f, 8 << 20)


def build_lab_image(recipe: ImageRecipe | None = None) -> BuiltImage:
    """Build (or find in the cache) the lab OS image."""
    recipe = recipe or ImageRecipe()
    key = recipe_key({"v": BUILDER_VERSION, **asdict(recipe)})
    with build_slot("images", key) as (out, done):
        if not done:
            require_tools(
                "debootstrap",
                "mkfs.ext4",
                "mkfs.vfat",
                "syslinux",
                "mcopy",
                "mmd",
                "sfdisk",
                str(SYSTEMD_BOOT),
            )
            emit(
                Event(
                    "stage",
                    f"building the lab OS image (once; cached in {out})",
                    data={"image": "lab", "step": 0, "steps": BUILD_STEPS},
                )
            )
            _build(recipe, out)
            emit(
                Event(
                    "stage",
                    "lab OS image built",
                    data={"image": "lab", "step": BUILD_STEPS, "steps": BUILD_STEPS},
                )
            )
        else:
            emit(Event("stage", f"lab OS image: cached in {out}", data={"image": "lab"}))
        m = read_manifest(out)
    return BuiltImage(
        path=out / m["file"],
        format=m["format"],
        sha256=m["sha256"],
        size_bytes=m["size_bytes"],
        root_partition=m["root_partition"],
        kernel=m["kernel"],
    )


BUILD_STEPS = 5


def _step(n: int, what: str) -> None:
    """Announce build step ``n`` of BUILD_STEPS (the view shows it as a bar)."""
    emit(Event("stage", what, data={"image": "lab", "step": n, "steps": BUILD_STEPS}))


def _build(recipe: ImageRecipe, out: Path) -> None:
    _step(1, f"debootstrap {recipe.suite} ({len(recipe.packages)} packages)")
    work = out / "work"
    root = work / "rootfs"
    work.mkdir()
    run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(recipe.packages)}",
            recipe.suite,
            root,
            recipe.mirror,
        ],
        what=f"debootstrap {recipe.suite} from {recipe.mirror}",
        timeout=1500,
    )
    _step(2, "configuring the tree for first boot")
    root_uuid = str(uuid.uuid4())
    kver = _chroot_setup(root, root_uuid)
    used_kb = int(run(["du", "-sk", "--apparent-size", root], what="sizing the root fs").split()[0])
    size_mb = used_kb * 11 // 10 // 1024 + recipe.free_mb
    rootfs = work / "root.ext4"
    _step(3, "making the root filesystem")
    run(
        ["mkfs.ext4", "-q", "-L", "provroot", "-U", root_uuid, "-d", root, rootfs, f"{size_mb}M"],
        what="making the root filesystem",
    )
    _step(4, "making the boot partition")
    boot = _boot_partition(root, kver, root_uuid, work)
    raw = out / "disk.raw"
    _step(5, "assembling the disk image")
    _assemble(boot, rootfs, raw)
    final = raw
    if recipe.format == "qcow2":
        final = out / "disk.qcow2"
        run(["qemu-img", "convert", "-O", "qcow2", raw, final], what="converting to qcow2")
        raw.unlink()
    shutil.rmtree(work)
    mark_done(
        out,
        {
            "file": final.name,
            "format": recipe.format,
            "sha256": sha256_file(final),
            "size_bytes": final.stat().st_size,
            "root_partition": 2,
            "kernel": kver,
            "recipe": asdict(recipe),
        },
    )
