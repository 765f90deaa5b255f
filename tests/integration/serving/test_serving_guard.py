"""The guarded HTTP listener (provisioner/serving.py) against clients that try to exhaust it:
real TCP clients on loopback against a real GuardedServer; the app is a small WSGI stand-in
(the deploy server's own attacks are tests/integration/deploy/test_deploy_http_attacks.py)."""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import requests

from provisioner.serving import GuardedHandler, GuardedServer, client_gone
from tests.support.waiting import HANG_S, wait_until

BIG = 64 * 1024 * 1024  # more than any socket buffers between the two ends


class Holds:
    """The long polls inside the app: how many entered, and the test's word to answer them."""

    def __init__(self) -> None:
        self.entered = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def hold(self, seconds: float) -> None:
        with self.lock:
            self.entered += 1
        time.sleep(seconds)  # the answer takes this long at least: past the stall timeout
        self.release.wait(HANG_S)


HOLDS = Holds()


def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    if path == "/big":
        start_response("200 OK", [("Content-Length", str(BIG))])
        return (b"x" * (1024 * 1024) for _ in range(BIG // (1024 * 1024)))
    if path == "/boom":
        raise ValueError("the token s3cr3t-t0ken in a message")
    if path == "/hold":  # an answer that takes a while: a long poll
        HOLDS.hold(float(environ.get("QUERY_STRING") or 1))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]


class FastHandler(GuardedHandler):
    header_timeout_s = 1.0
    stall_timeout_s = 1.0


class StallHandler(FastHandler):
    # long enough that the test sees the stalled stream hold its slot, however loaded the
    # machine, before the server drops it
    stall_timeout_s = 5.0


def serve(max_connections: int = 64,
          handler: type[GuardedHandler] = FastHandler) -> GuardedServer:
    server = GuardedServer("127.0.0.1", 0, app, handler, max_connections=max_connections)
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


def wait_closed(sock: socket.socket) -> None:
    """Returns when the server closed ``sock`` (reading what it sent); a socket timeout (an
    error) if it never does."""
    sock.settimeout(HANG_S)
    while True:
        try:
            if not sock.recv(65536):
                return
        except ConnectionResetError:
            return


def get(srv: GuardedServer, path: str = "/") -> requests.Response:
    return requests.get(f"http://127.0.0.1:{srv.port}{path}", timeout=10)


def test_a_trickled_request_head_is_cut_at_the_header_deadline(server: GuardedServer) -> None:
    """A byte every 50 ms never trips a per-read timeout: only a deadline for the whole head
    ends it. The head's one header line is kept under every header-size limit, so nothing but
    that deadline closes the connection; a server without it trickles on until HANG_S."""
    sock = connect(server)
    deadline = time.monotonic() + HANG_S
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    with pytest.raises(OSError):  # reset or broken pipe once the server has closed
        while time.monotonic() < deadline:
            sock.sendall(b"a")
            time.sleep(0.05)  # the trickle's pace (the attack), not a wait for anything
    sock.close()
    assert get(server).text == "ok\n"


def test_a_silent_connection_is_closed(server: GuardedServer) -> None:
    with connect(server) as sock:
        wait_closed(sock)


def test_a_reader_that_stops_reading_gives_its_slot_back() -> None:
    srv = serve(max_connections=1, handler=StallHandler)
    try:
        with connect(srv) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            # accepted in connection order: the stream took the one slot before this GET came
            assert get(srv).status_code == 503
            # it never reads: the server's send stalls past its stall timeout, and without
            # that timeout the slot would never come back
            wait_until(lambda: get(srv).status_code == 200, "the stalled stream's slot")
    finally:
        srv.shutdown()
        srv.server_close()


def test_connections_beyond_the_limit_get_503_and_no_thread(
    server: GuardedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="provisioner.serving")
    threads = threading.active_count() + 4
    silent = [connect(server) for _ in range(4)]
    wait_until(lambda: threading.active_count() >= threads, "four handler threads")
    extra = [connect(server) for _ in range(20)]
    answers = []
    for sock in extra:
        sock.settimeout(5)
        answers.append(sock.recv(200))
        sock.close()
    assert all(a.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in a for a in answers)
    assert threading.active_count() <= threads
    # counted by the accepting thread after the 503 went out
    wait_until(lambda: server.refused >= 20, "the refusals to be counted")
    assert server.refused == 20
    # one log line for the burst, not one per connection
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1 and "4 at once" in refusals[0].getMessage()
    for sock in silent:
        sock.close()
    # their slots come back as their threads end
    wait_until(lambda: get(server).status_code == 200, "a slot to come back")
    assert get(server).text == "ok\n"


def test_held_answers_still_end_while_the_limit_refuses_others(server: GuardedServer,
                                                                monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "HOLDS", Holds())
    results: list[str] = []
    # each answer takes 1.5 s at least, past the 1 s stall timeout, and ends when told
    pollers = [threading.Thread(target=lambda: results.append(get(server, "/hold?1.5").text))
               for _ in range(4)]
    for t in pollers:
        t.start()
    wait_until(lambda: HOLDS.entered == 4, "four long polls inside the app")
    with connect(server) as sock:
        assert sock.recv(200).startswith(b"HTTP/1.1 503 ")
    HOLDS.release.set()
    for t in pollers:
        t.join(HANG_S)
    # a long poll is no stall: the socket moves no byte while the answer is prepared
    assert results == ["ok\n"] * 4


def test_a_port_in_use_raises_instead_of_exiting(server: GuardedServer) -> None:
    with pytest.raises(OSError):
        GuardedServer("127.0.0.1", server.port, app)


def test_client_gone_sees_a_closed_client_without_waiting() -> None:
    a, b = socket.socketpair()
    a.settimeout(30)  # a socket with a timeout must not make the check wait for it
    gone = client_gone(a)
    # a check that waited on the socket would sit out its 30 s timeout and then, timed out,
    # answer "gone" here
    assert gone() is False
    b.sendall(b"x")  # a pipelined byte is not a goodbye
    assert gone() is False
    b.close()
    a.recv(1)
    assert gone() is True
    a.close()


def test_an_application_error_is_one_log_line_without_its_text(
    server: GuardedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert get(server, "/boom").status_code == 500
    assert get(server).text == "ok\n"
    # logged by the server's thread after the answer went out
    wait_until(lambda: "failed inside" in caplog.text, "the error's log line")
    text = caplog.text
    assert "s3cr3t-t0ken" not in text and "Traceback" not in text
    assert "a request failed inside the server (ValueError)" in text
