"""deploy.sh against hostile image streams (#32 item 5): nothing on the root disk can boot before
the image verified, nothing is written past the image's size, and a deploy that fails clears what
its stream wrote.

The ramdisk harness (ramdisk_rig: busybox userland, a fake 8 MiB root disk, the real deploy
server for the callbacks). Stand-in for a cut, tampered or overlong stream: a stdlib HTTP server
in this test that sends the first 5 MiB of a 6 MiB image, waits while the test looks at the disk
(the stream paused mid-way), then ends the stream as the case asks.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.sessions import FAILED, HostSession
from tests.support.ramdisk_rig import DISK_BYTES, DISK_FILL, busybox_bin, start_deploy
from tests.support.waiting import wait_until

MiB = 1 << 20
IMAGE = random.Random(32).randbytes(6 * MiB)
# sent before the pause: the ramdisk's first MiB, one 4 MiB disk write, and slack for what the
# tools between the socket and the disk keep in their buffers
PART = 5 * MiB + 256 * 1024


class Source:
    """The image's sender: ``case`` says how the stream ends after the pause."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.paused = threading.Event()
        self.go = threading.Event()
        source = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                rest = IMAGE[PART:]
                if source.case == "tampered":
                    rest = rest[:-1] + bytes([rest[-1] ^ 1])
                if source.case == "longer":
                    rest += b"\x55" * MiB
                self.send_response(200)
                self.send_header("Content-Length", str(PART + len(rest)))
                self.end_headers()
                self.wfile.write(IMAGE[:PART])
                self.wfile.flush()
                source.paused.set()
                source.go.wait(60)
                if source.case != "cut":  # cut: the connection closes 1 MiB short
                    self.wfile.write(rest)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/image.raw"

    def close(self) -> None:
        self.go.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def bb(tmp_path: Path) -> Path:
    busybox = shutil.which("busybox")
    assert busybox, "busybox is installed by scripts/install-deps"
    return busybox_bin(busybox, tmp_path / "bin")


@pytest.fixture
def server() -> Iterator[DeployServer]:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="")
    srv.start()
    yield srv
    srv.stop()


def deploy(bb: Path, server: DeployServer, tmp: Path, case: str) -> tuple[HostSession, bytes, str]:
    """Run deploy.sh against a stream ending as ``case``; the disk seen while the stream was
    paused, and the host's report."""
    source = Source(case)
    root = tmp / "host"
    session = HostSession(host="h1", mac="52:54:00:00:00:01", method="image", ipxe_script="")
    try:
        proc = start_deploy(bb, server, session, root, hashlib.sha256(IMAGE).hexdigest(),
                            conf={"IMAGE_URL": source.url, "IMAGE_ATTEMPTS": "1"},
                            image_size=len(IMAGE))
        disk = root / "dev/vdz"
        assert source.paused.wait(60), "the ramdisk never asked for the image"
        # the first 4 MiB the stream carried past the ramdisk's first MiB reached the disk
        wait_until(lambda: disk.read_bytes()[MiB: 4 * MiB] == IMAGE[MiB: 4 * MiB],
                   "the stream's first disk write")
        midway = disk.read_bytes()
        source.go.set()
        out, _ = proc.communicate(timeout=120)
    finally:
        source.close()
    assert FAILED in session.reports, out  # every case ends failed: the image has no partitions
    return session, midway, session.reports[FAILED].log


def test_while_the_stream_runs_the_disk_holds_nothing_bootable(bb, server, tmp_path):
    _, midway, log = deploy(bb, server, tmp_path, "whole")
    assert midway[:MiB] == bytes(MiB)  # neither the image's boot sector nor the old one
    assert midway[-MiB:] == bytes(MiB)  # nor a backup GPT at the disk's end
    final = (tmp_path / "host/dev/vdz").read_bytes()
    assert f"sha256 verified: {hashlib.sha256(IMAGE).hexdigest()}" in log
    assert final[: len(IMAGE)] == IMAGE  # the first MiB went on after the check
    assert final[len(IMAGE): DISK_BYTES - MiB] == DISK_FILL * (DISK_BYTES - MiB - len(IMAGE))


@pytest.mark.parametrize(("case", "why", "reached"), [
    ("cut", "", PART),  # what wget got before the end: it may or may not call it an error
    ("tampered", "FAILED: image sha256 mismatch", len(IMAGE)),
    ("longer", "FAILED: the image stream was longer than the image's 6291456 bytes", len(IMAGE)),
])
def test_a_bad_stream_leaves_nothing_of_itself_on_the_disk(bb, server, tmp_path, case, why,
                                                           reached):
    _, _, log = deploy(bb, server, tmp_path, case)
    assert why in log and "sha256 verified" not in log, log
    assert f"clearing the {reached} bytes the image streams wrote to /dev/vdz" in log
    final = (tmp_path / "host/dev/vdz").read_bytes()
    assert len(final) == DISK_BYTES
    assert final[:reached] == bytes(reached)  # what the stream wrote, cleared
    # beyond it, and never past the image's size: the disk as it was, and its last MiB zero
    assert final[reached: DISK_BYTES - MiB] == DISK_FILL * (DISK_BYTES - MiB - reached)
    assert final[-MiB:] == bytes(MiB)
