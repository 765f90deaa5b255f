"""The guarded HTTP listener (provisioner/serving.py) against clients that try to exhaust it:
real TCP clients on loopback against a real GuardedServer; the app is a small WSGI stand-in
(the deploy server's own attacks are tests/integration/deploy/test_deploy_http_attacks.py)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import requests

from provisioner.serving import GuardedHandler, GuardedServer, client_gone

BIG = 64 * 1024 * 1024  # more than any socket buffers between the two ends


def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    if path == "/big":
        start_response("200 OK", [("Content-Length", str(BIG))])
        return (b"x" * (1024 * 1024) for _ in range(BIG // (1024 * 1024)))
    if path == "/boom":
        raise ValueError("the token s3cr3t-t0ken in a message")
    if path == "/hold":  # an answer that takes a while: a long poll
        time.sleep(float(environ.get("QUERY_STRING") or 1))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]


class FastHandler(GuardedHandler):
    header_timeout_s = 1.0
    stall_timeout_s = 1.0


def serve(max_connections: int = 64) -> GuardedServer:
    server = GuardedServer("127.0.0.1", 0, app, FastHandler, max_connections=max_connections)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def server() -> Iterator[GuardedServer]:
    srv = serve(max_connections=4)
    yield srv
    srv.shutdown()
    srv.server_close()


def connect(srv: GuardedServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", srv.port), timeout=10)


def closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closed ``sock`` (reading what it sent); fails past ``seconds``."""
    start = time.monotonic()
    sock.settimeout(seconds)
    while True:
        try:
            if not sock.recv(65536):
                return time.monotonic() - start
        except ConnectionResetError:
            return time.monotonic() - start


def get(srv: GuardedServer, path: str = "/") -> requests.Response:
    return requests.get(f"http://127.0.0.1:{srv.port}{path}", timeout=10)


def test_a_trickled_request_head_is_cut_at_the_header_deadline(server: GuardedServer) -> None:
    sock = connect(server)
    start = time.monotonic()
    with pytest.raises(OSError):  # reset or broken pipe once the server has closed
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            sock.sendall(bytes([byte]))  # each byte well inside the per-read timeout
            time.sleep(0.05)
            if time.monotonic() - start > 8:
                break
    # cut near the 1 s deadline, not at the end of the 100-byte trickle (5 s)
    assert time.monotonic() - start < 4
    assert get(server).text == "ok\n"


def test_a_silent_connection_is_closed(server: GuardedServer) -> None:
    with connect(server) as sock:
        assert closed_within(sock, 5) < 4


def test_a_reader_that_stops_reading_gives_its_slot_back() -> None:
    srv = serve(max_connections=1)
    try:
        with connect(srv) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.5)
            assert get(srv).status_code == 503  # the one slot is the stalled stream's
            time.sleep(2)  # it never reads: the server's send stalls past its 1 s timeout
            assert get(srv).text == "ok\n"  # its slot (and thread) came back meanwhile
    finally:
        srv.shutdown()
        srv.server_close()


def test_connections_beyond_the_limit_get_503_and_no_thread(
    server: GuardedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="provisioner.serving")
    silent = [connect(server) for _ in range(4)]
    time.sleep(0.3)  # all four accepted and holding their threads
    threads = threading.active_count()
    extra = [connect(server) for _ in range(20)]
    answers = []
    for sock in extra:
        sock.settimeout(5)
        answers.append(sock.recv(200))
        sock.close()
    assert all(a.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in a for a in answers)
    assert threading.active_count() <= threads
    assert server.refused == 20
    # one log line for the burst, not one per connection
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1 and "4 at once" in refusals[0].getMessage()
    for sock in silent:
        sock.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # their slots come back as their threads end
        try:
            if get(server).text == "ok\n":
                break
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    assert get(server).text == "ok\n"


def test_held_answers_still_end_while_the_limit_refuses_others(server: GuardedServer) -> None:
    results: list[str] = []
    pollers = [threading.Thread(target=lambda: results.append(get(server, "/hold?1.5").text))
               for _ in range(4)]
    for t in pollers:
        t.start()
    time.sleep(0.5)
    with connect(server) as sock:
        assert sock.recv(200).startswith(b"HTTP/1.1 503 ")
    for t in pollers:
        t.join(10)
    # a long poll is no stall: the socket moves no byte while the answer is prepared
    assert results == ["ok\n"] * 4


def test_a_port_in_use_raises_instead_of_exiting(server: GuardedServer) -> None:
    with pytest.raises(OSError):
        GuardedServer("127.0.0.1", server.port, app)


def test_client_gone_sees_a_closed_client_without_waiting() -> None:
    a, b = socket.socketpair()
    a.settimeout(30)  # a socket with a timeout must not make the check wait for it
    gone = client_gone(a)
    start = time.monotonic()
    assert gone() is False
    b.sendall(b"x")  # a pipelined byte is not a goodbye
    assert gone() is False
    b.close()
    a.recv(1)
    assert gone() is True
    assert time.monotonic() - start < 1
    a.close()


def test_an_application_error_is_one_log_line_without_its_text(
    server: GuardedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert get(server, "/boom").status_code == 500
    assert get(server).text == "ok\n"
    deadline = time.monotonic() + 5  # logged by the server's thread after the answer went out
    while "failed inside" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    text = caplog.text
    assert "s3cr3t-t0ken" not in text and "Traceback" not in text
    assert "a request failed inside the server (ValueError)" in text
