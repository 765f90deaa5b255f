"""The ramdisk's kexec-load.sh under busybox, on directory trees standing for a disk's partitions.

kexec itself cannot run here: the stand-in records the arguments. It is a script on PATH, named
by KEXEC, that writes each call's argv one per line (a ``--`` line after each call) and copies
the kernel and initrd it was given, so the tests see exactly what the real kexec would load.
KEXEC_ROOTS names the directories that stand for the mounted partitions (nothing is mounted:
CI machines need no loop devices), and a stand-in blkid answers ``uuid-<partition>``.

Layouts: the project's lab image (its real FAT /boot, made by the image builder and copied out
with mtools), an Ubuntu cloud image's GRUB, a separate /boot partition, EXTLINUX, the
Debian/Ubuntu kernel symlinks alone, nothing bootable, and hostile configs.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.deploy.ramdisk import FILES
from tests.support import machine
from tests.support.ramdisk_rig import busybox_bin
from tests.support.waiting import HANG_S

SCRIPT = FILES / "kexec-load.sh"
KVER = "6.8.0-31-generic"
RECORDER = """#!/bin/sh
# kexec stand-in: records its arguments; KEXEC_FAIL=s fails -s calls, KEXEC_FAIL=all every call
for a in "$@"; do printf '%s\\n' "$a"; done >> "$KEXEC_RECORD"
echo -- >> "$KEXEC_RECORD"
case "${KEXEC_FAIL:-}:$1" in
  s:-s|all:*) echo "kexec_file_load failed: Operation not permitted" >&2; exit 1 ;;
esac
for a in "$@"; do
  case "$a" in --initrd=*) cp "${a#--initrd=}" "$KEXEC_RECORD.initrd" ;; esac
  kernel=$a
done
cp "$kernel" "$KEXEC_RECORD.kernel"
"""
BLKID = """#!/bin/sh
for a in "$@"; do dev=$a; done
echo "uuid-${dev##*/}"
"""


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    calls: list[list[str]]
    kernel: bytes | None
    initrd: bytes | None

    @property
    def cmdline(self) -> str:
        [arg] = [a for a in self.calls[-1] if a.startswith("--command-line=")]
        return arg.removeprefix("--command-line=")


@pytest.fixture
def rig(tmp_path: Path) -> dict[str, Path]:
    machine.require_tools(["busybox"], "scripts/deps/50-deploy.list")
    busybox = shutil.which("busybox")
    assert busybox
    bindir = busybox_bin(busybox, tmp_path / "bin")
    for name, text in (("kexec", RECORDER), ("blkid", BLKID)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    (tmp_path / "work").mkdir()
    return {"tmp": tmp_path, "bin": bindir}


def kexec_load(rig: dict[str, Path], *parts: Path, disk: str = "/dev/vdz", fail: str = "",
               timeout: float = 60) -> Result:  # fmt: skip
    tmp = rig["tmp"]
    record = tmp / "kexec.record"
    for f in (record, Path(f"{record}.kernel"), Path(f"{record}.initrd")):
        f.unlink(missing_ok=True)
    proc = subprocess.run(
        [str(rig["bin"] / "sh"), str(SCRIPT), disk],
        env={
            "PATH": str(rig["bin"]),  # busybox and the two stand-ins only, as in the ramdisk
            "KEXEC_ROOTS": " ".join(str(p) for p in parts),
            "KEXEC_RECORD": str(record),
            "KEXEC_FAIL": fail,
            "DEVDIR": str(tmp / "dev"),
            "SYSFS": str(tmp / "sys"),
            "TMPDIR": str(tmp / "work"),
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    # whatever happened, the script leaves no copies (or mount points) behind
    assert not list((tmp / "work").iterdir())
    calls: list[list[str]] = []
    if record.exists():
        current: list[str] = []
        for line in record.read_text().splitlines():
            if line == "--":
                calls.append(current)
                current = []
            else:
                current.append(line)
    kernel, initrd = Path(f"{record}.kernel"), Path(f"{record}.initrd")
    return Result(
        rc=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        calls=calls,
        kernel=kernel.read_bytes() if kernel.exists() else None,
        initrd=initrd.read_bytes() if initrd.exists() else None,
    )


def loaded(r: Result) -> None:
    """One line on stdout, nothing on stderr, one kexec -s -l call with an initrd."""
    assert r.rc == 0, r.stderr
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("kexec: loaded "), r.stdout
    assert r.stderr == ""
    [call] = r.calls
    assert call[:2] == ["-s", "-l"]
    assert call[2].startswith("--initrd=") and call[3].startswith("--command-line=")
    assert len(call) == 5


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def root_fs(path: Path, kver: str = KVER, *, links_in_boot: bool = True) -> Path:
    """A root filesystem with a kernel and initrd in /boot and the distribution's symlinks."""
    write(path / "etc/os-release", "ID=test\n")
    write(path / f"boot/vmlinuz-{kver}", f"kernel {kver}")
    write(path / f"boot/initrd.img-{kver}", f"initrd {kver}")
    links = path / "boot" if links_in_boot else path  # Ubuntu: in /boot; Debian: in /
    target = f"vmlinuz-{kver}" if links_in_boot else f"boot/vmlinuz-{kver}"
    (links / "vmlinuz").symlink_to(target)
    (links / "initrd.img").symlink_to(target.replace("vmlinuz", "initrd.img"))
    return path


# -- (a) the project's lab image: FAT /boot with SYSLINUX and systemd-boot (BLS) ------------


@pytest.fixture
def lab_image(tmp_path: Path) -> tuple[Path, Path, str]:
    """The lab image's two partitions as trees: its FAT /boot copied out as the builder made it."""
    from provisioner.deploy.images import builder

    machine.require_tools(["mkfs.vfat", "syslinux", "mcopy", "mmd", str(builder.SYSTEMD_BOOT)])
    kver = "6.1.0-28-cloud-amd64"
    root = root_fs(tmp_path / "p2", kver, links_in_boot=False)  # what debootstrap leaves
    root_uuid = str(uuid.uuid4())
    work = tmp_path / "imgwork"
    work.mkdir()
    fat = builder._boot_partition(root, kver, root_uuid, work)
    boot = tmp_path / "p1"
    boot.mkdir()
    subprocess.run(["mcopy", "-s", "-n", "-i", str(fat), "::/*", str(boot)], check=True)
    assert (boot / "syslinux.cfg").exists() and (boot / "loader/entries/provisioner.conf").exists()
    return boot, root, root_uuid


LAB_ARGS = "root=UUID={} ro console=tty0 console=ttyS0,115200n8 no_timer_check"


def test_lab_image_boots_its_bls_entry(
    rig: dict[str, Path], lab_image: tuple[Path, Path, str]
) -> None:
    boot, root, root_uuid = lab_image
    r = kexec_load(rig, boot, root)
    loaded(r)
    assert "(BLS loader/entries/provisioner.conf on /dev/vdz1; kexec -s)" in r.stdout
    assert r.cmdline == LAB_ARGS.format(root_uuid)
    assert r.kernel == (boot / "vmlinuz").read_bytes() == b"kernel 6.1.0-28-cloud-amd64"
    assert r.initrd == (boot / "initrd.img").read_bytes()


def test_lab_image_without_bls_boots_syslinux_with_the_same_command_line(
    rig: dict[str, Path], lab_image: tuple[Path, Path, str]
) -> None:
    boot, root, root_uuid = lab_image
    shutil.rmtree(boot / "loader")
    r = kexec_load(rig, boot, root)
    loaded(r)
    assert "(SYSLINUX syslinux.cfg label 'linux' on /dev/vdz1; kexec -s)" in r.stdout
    assert r.cmdline == LAB_ARGS.format(root_uuid)
    assert r.kernel == b"kernel 6.1.0-28-cloud-amd64"


def test_bls_loader_conf_default_and_version_order(rig: dict[str, Path], tmp_path: Path) -> None:
    esp = tmp_path / "p1"
    for v in ("6.1.0-9", "6.1.0-28", "6.1.0-10"):
        write(esp / f"loader/entries/debian-{v}.conf", f"title Debian\nlinux /vmlinuz-{v}\n"
              f"initrd /initrd.img-{v}\noptions root=LABEL=r\noptions ro quiet\n")  # fmt: skip
        write(esp / f"vmlinuz-{v}", f"kernel {v}")
        write(esp / f"initrd.img-{v}", f"initrd {v}")
    # no loader.conf: the first in the spec's order, newest version first (28, not 9 or 10)
    r = kexec_load(rig, esp)
    loaded(r)
    assert r.kernel == b"kernel 6.1.0-28" and r.cmdline == "root=LABEL=r ro quiet"
    # a loader.conf default is a glob on the entry id, with or without .conf
    write(esp / "loader/loader.conf", "timeout 3\ndefault debian-6.1.0-9*\n")
    assert kexec_load(rig, esp).kernel == b"kernel 6.1.0-9"
    write(esp / "loader/loader.conf", "default debian-6.1.0-10\n")
    assert kexec_load(rig, esp).kernel == b"kernel 6.1.0-10"
    # @saved (an EFI variable) cannot be read here: the first entry
    write(esp / "loader/loader.conf", "default @saved\n")
    assert kexec_load(rig, esp).kernel == b"kernel 6.1.0-28"


# -- (b) an Ubuntu cloud image: root partition with /boot/grub/grub.cfg ------------------------

# Written for this test in the format grub-mkconfig produces on Ubuntu 22.04/24.04 cloud images
# (00_header, 10_linux with its submenu, 30_uefi-firmware), shortened; not copied from an image.
UBUNTU_GRUB = """\
#
# DO NOT EDIT THIS FILE
#
# It is automatically generated by grub-mkconfig using templates
# from /etc/grub.d and settings from /etc/default/grub
#

### BEGIN /etc/grub.d/00_header ###
if [ -s $prefix/grubenv ]; then
  set have_grubenv=true
  load_env
fi
if [ "${next_entry}" ] ; then
   set default="${next_entry}"
   set next_entry=
   save_env next_entry
   set boot_once=true
else
   set default="0"
fi

if [ x"${feature_menuentry_id}" = xy ]; then
  menuentry_id_option="--id"
else
  menuentry_id_option=""
fi

export menuentry_id_option

function recordfail {
  set recordfail=1
  if [ -n "${have_grubenv}" ]; then if [ -z "${boot_once}" ]; then save_env recordfail; fi; fi
}
function load_video {
  if [ x$feature_all_video_module = xy ]; then
    insmod all_video
  else
    insmod efi_gop
    insmod efi_uga
  fi
}
serial --speed=115200 --unit=0 --word=8 --parity=no --stop=1
terminal_input serial console
terminal_output serial console
set timeout_style=hidden
set timeout=0
### END /etc/grub.d/00_header ###

### BEGIN /etc/grub.d/10_linux ###
function gfxmode {
	set gfxpayload="${1}"
	if [ "${1}" = "keep" ]; then
		set vt_handoff=vt.handoff=7
	else
		set vt_handoff=
	fi
}
set linux_gfx_mode=
export linux_gfx_mode
menuentry 'Ubuntu' --class ubuntu --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-{fs}' {
	recordfail
	load_video
	gfxmode $linux_gfx_mode
	insmod gzio
	if [ x$grub_platform = xxen ]; then insmod xzio; insmod lzopio; fi
	insmod part_gpt
	insmod ext2
	search --no-floppy --fs-uuid --set=root {fs}
	linux	/boot/vmlinuz-6.8.0-31-generic root=PARTUUID={part} ro  console=tty1 console=ttyS0 $vt_handoff
	initrd	/boot/initrd.img-6.8.0-31-generic
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-{fs}' {
	menuentry 'Ubuntu, with Linux 6.8.0-31-generic' --class ubuntu --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-6.8.0-31-generic-advanced-{fs}' {
		recordfail
		load_video
		gfxmode $linux_gfx_mode
		insmod part_gpt
		insmod ext2
		search --no-floppy --fs-uuid --set=root {fs}
		echo	'Loading Linux 6.8.0-31-generic ...'
		linux	/boot/vmlinuz-6.8.0-31-generic root=PARTUUID={part} ro  console=tty1 console=ttyS0 $vt_handoff
		echo	'Loading initial ramdisk ...'
		initrd	/boot/initrd.img-6.8.0-31-generic
	}
	menuentry 'Ubuntu, with Linux 6.8.0-30-generic' --class ubuntu --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-6.8.0-30-generic-advanced-{fs}' {
		recordfail
		load_video
		gfxmode $linux_gfx_mode
		insmod part_gpt
		insmod ext2
		search --no-floppy --fs-uuid --set=root {fs}
		echo	'Loading Linux 6.8.0-30-generic ...'
		linux	/boot/vmlinuz-6.8.0-30-generic root=PARTUUID={part} ro  console=tty1 console=ttyS0 $vt_handoff
		echo	'Loading initial ramdisk ...'
		initrd	/boot/initrd.img-6.8.0-30-generic
	}
}

### END /etc/grub.d/10_linux ###

### BEGIN /etc/grub.d/30_uefi-firmware ###
if [ "$grub_platform" = "efi" ]; then
	fwsetup --is-supported
	if [ "$?" = 0 ]; then
		menuentry 'UEFI Firmware Settings' $menuentry_id_option 'uefi-firmware' {
			fwsetup
		}
	fi
fi
### END /etc/grub.d/30_uefi-firmware ###
"""
FS = "0b1e4d2c-5a8f-4e1b-9c3d-7f6a5b4c3d2e"
PART = "4a3b2c1d-0e9f-4876-a5b4-c3d2e1f0a9b8"
UBUNTU_ARGS = f"root=PARTUUID={PART} ro  console=tty1 console=ttyS0"


def ubuntu_root(path: Path, default: str | None = None, grubenv: str | None = None) -> Path:
    root_fs(path)
    root_fs_older = path / "boot"
    write(root_fs_older / "vmlinuz-6.8.0-30-generic", "kernel 6.8.0-30-generic")
    write(root_fs_older / "initrd.img-6.8.0-30-generic", "initrd 6.8.0-30-generic")
    cfg = UBUNTU_GRUB.replace("{fs}", FS).replace("{part}", PART)
    if default is not None:
        cfg = cfg.replace('   set default="0"\n', f"   set default={default}\n")
    write(path / "boot/grub/grub.cfg", cfg)
    if grubenv is not None:
        write(path / "boot/grub/grubenv", "# GRUB Environment Block\n" + grubenv + "#" * 900)
    return path


def test_ubuntu_cloud_image_grub(rig: dict[str, Path], tmp_path: Path) -> None:
    root = ubuntu_root(tmp_path / "p1")
    esp = write(
        tmp_path / "p15/EFI/ubuntu/grub.cfg",
        f"search.fs_uuid {FS} root\nconfigfile ($root)/boot/grub/grub.cfg\n",
    )
    r = kexec_load(rig, root, esp.parents[2])
    loaded(r)
    assert (
        "(GRUB boot/grub/grub.cfg entry 'Ubuntu' on /dev/vdz1; kexec -s; GRUB variables dropped: $vt_handoff)"
        in r.stdout
    )
    assert r.cmdline == UBUNTU_ARGS  # as written, less the boot loader's own variable
    assert r.kernel == b"kernel 6.8.0-31-generic" and r.initrd == b"initrd 6.8.0-31-generic"


@pytest.mark.parametrize(
    ("default", "grubenv", "want"),
    [
        ('"1>1"', None, "6.8.0-30"),  # the submenu's second entry
        ('"1"', None, "6.8.0-31"),  # a submenu: its first entry
        (f'"gnulinux-advanced-{FS}>gnulinux-6.8.0-30-generic-advanced-{FS}"', None, "6.8.0-30"),
        (
            '"${saved_entry}"',
            f"saved_entry=gnulinux-advanced-{FS}>gnulinux-6.8.0-30-generic-advanced-{FS}\n",
            "6.8.0-30",
        ),
        ('"${saved_entry}"', None, "6.8.0-31"),  # nothing saved: the first menuentry
        ('"Ubuntu"', None, "6.8.0-31"),  # by title
        ("gnulinux-nonesuch", None, "6.8.0-31"),  # unknown: the first
        ('"2"', None, "6.8.0-31"),  # UEFI Firmware Settings has no kernel: the first
    ],
)
def test_grub_default_entry(
    rig: dict[str, Path], tmp_path: Path, default: str, grubenv: str | None, want: str
) -> None:
    r = kexec_load(rig, ubuntu_root(tmp_path / "p1", default, grubenv))
    loaded(r)
    assert r.kernel == f"kernel {want}-generic".encode()
    assert r.cmdline == UBUNTU_ARGS


def test_grubenv_kernelopts_fills_a_bls_entry(rig: dict[str, Path], tmp_path: Path) -> None:
    """Fedora/RHEL 8 style: BLS entries whose options are $kernelopts from grubenv."""
    boot = tmp_path / "p1"
    write(boot / "loader/entries/abc-4.18.0-513.el8.x86_64.conf",
          "title Rocky\nversion 4.18.0-513.el8.x86_64\nlinux /vmlinuz-4.18.0-513.el8.x86_64\n"
          "initrd $tuned_initrd /initramfs-4.18.0-513.el8.x86_64.img\n"
          "options $kernelopts $tuned_params\nid rocky-4.18\ngrub_users $grub_users\n")  # fmt: skip
    write(
        boot / "grub2/grubenv",
        "# GRUB Environment Block\nkernelopts=root=/dev/mapper/rl-root ro crashkernel=auto\n",
    )
    write(boot / "vmlinuz-4.18.0-513.el8.x86_64", "kernel el8")
    write(boot / "initramfs-4.18.0-513.el8.x86_64.img", "initrd el8")
    r = kexec_load(rig, boot)
    assert r.rc == 0, r.stderr
    assert r.cmdline == "root=/dev/mapper/rl-root ro crashkernel=auto"
    assert r.initrd == b"initrd el8"
    assert "GRUB variables dropped: $tuned_initrd $tuned_params" in r.stdout


# -- (c) a /boot partition apart from the root ---------------------------------------------------


def test_separate_boot_partition(rig: dict[str, Path], tmp_path: Path) -> None:
    esp = write(tmp_path / "p1/EFI/ubuntu/grub.cfg", "configfile ($root)/grub/grub.cfg\n").parents[
        2
    ]
    boot = tmp_path / "p2"
    cfg = (
        UBUNTU_GRUB.replace("{fs}", FS).replace("{part}", PART).replace("/boot/vmlinuz", "/vmlinuz")
    )
    write(boot / "grub/grub.cfg", cfg.replace("/boot/initrd", "/initrd"))
    write(boot / f"vmlinuz-{KVER}", "kernel on /boot")
    write(boot / f"initrd.img-{KVER}", "initrd on /boot")
    root = write(tmp_path / "p3/etc/os-release", "ID=ubuntu\n").parents[1]
    (root / "boot").mkdir()  # the mount point, empty on the root filesystem
    r = kexec_load(rig, esp, boot, root)
    loaded(r)
    assert (
        f"loaded /vmlinuz-{KVER} + /initrd.img-{KVER} (GRUB grub/grub.cfg entry 'Ubuntu' on /dev/vdz2;"
        in r.stdout
    )
    assert r.kernel == b"kernel on /boot" and r.cmdline == UBUNTU_ARGS


def test_kernel_on_another_partition_than_the_config(rig: dict[str, Path], tmp_path: Path) -> None:
    """A config's path not on its own partition is looked for on the disk's other partitions."""
    esp = write(tmp_path / "p1/grub/grub.cfg",
                "set default=0\nmenuentry 'Debian' {\n  linux /vmlinuz-6.1.0-28-amd64 root=UUID=r ro\n"
                "  initrd /initrd.img-6.1.0-28-amd64\n}\n").parents[1]  # fmt: skip
    boot = tmp_path / "p2"
    write(boot / "vmlinuz-6.1.0-28-amd64", "kernel p2")
    write(boot / "initrd.img-6.1.0-28-amd64", "initrd p2")
    r = kexec_load(rig, esp, boot, disk="/dev/nvme0n1")
    loaded(r)
    assert "(GRUB grub/grub.cfg entry 'Debian' on /dev/nvme0n1p1; kexec -s; " in r.stdout
    assert (
        "/vmlinuz-6.1.0-28-amd64 from /dev/nvme0n1p2, /initrd.img-6.1.0-28-amd64 from /dev/nvme0n1p2)"
        in r.stdout
    )
    assert r.kernel == b"kernel p2" and r.initrd == b"initrd p2"


# -- (d) EXTLINUX ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["boot/extlinux/extlinux.conf", "extlinux.conf"])
def test_extlinux_lowercase_with_initrd_in_append(
    rig: dict[str, Path], tmp_path: Path, where: str
) -> None:
    root = root_fs(tmp_path / "p1")
    # relative paths start at the config's directory, as SYSLINUX reads them
    rel = "../" if where.startswith("boot/") else "boot/"
    write(root / where, f"# generated\nui menu.c32\nmenu title Boot\ntimeout 50\ndefault ubuntu\n\n"
          f"label rescue\n\tkernel {rel}vmlinuz\n\tappend single\n"
          f"label ubuntu\n\tmenu label Ubuntu\n\tlinux {rel}vmlinuz-{KVER}\n"
          f"\tappend initrd={rel}initrd.img-{KVER} root=UUID=abc ro quiet\n")  # fmt: skip
    r = kexec_load(rig, root)
    loaded(r)
    assert f"(SYSLINUX {where} label 'ubuntu' on /dev/vdz1; kexec -s)" in r.stdout
    assert r.kernel == f"kernel {KVER}".encode() and r.initrd == f"initrd {KVER}".encode()
    assert r.cmdline == f"initrd={rel}initrd.img-{KVER} root=UUID=abc ro quiet"  # APPEND as written


def test_syslinux_menu_default_and_comma_initrds(rig: dict[str, Path], tmp_path: Path) -> None:
    boot = tmp_path / "p1"
    write(boot / "syslinux/syslinux.cfg", "DEFAULT first\nAPPEND console=ttyS0\nLABEL first\n"
          "  KERNEL /vmlinuz-a\nLABEL second\n  MENU DEFAULT\n  LINUX vmlinuz-b\n"
          "  INITRD /ucode.img,initrd-b\n")  # fmt: skip
    write(boot / "syslinux/vmlinuz-b", "kernel b")
    write(boot / "ucode.img", b"U" * 5)
    write(boot / "syslinux/initrd-b", b"I" * 3)
    r = kexec_load(rig, boot)
    loaded(r)
    assert (
        "loaded /syslinux/vmlinuz-b + initrds /ucode.img /syslinux/initrd-b (concatenated)"
        in r.stdout
    )
    assert r.kernel == b"kernel b"
    # one initrd for kexec: the archives back to back, each padded to 4 bytes, as GRUB loads them
    assert r.initrd == b"UUUUU\0\0\0III\0"
    assert r.cmdline == "console=ttyS0"  # the global APPEND


# -- (e) only the kernel symlinks --------------------------------------------------------------


@pytest.mark.parametrize(
    "links_in_boot", [True, False], ids=["ubuntu-boot-links", "debian-root-links"]
)
def test_fallback_kernel_symlinks(
    rig: dict[str, Path], tmp_path: Path, links_in_boot: bool
) -> None:
    esp = write(tmp_path / "p1/EFI/BOOT/BOOTX64.EFI", b"MZ").parents[2]
    root = root_fs(tmp_path / "p2", links_in_boot=links_in_boot)
    r = kexec_load(rig, esp, root)
    loaded(r)
    k = "/boot/vmlinuz" if links_in_boot else "/vmlinuz"
    assert (
        f"loaded {k} -> /boot/vmlinuz-{KVER} + {k.replace('vmlinuz', 'initrd.img')} (fallback {k} on /dev/vdz2; kexec -s)"
        in r.stdout
    )
    assert r.cmdline == "root=UUID=uuid-vdz2 ro"
    assert r.kernel == f"kernel {KVER}".encode() and r.initrd == f"initrd {KVER}".encode()


def test_absolute_symlink_resolves_inside_the_partition(
    rig: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "p1"
    write(root / "etc/os-release", "ID=x\n")
    write(root / "boot/vmlinuz-1", "kernel 1")
    write(root / "boot/initrd.img-1", "initrd 1")
    (root / "boot/vmlinuz").symlink_to("/boot/vmlinuz-1")  # the host's /boot must not be read
    (root / "boot/initrd.img").symlink_to("/boot/initrd.img-1")
    r = kexec_load(rig, root)
    loaded(r)
    assert r.kernel == b"kernel 1"


# -- (f) nothing bootable ----------------------------------------------------------------------


def test_nothing_bootable_says_what_was_looked_for(rig: dict[str, Path], tmp_path: Path) -> None:
    esp = write(tmp_path / "p1/EFI/BOOT/BOOTX64.EFI", b"MZ").parents[2]
    data = write(tmp_path / "p2/etc/os-release", "ID=x\n").parents[1]  # a root with no kernel
    r = kexec_load(rig, esp, data)
    assert r.rc == 1 and r.stdout == "" and r.calls == []
    assert r.stderr.count("\n") == 1
    line = r.stderr
    assert line.startswith("kexec-load: nothing to load from /dev/vdz: looked on vdz1 vdz2 for ")
    for looked in ("loader/entries", "boot/loader/entries", "boot/grub/grub.cfg", "grub/grub.cfg",
                   "boot/grub2/grub.cfg", "syslinux.cfg", "extlinux.conf", "/boot/vmlinuz"):  # fmt: skip
        assert looked in line
    assert "vdz1 (dir): nothing bootable; vdz2 (dir): nothing bootable" in line


def test_entry_with_missing_files_falls_through(rig: dict[str, Path], tmp_path: Path) -> None:
    boot = tmp_path / "p1"
    write(
        boot / "loader/entries/gone.conf", "linux /vmlinuz-gone\ninitrd /initrd-gone\noptions x\n"
    )
    write(
        boot / "syslinux.cfg", "DEFAULT l\nLABEL l\nLINUX /vmlinuz\nINITRD /initrd.img\nAPPEND y\n"
    )
    write(boot / "vmlinuz", "k")
    write(boot / "initrd.img", "i")
    r = kexec_load(rig, boot)
    loaded(r)
    assert "SYSLINUX syslinux.cfg" in r.stdout and r.cmdline == "y"
    write(boot / "syslinux.cfg", "DEFAULT l\nLABEL l\nLINUX /vmlinuz\nINITRD /initrd-gone\n")
    r = kexec_load(rig, boot)
    assert r.rc == 1 and r.calls == []
    assert (
        "BLS loader/entries/gone.conf on /dev/vdz1: not on any partition: /vmlinuz-gone /initrd-gone"
        in r.stderr
    )
    assert (
        "SYSLINUX syslinux.cfg label 'l' on /dev/vdz1: not on any partition: /initrd-gone"
        in r.stderr
    )


def test_no_partitions(rig: dict[str, Path]) -> None:
    (rig["tmp"] / "sys/block/vdz").mkdir(parents=True)
    r = kexec_load(rig)
    assert r.rc == 1 and r.calls == []
    assert "kexec-load: /dev/vdz has no partitions" in r.stderr


# -- kexec -s refused -------------------------------------------------------------------------


def test_kexec_file_load_refused_falls_back_to_kexec_load(
    rig: dict[str, Path], tmp_path: Path
) -> None:
    root = ubuntu_root(tmp_path / "p1")
    r = kexec_load(rig, root, fail="s")
    assert r.rc == 0, r.stderr
    first, second = r.calls
    assert first[:2] == ["-s", "-l"] and second[0] == "-l" and first[2:] == second[1:]
    assert (
        "; kexec -l, as kexec -s failed: kexec_file_load failed: Operation not permitted;"
        in r.stdout
    )
    assert r.kernel == b"kernel 6.8.0-31-generic"


def test_kexec_refusing_both_fails_with_one_line(rig: dict[str, Path], tmp_path: Path) -> None:
    r = kexec_load(rig, ubuntu_root(tmp_path / "p1"), fail="all")
    assert r.rc == 1 and r.stdout == "" and len(r.calls) == 2
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("kexec-load: found /boot/vmlinuz-6.8.0-31-generic + /boot/initrd.img-6.8.0-31-generic "
                               "(GRUB boot/grub/grub.cfg entry 'Ubuntu' on /dev/vdz1) but kexec refused it: kexec -s: ")  # fmt: skip


# -- (g) hostile configs ------------------------------------------------------------------------


def test_metacharacters_reach_kexec_verbatim_and_run_nothing(
    rig: dict[str, Path], tmp_path: Path
) -> None:
    mark = tmp_path / "pwned"
    args = (f"root=UUID=x ro $(touch {mark}) `touch {mark}`; touch {mark} && touch {mark} | "
            f"'quoted  arg' \"dq\" > {mark} * ? [a] \\ #hash $")  # fmt: skip
    for n, name in enumerate(("loader/entries/x.conf", "grub/grub.cfg", "syslinux.cfg")):
        cfg = (
            f"linux /vmlinuz\ninitrd /initrd.img\noptions {args}\n",
            f"menuentry 'x' {{\n linux /vmlinuz {args}\n initrd /initrd.img\n}}\n",
            f"DEFAULT x\nLABEL x\n LINUX /vmlinuz\n INITRD /initrd.img\n APPEND {args}\n",
        )[n]
        part = tmp_path / f"p{n}"
        write(part / name, cfg)
        write(part / "vmlinuz", "k")
        write(part / "initrd.img", "i")
        write(part / "[a]", "")  # what a glob would find, were anything expanded
        r = kexec_load(rig, part)
        loaded(r)
        assert r.cmdline == args, name  # $( and ` are no GRUB variables: nothing is dropped
        assert args in r.stdout
        assert not mark.exists()


def test_grub_variables_are_dropped_as_whole_words(rig: dict[str, Path], tmp_path: Path) -> None:
    part = tmp_path / "p1"
    write(part / "vmlinuz", "k")
    write(part / "initrd.img", "i")
    write(part / "grub/grub.cfg", "menuentry 'x' {\n linux /vmlinuz $first root=${rootdev}  ro\t"
          "quiet ${extra_cmdline} x=\"a  b\" $vt_handoff\n initrd /initrd.img $tuned_initrd\n}\n")  # fmt: skip
    r = kexec_load(rig, part)
    loaded(r)
    # root=${rootdev} would be an empty root=: the whole word goes; the rest keeps its spacing
    assert r.cmdline == 'ro\tquiet x="a  b"'
    assert (
        "GRUB variables dropped: $tuned_initrd $first root=${rootdev} ${extra_cmdline} $vt_handoff)"
        in r.stdout
    )


def test_dotdot_leaving_the_partition_is_refused(rig: dict[str, Path], tmp_path: Path) -> None:
    outside = write(tmp_path / "outside-kernel", "not on the disk")
    part = tmp_path / "p1"
    write(part / "boot/vmlinuz-1", "k")
    write(part / "boot/initrd.img-1", "i")
    write(
        part / "grub/grub.cfg",
        "menuentry 'x' {\n linux /boot/../../outside-kernel ro\n initrd /boot/initrd.img-1\n}\n",
    )
    r = kexec_load(rig, part)
    assert r.rc == 1 and r.calls == [] and outside.read_text() == "not on the disk"
    assert (
        "GRUB grub/grub.cfg entry 'x' on /dev/vdz1: refused /boot/../../outside-kernel (outside the partition)"
        in r.stderr
    )
    # a symlink out of the partition is refused the same way
    write(
        part / "grub/grub.cfg",
        "menuentry 'x' {\n linux /boot/vmlinuz ro\n initrd /boot/initrd.img-1\n}\n",
    )
    (part / "boot/vmlinuz").symlink_to("../../outside-kernel")
    r = kexec_load(rig, part)
    assert (
        r.rc == 1 and r.calls == [] and "refused /boot/vmlinuz (outside the partition)" in r.stderr
    )
    # .. that stays inside is a path like any other
    write(
        part / "grub/grub.cfg",
        "menuentry 'x' {\n linux /grub/../boot/vmlinuz-1 ro\n initrd /boot/initrd.img-1\n}\n",
    )
    loaded(kexec_load(rig, part))


def test_crlf_line_endings(rig: dict[str, Path], tmp_path: Path) -> None:
    boot = tmp_path / "p1"
    write(boot / "loader/loader.conf", "default b.conf\r\n")
    write(boot / "loader/entries/a.conf", "linux /vmlinuz-a\r\noptions a\r\n")
    write(
        boot / "loader/entries/b.conf",
        "linux /vmlinuz-b\r\ninitrd /initrd-b\r\noptions root=UUID=b ro\r\n",
    )
    write(boot / "vmlinuz-b", "kernel b")
    write(boot / "initrd-b", "initrd b")
    r = kexec_load(rig, boot)
    loaded(r)
    assert r.cmdline == "root=UUID=b ro" and r.kernel == b"kernel b"
    write(boot / "extlinux.conf", "DEFAULT b\r\nLABEL b\r\n  LINUX /vmlinuz-b\r\n  APPEND x=1\r\n")
    shutil.rmtree(boot / "loader")
    r = kexec_load(rig, boot)
    assert r.rc == 0 and r.cmdline == "x=1" and "(no initrd)" in r.stdout
    assert r.calls[0][2] == "--command-line=x=1"  # no --initrd without one


def test_huge_lines_are_refused_quickly(rig: dict[str, Path], tmp_path: Path) -> None:
    part = tmp_path / "p1"
    write(part / "vmlinuz", "k")
    write(part / "initrd.img", "i")
    # a 1 MiB line of blanks ending in a word: the worst case for a pattern anchored at the end
    huge = " " * (1 << 20) + "x"
    write(
        part / "grub/grub.cfg",
        f"menuentry 'x' {{\n linux /vmlinuz ro {huge}\n initrd /initrd.img\n}}\n",
    )
    write(part / "loader/entries/x.conf", f"linux /vmlinuz\noptions {huge}\n")
    # a pattern that backtracks over the 1 MiB line never ends: the timeout fails the test
    r = kexec_load(rig, part, timeout=HANG_S)
    assert r.rc == 1 and r.calls == []
    assert (
        "vdz1: loader/entries/x.conf: 1 line(s) over 4096 characters, not a boot config" in r.stderr
    )
    assert "vdz1: grub/grub.cfg: 1 line(s) over 4096 characters, not a boot config" in r.stderr
    assert len(r.stderr) < 4096
    # next to a usable config, that config is used
    write(part / "syslinux.cfg", "LABEL l\nLINUX /vmlinuz\nINITRD /initrd.img\nAPPEND ok\n")
    r = kexec_load(rig, part)
    loaded(r)
    assert r.cmdline == "ok"


def test_long_options_over_several_lines_are_refused(rig: dict[str, Path], tmp_path: Path) -> None:
    part = tmp_path / "p1"
    write(part / "vmlinuz", "k")
    lines = "".join(f"options {'a' * 4000}\n" for _ in range(3))
    write(part / "loader/entries/x.conf", f"linux /vmlinuz\n{lines}")
    r = kexec_load(rig, part)
    assert r.rc == 1 and r.calls == []
    assert "the command line of loader/entries/x.conf is 12002 characters, over 4096" in r.stderr
