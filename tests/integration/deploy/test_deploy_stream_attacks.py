"""Attacks on the deploy server's image streams (#32 items 3 and 4): a foreign address presenting
another host's ticket, clients that are no host, and slow readers holding streams.

The real server listens on 127.0.0.1 with one image stream. Stand-ins: hosts being deployed send
from their DHCP reservations 127.0.0.3 (gpu-a) and 127.0.0.5 (gpu-b), an attacker on the same
network from 127.0.0.2; all are real TCP clients bound to those loopback addresses. Waiting is on
the server's own events: a host held in the server is answered the moment a stream is handed
to it, so "the next host got the stream" is the end of its request, not a sleep.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from requests_toolbelt.adapters.source import SourceAddressAdapter

from provisioner.deploy.embedded.gate import StreamGate
from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.sessions import HostSession

HOST_A, HOST_B, ATTACKER = "127.0.0.3", "127.0.0.5", "127.0.0.2"
IMAGE = "images/big.raw"
BIG = 64 << 20  # far beyond any socket buffer: a reader that stops blocks the server's writes


def client(source: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", SourceAddressAdapter(source))
    return session


def make_server(tmp_path: Path, **kwargs: float) -> DeployServer:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="", max_image_streams=1,
                       retry_after_s=1, **kwargs)  # type: ignore[arg-type]
    big = tmp_path / "big.raw"
    with big.open("wb") as f:
        f.truncate(BIG)
    srv.files[IMAGE] = big
    srv.gated_files.add(IMAGE)
    srv.start()
    return srv


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DeployServer]:
    srv = make_server(tmp_path, hold_s=0)
    yield srv
    srv.stop()


def session(name: str, address: str, n: int) -> HostSession:
    return HostSession(host=name, mac=f"52:54:00:18:01:{n:02x}", method="image", ipxe_script="",
                       address=address)


def gate(srv: DeployServer) -> StreamGate:
    assert srv.gate is not None
    return srv.gate


def image_url(srv: DeployServer, host: str | None) -> str:
    query = f"?host={host}" if host is not None else ""
    return f"http://127.0.0.1:{srv.port}/files/{IMAGE}{query}"


def test_a_foreign_address_with_another_hosts_ticket_takes_nothing_of_it(server):
    b = session("gpu-b", HOST_B, 2)
    server.register(b)
    attacker = client(ATTACKER)
    for _ in range(3):
        r = attacker.get(image_url(server, "gpu-b"), stream=True, timeout=10)
        assert r.status_code == 403 and "reserved address 127.0.0.5" in r.text
    # no stream taken, no ticket queued, nothing counted or marked sent for gpu-b
    assert gate(server).active == 0 and gate(server).waiting() == []
    assert b.image_streams == 0 and b.image_sent_at is None
    # gpu-b itself is served at once
    r = client(HOST_B).get(image_url(server, "gpu-b"), timeout=30)
    assert r.status_code == 200 and len(r.content) == BIG
    assert b.image_streams == 1 and b.image_sent_at is not None


def test_a_foreign_address_cannot_queue_for_or_wait_in_a_hosts_place(server):
    a, b = session("gpu-a", HOST_A, 1), session("gpu-b", HOST_B, 2)
    server.register(a)
    server.register(b)
    assert gate(server).try_admit("host gpu-a").admitted  # gpu-a streams
    assert client(ATTACKER).get(image_url(server, "gpu-b"), timeout=10).status_code == 403
    assert gate(server).waiting() == []  # the attacker took no place in gpu-b's name
    assert client(HOST_B).get(image_url(server, "gpu-b"), timeout=10).status_code == 503
    assert gate(server).waiting() == ["host gpu-b"]


@pytest.mark.parametrize(("host", "status"), [(None, 403), ("nobody", 404), ("gpu-a", 403)])
def test_clients_that_are_no_host_get_no_stream(server, host, status):
    server.register(session("gpu-a", HOST_A, 1))
    for _ in range(12):  # more than the streams, the tickets it could hold, the hold slots
        r = client(ATTACKER).get(image_url(server, host), stream=True, timeout=10)
        assert r.status_code == status
        r.close()
    assert gate(server).active == 0 and gate(server).waiting() == []
    assert gate(server).stats().admitted == 0


def test_a_host_reading_nothing_is_cut_and_the_waiting_host_gets_the_stream(tmp_path):
    srv = make_server(tmp_path, hold_s=30, min_stream_bps=1 << 20, rate_window_s=0.5)
    try:
        a, b = session("gpu-a", HOST_A, 1), session("gpu-b", HOST_B, 2)
        srv.register(a)
        srv.register(b)
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=10,
                                        source_address=(HOST_A, 0))
        slow.sendall(f"GET /files/{IMAGE}?host=gpu-a HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert slow.recv(4096).startswith(b"HTTP/1.1 200")  # admitted; now it reads no more
        assert gate(srv).active == 1
        # gpu-b waits in the server: it is answered when a stream is handed to it, which only
        # the cut of gpu-a's stream can do within the hold (without a floor: 120 s of stall)
        r = client(HOST_B).get(image_url(srv, "gpu-b"), timeout=60)
        assert r.status_code == 200 and len(r.content) == BIG
        slow.close()
        assert a.image_sent_at is None and b.image_sent_at is not None
    finally:
        srv.stop()


def test_a_host_reading_below_the_floor_is_cut(tmp_path):
    srv = make_server(tmp_path, hold_s=30, min_stream_bps=4 << 20, rate_window_s=0.5)
    stop = threading.Event()
    got: list[int] = []

    def trickle(sock: socket.socket) -> None:
        # reads 16 KiB every 0.05 s (about 320 KiB/s): steady, but far below 4 MiB/s; once
        # told to stop, reads what is left at once (to the end the server's cut made)
        total = 0
        try:
            while chunk := sock.recv(16 << 10 if not stop.is_set() else 1 << 20):
                total += len(chunk)
                if not stop.is_set():
                    stop.wait(0.05)
        except OSError:
            pass
        got.append(total)

    try:
        srv.register(session("gpu-a", HOST_A, 1))
        srv.register(session("gpu-b", HOST_B, 2))
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=30,
                                        source_address=(HOST_A, 0))
        slow.sendall(f"GET /files/{IMAGE}?host=gpu-a HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        reader = threading.Thread(target=trickle, args=(slow,), daemon=True)
        reader.start()
        r = client(HOST_B).get(image_url(srv, "gpu-b"), timeout=60)
        assert r.status_code == 200 and len(r.content) == BIG
        stop.set()
        reader.join(30)  # the cut stream ends: the reader sees its end
        assert got and got[0] < BIG
        slow.close()
    finally:
        stop.set()
        srv.stop()
