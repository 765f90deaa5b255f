"""The ramdisk's deploy.sh under busybox, against fake disks (plain files) and the real HTTP server.

Covers the paths the VM test does not: a sha256 mismatch (the target's partition table is
cleared and the failure reported), no disk matching the hint (nothing written), and an image
that verifies but has no partition table. Data disks stay byte-for-byte unchanged in each case.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.sessions import FAILED, START, HostSession
from provisioner.deploy.ramdisk import FILES

MARKER = b"zfs-pool-member-do-not-touch" * 100
IMAGE = bytes(range(256)) * 8192  # 2 MiB, no partition table


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict]:
    if shutil.which("busybox") is None:
        pytest.skip("busybox not installed")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    busybox = shutil.which("busybox")
    assert busybox
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout
    for applet in applets.split():
        (bindir / applet).symlink_to(busybox)
    for d, serial in (("vdy", "DATA-1"), ("vdz", "ROOT-1")):
        sysd = tmp_path / "sys/block" / d
        (sysd / "device").mkdir(parents=True)
        (sysd / "size").write_text(str(8 << 11) + "\n")  # 8 MiB
        (sysd / "serial").write_text(serial + "\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "vdy").write_bytes(MARKER)
    (dev / "vdz").write_bytes(b"\xaa" * (3 << 20))
    server = DeployServer(bind="127.0.0.1", port=0, public_url="")
    (tmp_path / "image.raw").write_bytes(IMAGE)
    server.files["images/test.raw"] = tmp_path / "image.raw"
    server.start()
    yield {"tmp": tmp_path, "server": server, "bin": bindir, "dev": dev}
    server.stop()


def run_deploy(rig: dict, *, sha: str, hint: str) -> tuple[HostSession, subprocess.CompletedProcess[str]]:
    server: DeployServer = rig["server"]
    tmp: Path = rig["tmp"]
    base = f"http://127.0.0.1:{server.port}"
    session = HostSession(host="h1", mac="52:54:00:00:00:01", method="image", ipxe_script="")
    server.register(session)
    env = {
        "DEPLOY_TOKEN": session.token.reveal(),
        "CALLBACK_URL": f"{base}/callback/h1",
        "IMAGE_URL": f"{base}/files/images/test.raw",
        "IMAGE_SHA256": sha,
        "ROOT_PART": "",
        "SEED_URL": f"{base}/deploy/h1/seed",
        "HINT_ARGS": hint,
    }
    conf = tmp / "deploy.env"
    conf.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()))
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.run(
        [str(rig["bin"] / "sh"), str(FILES / "deploy.sh"), str(conf)],
        env={
            "PATH": f"{rig['bin']}:/usr/sbin:/usr/bin:/sbin:/bin",
            "DEVDIR": str(rig["dev"]),
            "SYSFS": str(tmp / "sys"),
            "TMPDIR": str(work),
            "DEPLOY_LOG": str(work / "deploy.log"),
            "PICK_DISK": str(FILES / "pick-disk.sh"),
            "DEPLOY_NO_SHELL": "1",
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return session, proc


def test_sha256_mismatch_clears_the_target_and_reports(rig: dict) -> None:
    session, proc = run_deploy(rig, sha="0" * 64, hint="--serial ROOT-1")
    assert START in session.reports, proc.stdout + proc.stderr
    log = session.reports[FAILED].log
    assert f"FAILED: image sha256 mismatch: expected {'0' * 64}, got {hashlib.sha256(IMAGE).hexdigest()}" in log
    assert "root disk: /dev/vdz" in log
    target = (rig["dev"] / "vdz").read_bytes()
    assert target[: 1 << 20] == bytes(1 << 20)  # no half-written image can boot
    assert (rig["dev"] / "vdy").read_bytes() == MARKER


def test_no_matching_disk_writes_nothing(rig: dict) -> None:
    session, _ = run_deploy(rig, sha=hashlib.sha256(IMAGE).hexdigest(), hint="--serial NOPE")
    log = session.reports[FAILED].log
    assert "FAILED: root disk hint: no disk matches the hint serial=NOPE; refusing to guess" in log
    assert "vdy serial=DATA-1" in log and "vdz serial=ROOT-1" in log
    assert (rig["dev"] / "vdz").read_bytes() == b"\xaa" * (3 << 20)
    assert (rig["dev"] / "vdy").read_bytes() == MARKER


def test_verified_image_is_written_to_the_hinted_disk_only(rig: dict) -> None:
    sha = hashlib.sha256(IMAGE).hexdigest()
    session, _ = run_deploy(rig, sha=sha, hint="--serial ROOT-1")
    log = session.reports[FAILED].log
    assert f"sha256 verified: {sha}" in log
    # this image has no partition table to grow: refused after the write, which is in place
    assert "FAILED: the image on /dev/vdz has no partition table" in log
    assert (rig["dev"] / "vdz").read_bytes()[: len(IMAGE)] == IMAGE
    assert (rig["dev"] / "vdy").read_bytes() == MARKER
