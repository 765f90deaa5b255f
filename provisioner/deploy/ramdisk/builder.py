"""The deploy ramdisk: a Debian kernel plus a busybox initramfs that writes the OS image.

Everything comes from Debian packages: the kernel from ``linux-image-<abi>-<flavour>`` (fetched
with ``apt-get download`` and unpacked with ``dpkg -x``, never installed), busybox-static, and a
few host tools copied with the shared libraries they link (sfdisk, blkid, e2fsck, resize2fs,
udev for /dev/disk/by-path names and module autoloading), and kexec from kexec-tools, which
boots the installed OS without a second firmware POST.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

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

# 3: deploy.sh retries a busy (503) image stream; 4: kexec and kexec-load.sh (boot the
# installed OS by kexec); 5: peer-image.cgi (peer serving)
BUILDER_VERSION = "5"
FILES = Path(__file__).parent / "files"
SCRIPTS = ("init", "deploy.sh", "pick-disk.sh", "kexec-load.sh", "peer-image.cgi")
# Host tools copied into /usr/local/sbin of the ramdisk (busybox lacks or limits them).
TOOLS = ("/sbin/sfdisk", "/sbin/blkid", "/sbin/e2fsck", "/sbin/resize2fs", "/bin/udevadm")
# kexec-load.sh's loader; busybox has no kexec. Checked before a build starts.
KEXEC = "/sbin/kexec"
UDEV_FILES = (
    "/usr/lib/udev/rules.d/50-udev-default.rules",
    "/usr/lib/udev/rules.d/60-persistent-storage.rules",
    "/usr/lib/udev/rules.d/80-drivers.rules",
    "/usr/lib/udev/scsi_id",
    "/usr/lib/udev/ata_id",
)
# Module trees a deploy may need (storage, NICs, the filesystems it mounts); their
# dependencies are added from modules.dep.
MODULE_DIRS = (
    "kernel/drivers/block",
    "kernel/drivers/scsi",
    "kernel/drivers/virtio",
    "kernel/drivers/nvme",
    "kernel/drivers/ata",
    "kernel/drivers/net",
    "kernel/drivers/message",
    "kernel/fs/fat",
    "kernel/fs/isofs",
    "kernel/fs/nls",
)


@dataclass(frozen=True)
class Ramdisk:
    """A built kernel + initrd pair in the cache."""

    kernel: Path
    initrd: Path
    kernel_version: str
    sha256: dict[str, str]


def _kernel_package(flavour: str) -> str:
    out = run(["apt-cache", "depends", f"linux-image-{flavour}"], what="resolving the kernel")
    for line in out.splitlines():
        m = re.match(r"\s*Depends:\s*(linux-image-\S+)", line)
        if m:
            return m.group(1)
    raise DeployError(
        f"cannot resolve linux-image-{flavour} to a kernel package",
        hint="run `apt-get update`; the flavour must exist in Debian (cloud-amd64, amd64)",
    )


def _package_version(pkg: str) -> str:
    out = run(["apt-cache", "policy", pkg], what=f"reading the version of {pkg}")
    m = re.search(r"Candidate:\s*(\S+)", out)
    if not m or m.group(1) == "(none)":
        raise DeployError(f"{pkg} has no installable version", hint="run `apt-get update`")
    return m.group(1)


def _script_digest() -> str:
    h = hashlib.sha256()
    for name in SCRIPTS:
        h.update((FILES / name).read_bytes())
    return h.hexdigest()[:16]


def build_ramdisk(flavour: str = "cloud-amd64") -> Ramdisk:
    """Build (or find in the cache) the deploy ramdisk for a Debian kernel flavour."""
    require_tools("apt-get", "apt-cache", "dpkg", "depmod", "busybox", "cpio", "ldd")
    pkg = _kernel_package(flavour)
    version = _package_version(pkg)
    key = recipe_key(
        {"v": BUILDER_VERSION, "pkg": pkg, "version": version, "scripts": _script_digest()}
    )
    with build_slot("ramdisk", key) as (out, done):
        if not done:
            emit(Event("stage", f"building the deploy ramdisk ({pkg} {version}; once, cached)"))
            _build(pkg, out)
        else:
            emit(Event("stage", f"deploy ramdisk: cached in {out}"))
        m = read_manifest(out)
    return Ramdisk(
        kernel=out / "vmlinuz",
        initrd=out / "initrd.img",
        kernel_version=m["kernel_version"],
        sha256=m["sha256"],
    )


def _copy_with_libs(binary: Path, root: Path, dest_dir: str) -> None:
    dest = root / dest_dir.lstrip("/") / binary.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary.resolve(), dest)
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if not m:
            continue
        lib = Path(m.group(1))
        target = root / str(lib).lstrip("/")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib.resolve(), target)


def _module_closure(moddir: Path) -> set[str]:
    deps: dict[str, list[str]] = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        name, _, rest = line.partition(":")
        deps[name] = rest.split()
    wanted = {m for m in deps if any(m.startswith(d + "/") for d in MODULE_DIRS)}
    todo = list(wanted)
    while todo:
        for dep in deps.get(todo.pop(), []):
            if dep not in wanted:
                wanted.add(dep)
                todo.append(dep)
    return wanted


def _require_kexec() -> None:
    if not Path(KEXEC).is_file():
        raise DeployError(
            f"{KEXEC} not found: the deploy ramdisk needs kexec from the kexec-tools package",
            hint="apt-get install kexec-tools (scripts/install-deps installs scripts/deps/50-deploy.list)",
        )


def _install_tools(root: Path) -> None:
    """Copy TOOLS and kexec, each with the shared libraries it links, to /usr/local/sbin."""
    _require_kexec()
    for tool in (*TOOLS, KEXEC):
        _copy_with_libs(Path(tool), root, "/usr/local/sbin")


def _build(pkg: str, out: Path) -> None:
    _require_kexec()  # before the download, not after it
    work = out / "work"
    work.mkdir()
    run(["apt-get", "download", pkg], what=f"downloading {pkg}", cwd=work, timeout=600)
    debs = list(work.glob("*.deb"))
    if not debs:
        raise DeployError(f"apt-get download {pkg} produced no .deb in {work}")
    kroot = work / "kernel"
    run(["dpkg", "-x", debs[0], kroot], what=f"unpacking {debs[0].name}")
    vmlinuz = sorted((kroot / "boot").glob("vmlinuz-*"))[-1]
    kver = vmlinuz.name.removeprefix("vmlinuz-")
    full_mods = kroot / "lib/modules" / kver
    run(["depmod", "-b", kroot, kver], what="indexing kernel modules")

    root = work / "initramfs"
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/sbin", "etc", "lib", "mnt"):
        (root / d).mkdir(parents=True, exist_ok=True)
    busybox = shutil.which("busybox")
    assert busybox is not None  # require_tools checked it
    shutil.copy2(busybox, root / "bin/busybox")
    _install_tools(root)
    # udevd is udevadm under another name; the rules call their helpers by absolute path
    (root / "lib/systemd").mkdir(parents=True, exist_ok=True)
    os.symlink("/usr/local/sbin/udevadm", root / "lib/systemd/systemd-udevd")
    for f in UDEV_FILES:
        src = Path(f)
        if src.exists():
            dst = root / f.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)

    mods = root / "lib/modules" / kver
    for rel in sorted(_module_closure(full_mods)):
        dst = mods / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(full_mods / rel, dst)
    for meta in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
        if (full_mods / meta).exists():
            shutil.copy2(full_mods / meta, mods / meta)
    run(["depmod", "-b", root, kver], what="indexing the ramdisk's modules")

    for name in SCRIPTS:
        dst = root / ("init" if name == "init" else name)
        shutil.copy2(FILES / name, dst)
        dst.chmod(0o755)

    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    listing = ("\0".join([".", *files]) + "\0").encode()
    with gzip.open(out / "initrd.img", "wb", 6) as gz:
        proc = subprocess.run(
            ["cpio", "-o", "-H", "newc", "--quiet", "-0"],
            cwd=root,
            input=listing,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise DeployError(f"packing the initramfs failed: {proc.stderr.decode()[-500:]}")
        gz.write(proc.stdout)
    shutil.copy2(vmlinuz, out / "vmlinuz")
    sums = {n: sha256_file(out / n) for n in ("vmlinuz", "initrd.img")}
    shutil.rmtree(work)
    mark_done(out, {"kernel_version": kver, "package": pkg, "sha256": sums})
