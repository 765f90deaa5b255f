"""Peer serving for real: deploy.sh under busybox on fake disks (plain files), the real deploy
server, and the real peer-image.cgi under busybox httpd.

- host a streams from the server, verifies and serves; the server's one stream is then busy,
  so host b is sent to a (307 with a ticket) and gets the image from a's disk; both stop
  serving when nobody needs them, and go on with their own deploys;
- a peer that is gone (nothing listens) costs the host no image attempt: it asks the server
  again, the server drops that peer and streams the image itself;
- the CGI serves the exact image bytes for the ticket the server issues for the asking
  address, and 403 for any other ticket, address or method.

The test image has no partition table, so each deploy ends, after serving, in the reported
"no partition table" failure (the VM test and the lab e2e cover the whole deploy).
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.peers import PeerPool
from provisioner.deploy.embedded.sessions import FAILED, VERIFIED, HostSession
from provisioner.deploy.ramdisk import FILES
from provisioner.secrets import Secret
from tests.support.ramdisk_rig import busybox_bin, start_deploy
from tests.support.waiting import wait_until

IMAGE = bytes(range(256)) * 8192  # 2 MiB, no partition table


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bb(tmp_path: Path) -> Path:
    """A directory of busybox applets (the ramdisk's userland)."""
    busybox = shutil.which("busybox")
    assert busybox, "busybox-static is installed by scripts/install-deps (scripts/deps)"
    bindir = busybox_bin(busybox, tmp_path / "bin")
    (tmp_path / "image.raw").write_bytes(IMAGE)
    return bindir


@pytest.fixture
def server(tmp_path: Path, bb: Path) -> Iterator[DeployServer]:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="", max_image_streams=1,
                       retry_after_s=1, hold_s=3, peers=PeerPool(linger_s=30, serve_max_s=60))
    srv.files["images/test.raw"] = tmp_path / "image.raw"
    srv.gated_files.add("images/test.raw")
    srv.start()
    yield srv
    srv.stop()


def start_host(tmp: Path, bb: Path, server: DeployServer, host: str,
               rack: str = "r1") -> tuple[HostSession, subprocess.Popen[str], Path]:
    """deploy.sh for ``host`` on its own fake root disk, serving peers on a port of its own."""
    root = tmp / host
    base = f"http://127.0.0.1:{server.port}"
    session = HostSession(host=host, mac="52:54:00:00:00:01", method="image", ipxe_script="",
                          locality=rack, peer_key=Secret("k-" + host), peer_port=free_port())
    proc = start_deploy(bb, server, session, root, hashlib.sha256(IMAGE).hexdigest(), conf={
        "IMAGE_SIZE": str(len(IMAGE)),
        "PEER_PORT": str(session.peer_port),
        "PEER_KEY": "k-" + host,
        "PEER_URL": f"{base}/deploy/{host}/peer",
        "PEER_MAX_S": "60",
    }, env={"PEER_CGI": str(FILES / "peer-image.cgi"), "PEER_BIND": "127.0.0.1"})
    return session, proc, root


def finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=120)
    return out


def test_a_waiting_host_gets_the_image_from_a_peer_and_both_go_on(
        tmp_path: Path, bb: Path, server: DeployServer) -> None:
    assert server.gate is not None
    # two more hosts of the run still POSTing: a peer is worth keeping (they may ask)
    for later in ("c", "d"):
        server.register(HostSession(host=later, mac="52:54:00:00:00:0c", method="image",
                                    ipxe_script=""))
    a, pa, root_a = start_host(tmp_path, bb, server, "a")
    wait_until(lambda: "host a" in server.gate.peers(), "host a to verify and serve")
    assert VERIFIED in a.reports
    # the server's only stream is busy from now: b can only be served by a
    assert server.gate.try_admit("blocker").admitted
    b, pb, root_b = start_host(tmp_path, bb, server, "b")
    wait_until(lambda: VERIFIED in b.reports, "host b to verify its image from a")
    assert server.gate.peers() == {"host a": [], "host b": []}  # both idle, c and d pending
    for later in ("c", "d"):
        server.unregister(later)  # they never came up: nobody needs the peers any more
    out_b, out_a = finish(pb), finish(pa)
    log_a, log_b = a.reports[FAILED].log, b.reports[FAILED].log
    assert (root_b / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE, out_b
    assert (root_a / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE, out_a  # served, unchanged
    assert f"sha256 verified: {hashlib.sha256(IMAGE).hexdigest()}" in log_b
    assert f"the image came from peer 127.0.0.1:{a.peer_port}\n" in log_b
    assert "came from peer" not in log_a and "?t=" not in log_b  # no ticket in the log
    stats = server.gate.stats()
    assert stats.peer_admitted == 1 and stats.admitted == 3  # a, the blocker, b (from a)
    assert b.image_streams == 1 and b.image_sent_at is not None
    for log in (log_a, log_b):
        assert "serving the image to peers on port" in log
        assert "stopped serving peers after" in log and "(leave)" in log
        # serving ended before the deploy went on (here: to the test image's missing table)
        assert log.index("stopped serving peers") < log.index("FAILED:")
        assert "FAILED: the image on /dev/vdz has no partition table" in log
    assert server.gate.peers() == {}
    # the peers' servers are gone with the serving
    for s in (a, b):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", s.peer_port), timeout=1).close()
    assert out_a


def test_a_dead_peer_is_dropped_and_costs_no_image_attempt(
        tmp_path: Path, bb: Path, server: DeployServer) -> None:
    assert server.gate is not None
    # a peer that verified and then vanished: nothing listens on its port
    ghost = HostSession(host="ghost", mac="52:54:00:00:00:09", method="image", ipxe_script="",
                        peer_key=Secret("k-ghost"), peer_port=free_port())
    server.register(ghost)
    req = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/callback/ghost/verified?serve=1", data=b"",
        headers={"Authorization": f"Bearer {ghost.token.reveal()}"}, method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    assert "host ghost" in server.gate.peers()
    assert server.gate.try_admit("blocker").admitted
    b, pb, root_b = start_host(tmp_path, bb, server, "b")
    # b is sent to the ghost, fails to connect and asks again: the ghost is dropped
    wait_until(lambda: "host ghost" not in server.gate.peers(), "the dead peer to be dropped")
    server.gate.release("blocker")
    finish(pb)
    log = b.reports[FAILED].log
    assert "(from a peer); asking the server again" in log
    assert "streaming the image again" not in log  # no image attempt spent on the peer
    assert (root_b / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE
    stats = server.gate.stats()
    assert stats.peer_admitted == 1 and b.image_streams == 2


@pytest.mark.parametrize("listen", ["127.0.0.1:{port}", "{port}"], ids=["ipv4", "dual-stack"])
def test_the_peer_cgi_serves_the_image_only_for_a_ticket_bound_to_the_asker(
        tmp_path: Path, bb: Path, listen: str) -> None:
    # the ramdisk's httpd listens on every address (dual stack): busybox then hands the CGI
    # "[::ffff:127.0.0.1]", which must give the same ticket as the plain address
    disk = tmp_path / "disk"
    disk.write_bytes(IMAGE + b"\x55" * 4096)  # the grown disk holds more than the image
    www = tmp_path / "www/cgi-bin"
    www.mkdir(parents=True)
    shutil.copy(FILES / "peer-image.cgi", www / "image")
    env_file = tmp_path / "peer.env"
    env_file.write_text(f"PEER_KEY=secret-key\nPEER_DISK={disk}\nIMAGE_SIZE={len(IMAGE)}\n")
    port = free_port()
    httpd = subprocess.Popen([str(bb / "httpd"), "-f", "-p", listen.format(port=port), "-h",
                              str(tmp_path / "www")], env={"PEER_ENV": str(env_file),
                                                           "PATH": str(bb)})
    try:
        seeder = HostSession(host="p", mac="52:54:00:00:00:02", method="image",
                             ipxe_script="", peer_key=Secret("secret-key"))
        url = f"http://127.0.0.1:{port}/cgi-bin/image"

        def get(query: str, data: bytes | None = None) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(urllib.request.Request(url + query, data=data),
                                            timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as exc:
                return exc.code, b""
            except urllib.error.URLError:
                return 0, b""  # not listening yet

        wait_until(lambda: get("")[0] == 403, "busybox httpd to listen", 10)
        good = seeder.peer_ticket("127.0.0.1")
        assert get(f"?t={good}") == (200, IMAGE)  # exactly the image, not the rest of the disk
        assert get(f"?t={seeder.peer_ticket('10.0.0.7')}")[0] == 403  # another host's ticket
        assert get(f"?t={good[:-1]}0")[0] == 403
        assert get(f"?t={good}&x=1")[0] == 403
        assert get(f"?t={good}", data=b"x")[0] == 403  # POST
        assert get("?t=$(touch%20/tmp/pwned)")[0] == 403
    finally:
        httpd.terminate()
        httpd.wait(timeout=10)
