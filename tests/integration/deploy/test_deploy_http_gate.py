"""The deploy HTTP server's image-stream gate on loopback: requests beyond the limit held in the
server and handed a released stream at once (FIFO, a held 503 when the hold runs out, a client
that disconnects while held gives its ticket up, bounded hold slots), 503 + Retry-After without
a hold, FIFO admission across retries, the stream given back when the body is sent and when the
client drops mid-stream, ungated paths, and logs without tokens."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from provisioner.deploy.embedded.gate import StreamGate
from provisioner.deploy.embedded.http import HELD_REASON, DeployServer
from provisioner.deploy.embedded.sessions import HostSession
from tests.support.waiting import wait_until

IMAGE = "images/abc.raw"
HOSTS = ("h1", "h2", "h3", "h4", "h5", "gone")
BIG = 64 << 20  # larger than any socket buffer: a dropped client leaves the server mid-write


def make_server(tmp_path: Path, hold_s: float) -> DeployServer:
    srv = DeployServer(
        bind="127.0.0.1", port=0, public_url="http://127.0.0.1", max_image_streams=1,
        retry_after_s=3, hold_s=hold_s,
    )
    small = tmp_path / "image.raw"
    small.write_bytes(bytes(range(256)) * 4096)
    big = tmp_path / "big.raw"
    with big.open("wb") as f:
        f.truncate(BIG)
    srv.files[IMAGE] = small
    srv.files["images/big.raw"] = big
    srv.files["ramdisk/initrd.img"] = small
    srv.gated_files.update({IMAGE, "images/big.raw"})
    # only a host being deployed gets an image stream (the foreign-client tests are below)
    for i, host in enumerate(HOSTS, 1):
        srv.register(HostSession(host=host, mac=f"52:54:00:00:01:{i:02x}", method="image",
                                 ipxe_script=""))
    srv.start()
    return srv


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DeployServer]:
    """No hold: every busy answer is an immediate 503 (what a host gets when the hold slots
    are full, and what the previous server always did)."""
    srv = make_server(tmp_path, hold_s=0)
    yield srv
    srv.stop()


@pytest.fixture
def held(tmp_path: Path) -> Iterator[DeployServer]:
    """The default: busy requests wait in the server (a long hold, so that a hand-over that
    does not happen shows as a timeout instead of a late success)."""
    srv = make_server(tmp_path, hold_s=60)
    yield srv
    srv.stop()


def url(srv: DeployServer, path: str) -> str:
    return f"http://127.0.0.1:{srv.port}{path}"


def gate(srv: DeployServer) -> StreamGate:
    assert srv.gate is not None
    return srv.gate


def test_busy_streams_get_503_with_retry_after(server: DeployServer) -> None:
    assert gate(server).try_admit("host holder").admitted  # the only stream is taken
    r = requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5)
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "3"
    assert "all 1 image streams are busy; queue place 1" in r.text
    assert gate(server).waiting() == ["host h1"]
    gate(server).release("host holder")
    r = requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5)
    assert r.status_code == 200 and r.content == bytes(range(256)) * 4096
    wait_until(lambda: gate(server).active == 0, "the stream to be given back")
    assert gate(server).waiting() == []


def test_fifo_admission_across_retries(server: DeployServer) -> None:
    assert gate(server).try_admit("host holder").admitted
    for host in ("h1", "h2", "h3"):
        assert requests.get(url(server, f"/files/{IMAGE}?host={host}"), timeout=5).status_code == 503
    gate(server).release("host holder")
    # the stream is free, but younger tickets asking first still wait for h1
    assert requests.get(url(server, f"/files/{IMAGE}?host=h3"), timeout=5).status_code == 503
    assert requests.get(url(server, f"/files/{IMAGE}?host=h2"), timeout=5).status_code == 503
    assert requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5).status_code == 200
    wait_until(lambda: gate(server).active == 0, "h1's stream to be given back")
    assert requests.get(url(server, f"/files/{IMAGE}?host=h2"), timeout=5).status_code == 200


def test_client_dropping_mid_stream_frees_the_stream(server: DeployServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /files/images/big.raw?host=h1 HTTP/1.1\r\nHost: x\r\n\r\n")
        head = sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 200")
        assert gate(server).active == 1
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    # the server's next write fails; werkzeug closes the body iterator, which frees the stream
    wait_until(lambda: gate(server).active == 0, "the dropped stream to be given back")
    r = requests.get(url(server, f"/files/{IMAGE}?host=h2"), timeout=5)
    assert r.status_code == 200


def test_ungated_paths_are_served_while_streams_are_busy(server: DeployServer) -> None:
    s = HostSession(host="h1", mac="52:54:00:18:00:01", method="image",
                    ipxe_script="#!ipxe\n", config_env="DEPLOY_TOKEN='t'\n")
    server.register(s)
    assert gate(server).try_admit("host holder").admitted
    assert requests.get(url(server, "/files/ramdisk/initrd.img"), timeout=5).status_code == 200
    assert requests.get(url(server, "/ipxe/52-54-00-18-00-01"), timeout=5).status_code == 200
    key = {"Authorization": f"Bearer {s.boot_key.reveal()}"}
    assert requests.get(url(server, "/deploy/h1/config"), headers=key, timeout=5).status_code == 200
    assert requests.head(url(server, f"/files/{IMAGE}"), timeout=5).status_code == 200
    assert gate(server).active == 1 and gate(server).waiting() == []


def test_unregistering_a_host_drops_its_ticket(server: DeployServer) -> None:
    assert gate(server).try_admit("host holder").admitted
    for host in ("h1", "h2"):
        assert requests.get(url(server, f"/files/{IMAGE}?host={host}"), timeout=5).status_code == 503
    server.unregister("h1")  # its deploy ended (failed, timed out): it must not hold the queue
    gate(server).release("host holder")
    assert requests.get(url(server, f"/files/{IMAGE}?host=h2"), timeout=5).status_code == 200


def test_no_gate_without_a_limit(tmp_path: Path) -> None:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="")
    blob = tmp_path / "image.raw"
    blob.write_bytes(b"x" * 1024)
    srv.files[IMAGE] = blob
    srv.gated_files.add(IMAGE)
    srv.register(HostSession(host="h1", mac="52:54:00:00:01:01", method="image", ipxe_script=""))
    srv.start()
    try:
        assert srv.gate is None
        assert requests.get(url(srv, f"/files/{IMAGE}?host=h1"), timeout=5).status_code == 200
    finally:
        srv.stop()


def test_gate_logs_carry_no_tokens(server: DeployServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="provisioner.deploy.http")
    s = HostSession(host="h1", mac="52:54:00:18:00:01", method="image", ipxe_script="")
    server.register(s)
    token = s.boot_token.reveal()
    assert gate(server).try_admit("host holder").admitted
    requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5)
    requests.post(url(server, f"/phone-home/h1/{token}"), timeout=5)
    gate(server).release("host holder")
    requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5)
    # logged by the server's thread once the stream is given back, after the body went out
    wait_until(lambda: "image stream released by" in caplog.text, "the release's log line")
    text = caplog.text
    assert "image stream refused for 127.0.0.1 (host h1): 1/1 streams busy, queue place 1" in text
    assert "image stream 1/1 admitted for 127.0.0.1 (host h1)" in text
    assert "image stream released by 127.0.0.1 (host h1)" in text
    assert token not in text and s.token.reveal() not in text


class Fetch(threading.Thread):
    """One image GET in the background; its response (or error) when it ends."""

    def __init__(self, srv: DeployServer, host: str) -> None:
        super().__init__(daemon=True)
        self.target_url = url(srv, f"/files/{IMAGE}?host={host}")
        self.response: requests.Response | None = None

    def run(self) -> None:
        self.response = requests.get(self.target_url, timeout=30)


def held_count(srv: DeployServer) -> int:
    return gate(srv).stats().held


def test_held_requests_get_released_streams_at_once_in_ticket_order(
    held: DeployServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="provisioner.deploy.http")
    assert gate(held).try_admit("host holder").admitted
    fetches = []
    for i, host in enumerate(("h1", "h2", "h3"), 1):
        fetches.append(Fetch(held, host))
        fetches[-1].start()
        wait_until(lambda i=i: held_count(held) == i, f"{host} to wait in the server")
    gate(held).release("host holder")
    for f in fetches:
        f.join(30)  # with a 60 s hold, only a hand-over answers them in time
        assert f.response is not None and f.response.status_code == 200
        assert f.response.content == bytes(range(256)) * 4096
    order = [r.getMessage().split("(host ")[1].split(")")[0] for r in caplog.records
             if "admitted for" in r.getMessage()]
    assert order == ["h1", "h2", "h3"]
    wait_until(lambda: gate(held).active == 0, "the streams to be given back")
    assert gate(held).waiting() == [] and held_count(held) == 0


def test_a_hold_that_runs_out_is_a_held_503_and_keeps_the_place(tmp_path: Path) -> None:
    srv = make_server(tmp_path, hold_s=0.3)
    try:
        assert gate(srv).try_admit("host holder").admitted
        r = requests.get(url(srv, f"/files/{IMAGE}?host=h1"), timeout=10)
        assert r.status_code == 503 and r.reason == HELD_REASON
        assert r.headers["Retry-After"] == "0" and "queue place 1, retry in 0 s" in r.text
        assert gate(srv).waiting() == ["host h1"]
    finally:
        srv.stop()


def test_a_held_client_that_disconnects_gives_up_its_ticket(held: DeployServer) -> None:
    assert gate(held).try_admit("host holder").admitted
    with socket.create_connection(("127.0.0.1", held.port), timeout=10) as sock:
        sock.sendall(f"GET /files/{IMAGE}?host=gone HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        wait_until(lambda: held_count(held) == 1, "the request to wait in the server")
    # the server notices the closed connection while it holds the request
    wait_until(lambda: gate(held).waiting() == [], "the vanished host's ticket to go")
    assert held_count(held) == 0
    nxt = Fetch(held, "h2")
    nxt.start()
    wait_until(lambda: held_count(held) == 1, "h2 to wait in the server")
    gate(held).release("host holder")
    nxt.join(30)
    assert nxt.response is not None and nxt.response.status_code == 200


def test_beyond_the_hold_slots_a_request_gets_a_plain_503(held: DeployServer) -> None:
    gate(held).max_held = 1
    assert gate(held).try_admit("host holder").admitted
    first = Fetch(held, "h1")
    first.start()
    wait_until(lambda: held_count(held) == 1, "h1 to wait in the server")
    r = requests.get(url(held, f"/files/{IMAGE}?host=h2"), timeout=10)
    assert r.status_code == 503 and r.reason != HELD_REASON and r.headers["Retry-After"] == "3"
    assert gate(held).waiting() == ["host h1", "host h2"]  # h2 polls, its place kept
    gate(held).release("host holder")
    first.join(30)
    assert first.response is not None and first.response.status_code == 200


def test_unregistering_a_host_ends_its_held_request(held: DeployServer) -> None:
    assert gate(held).try_admit("host holder").admitted
    f = Fetch(held, "h1")
    f.start()
    wait_until(lambda: held_count(held) == 1, "h1 to wait in the server")
    held.unregister("h1")  # its deploy ended: the host is powered off, its request answered
    f.join(30)
    assert f.response is not None and f.response.status_code == 503
    assert gate(held).waiting() == [] and gate(held).active == 1


def test_a_retried_host_queues_ahead_of_first_attempts(server: DeployServer) -> None:
    assert gate(server).try_admit("host holder").admitted
    for host in ("h1", "h2"):
        assert requests.get(url(server, f"/files/{IMAGE}?host={host}"), timeout=5).status_code == 503
    # h3's first attempt failed after its stream: its retry has paid a power cycle and POST
    server.register(HostSession(host="h3", mac="52:54:00:00:00:03", method="image",
                                ipxe_script=""), retry=True)
    r = requests.get(url(server, f"/files/{IMAGE}?host=h3"), timeout=5)
    assert r.status_code == 503 and "queue place 1" in r.text
    assert gate(server).waiting() == ["host h3", "host h1", "host h2"]
    gate(server).release("host holder")
    assert requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5).status_code == 503
    assert requests.get(url(server, f"/files/{IMAGE}?host=h3"), timeout=5).status_code == 200
    # a first attempt's registration changes no place
    server.register(HostSession(host="h4", mac="52:54:00:00:00:04", method="image",
                                ipxe_script=""))
    wait_until(lambda: gate(server).active == 0, "h3's stream to be given back")
    assert requests.get(url(server, f"/files/{IMAGE}?host=h4"), timeout=5).status_code == 503
    assert gate(server).waiting() == ["host h1", "host h2", "host h4"]


def test_a_host_streaming_again_queues_ahead_of_first_attempts(server: DeployServer) -> None:
    s = HostSession(host="h5", mac="52:54:00:00:00:05", method="image", ipxe_script="")
    server.register(s)
    r = requests.get(url(server, f"/files/{IMAGE}?host=h5"), timeout=5)
    assert r.status_code == 200 and s.image_streams == 1 and s.image_sent_at is not None
    wait_until(lambda: gate(server).active == 0, "h5's stream to be given back")
    assert gate(server).try_admit("host holder").admitted
    assert requests.get(url(server, f"/files/{IMAGE}?host=h1"), timeout=5).status_code == 503
    # h5's image did not verify: its ramdisk asks again, ahead of h1's first attempt
    r = requests.get(url(server, f"/files/{IMAGE}?host=h5"), timeout=5)
    assert r.status_code == 503 and "queue place 1" in r.text
    assert gate(server).waiting() == ["host h5", "host h1"]
