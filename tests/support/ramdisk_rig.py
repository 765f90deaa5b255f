"""deploy.sh on a fake host: busybox as the ramdisk's userland, a fake root disk (a plain file
with its sysfs entries), and the real deploy server it talks to over loopback."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.sessions import HostSession
from provisioner.deploy.ramdisk import FILES

ROOT_SERIAL = "ROOT-1"


def busybox_bin(busybox: str, bindir: Path) -> Path:
    """``bindir`` made a directory of every applet of ``busybox`` (the ramdisk's userland)."""
    bindir.mkdir()
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    for applet in applets.stdout.split():
        (bindir / applet).symlink_to(busybox)
    return bindir


DISK_BYTES = 8 << 20
DISK_FILL = b"\xaa"  # what the fake root disk holds before the deploy


def start_deploy(bindir: Path, server: DeployServer, session: HostSession, root: Path,
                 image_sha256: str, conf: dict[str, str] | None = None,
                 env: dict[str, str] | None = None,
                 image_size: int | None = None) -> subprocess.Popen[str]:
    """Register ``session`` and start deploy.sh for it under ``root`` (its own /dev, /sys and
    work directory; one 8 MiB root disk, vdz, serial ROOT-1); not waited for. ``conf`` adds to
    the one-time configuration (``image_size``: its IMAGE_SIZE), ``env`` to the process
    environment."""
    sysd = root / "sys/block/vdz"
    (sysd / "device").mkdir(parents=True)
    (sysd / "size").write_text(str(DISK_BYTES // 512) + "\n")
    (sysd / "serial").write_text(ROOT_SERIAL + "\n")
    (root / "dev").mkdir()
    (root / "dev/vdz").write_bytes(DISK_FILL * DISK_BYTES)
    (root / "work").mkdir()
    server.register(session)
    base, host = f"http://127.0.0.1:{server.port}", session.host
    values = {
        "DEPLOY_TOKEN": session.token.reveal(),
        "CALLBACK_URL": f"{base}/callback/{host}",
        "IMAGE_URL": f"{base}/files/images/test.raw?host={host}",
        "IMAGE_SHA256": image_sha256,
        "ROOT_PART": "",
        "SEED_URL": f"{base}/deploy/{host}/seed",
        "HINT_ARGS": f"--serial {ROOT_SERIAL}",
        "IMAGE_RETRY_S": "1",
        **({"IMAGE_SIZE": str(image_size)} if image_size is not None else {}),
        **(conf or {}),
    }
    path = root / "deploy.env"
    path.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in values.items()))
    return subprocess.Popen(
        [str(bindir / "sh"), str(FILES / "deploy.sh"), str(path)],
        env={
            "PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin",
            "DEVDIR": str(root / "dev"),
            "SYSFS": str(root / "sys"),
            "TMPDIR": str(root / "work"),
            "DEPLOY_LOG": str(root / "work/deploy.log"),
            "PICK_DISK": str(FILES / "pick-disk.sh"),
            "DEPLOY_NO_SHELL": "1",
            **(env or {}),
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
