"""The shared HTTP policy against real HTTP servers on loopback: redirects, proxies, answer
caps, trickling and stalled answers, deadlines, URLs with user info.

Stand-ins: each peer is a real ``http.server`` on 127.0.0.1 written here; "elsewhere" (where
a hostile peer redirects, or a proxy the environment names) is a second one on 127.0.0.2
that records every request reaching it.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import requests

from provisioner.http_policy import deadline, jsonlimits
from provisioner.http_policy.adapter import GuardedAdapter, iter_body
from provisioner.http_policy.errors import (
    AnswerTooLarge,
    AnswerTooSlow,
    DeadlineExceeded,
    ForeignURL,
    RedirectRefused,
)
from provisioner.http_policy.policy import HttpPolicy
from provisioner.http_policy.session import GuardedSession
from provisioner.http_policy.urls import loggable_url, redirect_allowed

SECRET_FORM = "power_pass=canary-5e1f"


class Peer(http.server.ThreadingHTTPServer):
    """A peer whose answer to each path is scripted in ``routes``; records what it got."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.routes: dict[str, Any] = {}
        self.received: list[tuple[str, str, bytes]] = []
        self.release = threading.Event()  # lets a stalled answer's handler end
        super().__init__((host, 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client hanging up on an answer it refused is the point


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Peer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.received.append((self.command, self.path, body))
        route = self.server.routes.get(self.path.split("?")[0], ("json", {"ok": True}))
        kind, arg = route
        if kind == "json":
            self._send(200, json.dumps(arg).encode())
        elif kind == "redirect":
            self.send_response(arg[0])
            self.send_header("Location", arg[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "big":
            self._send(200, b"x" * arg)
        elif kind == "big-unannounced":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(arg // 65536):
                self.wfile.write(b"x" * 65536)
            self.close_connection = True
        elif kind == "drip":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(100_000):
                if self.server.release.wait(arg):
                    return
                self.wfile.write(b"x")
                self.wfile.flush()
        elif kind == "half":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"Pad": "' + b"x" * 391)
            self.wfile.flush()
            self.server.release.wait(30)

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _answer


@contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[Peer]:
    server = Peer(host)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def peer() -> Iterator[Peer]:
    with serving() as server:
        yield server


@pytest.fixture
def elsewhere() -> Iterator[Peer]:
    with serving("127.0.0.2") as server:
        yield server


@pytest.fixture
def no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


# -- redirects -----------------------------------------------------------------------------

def test_a_post_redirected_to_another_host_is_not_followed(peer, elsewhere):
    peer.routes["/machines/"] = ("redirect", (307, elsewhere.url + "/machines/"))
    with GuardedSession(peer.url) as session, pytest.raises(RedirectRefused) as info:
        session.post(peer.url + "/machines/", data=SECRET_FORM,
                     headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=5)
    assert elsewhere.received == []  # the form, and the password in it, went nowhere
    assert info.value.status == 307 and info.value.target == elsewhere.url + "/machines/"
    assert info.value.reason == "unsafe redirect"
    assert [m for m, _p, _b in peer.received] == ["POST"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_within_the_origin_is_followed(peer, status):
    peer.routes["/old"] = ("redirect", (status, "/new"))
    peer.routes["/new"] = ("json", {"here": True})
    with GuardedSession(peer.url) as session:
        resp = session.get(peer.url + "/old", timeout=5)
    assert resp.json() == {"here": True}


def test_a_redirect_to_another_port_of_the_same_host_is_refused(peer):
    with serving() as other:
        peer.routes["/x"] = ("redirect", (302, other.url + "/x"))
        with GuardedSession(peer.url) as session, pytest.raises(RedirectRefused):
            session.get(peer.url + "/x", timeout=5)
        assert other.received == []


def test_endless_redirects_end(peer):
    peer.routes["/a"] = ("redirect", (302, "/b"))
    peer.routes["/b"] = ("redirect", (302, "/a"))
    policy = HttpPolicy(max_redirects=3)
    with GuardedSession(peer.url, policy) as session, \
            pytest.raises(RedirectRefused, match="more than 3 times"):
        session.get(peer.url + "/a", timeout=5)
    assert len(peer.received) == 4


def test_a_redirect_is_returned_unfollowed_when_the_caller_says_so(peer, elsewhere):
    peer.routes["/x"] = ("redirect", (307, elsewhere.url + "/x"))
    with GuardedSession(peer.url) as session:
        resp = session.get(peer.url + "/x", timeout=5, allow_redirects=False)
    assert resp.status_code == 307 and elsewhere.received == []


@pytest.mark.parametrize("base, target, upgrade, allowed", [
    ("https://10.0.0.5", "https://10.0.0.5/x", False, True),
    ("https://10.0.0.5:443", "https://10.0.0.5/x", False, True),
    ("http://10.0.0.5", "https://10.0.0.5/x", False, False),  # a scheme change
    ("http://10.0.0.5", "https://10.0.0.5/x", True, True),  # the usual http -> https hop
    ("http://10.0.0.5:8000", "https://10.0.0.5/x", True, True),
    ("http://10.0.0.5", "https://10.0.0.5:9443/x", True, False),
    ("https://10.0.0.5", "http://10.0.0.5/x", True, False),  # never a downgrade
    ("https://10.0.0.5:443", "https://10.0.0.5:8443/x", True, False),
    ("https://maas.example", "https://MAAS.example/x", False, True),
    ("https://maas.example", "https://maas.example.evil.example/x", False, False),
    ("https://10.0.0.5", "https://user@10.0.0.5/x", False, False),
    ("https://10.0.0.5", "https://10.0.0.5:99999/x", True, False),
    ("https://10.0.0.5", "https:///x", True, False),
])
def test_where_a_redirect_may_go(base, target, upgrade, allowed):
    assert redirect_allowed(base, target, upgrade_to_https=upgrade) is allowed


# -- the adapter on a session the project does not make ------------------------------------

def test_an_adapter_on_a_plain_session_sends_nothing_off_its_origin(peer, elsewhere):
    session = requests.Session()
    session.mount("http://", GuardedAdapter(peer.url))
    peer.routes["/x"] = ("redirect", (307, elsewhere.url + "/x"))
    with pytest.raises(ForeignURL):
        session.post(peer.url + "/x", data=SECRET_FORM, timeout=5)
    with pytest.raises(ForeignURL):
        session.get(elsewhere.url + "/y", timeout=5)
    assert elsewhere.received == []


def test_a_url_with_user_info_is_never_sent(peer):
    # "@host" appended to a base URL turns the base's host into user info
    with GuardedSession(peer.url) as session, pytest.raises(ForeignURL):
        session.get(f"http://127.0.0.1:1@{peer.server_address[0]}:"
                    f"{peer.server_address[1]}/x", timeout=5)
    assert peer.received == []


# -- proxies ---------------------------------------------------------------------------------

def test_the_environment_proxy_is_never_used(peer, elsewhere, monkeypatch, no_env_proxy):
    monkeypatch.setenv("HTTP_PROXY", elsewhere.url)
    monkeypatch.setenv("http_proxy", elsewhere.url)
    with GuardedSession(peer.url) as session:
        assert session.get(peer.url + "/x", timeout=5).json() == {"ok": True}
    plain = requests.Session()  # trust_env: the adapter still drops the environment's proxy
    plain.mount("http://", GuardedAdapter(peer.url))
    assert plain.get(peer.url + "/y", timeout=5).json() == {"ok": True}
    assert elsewhere.received == [] and len(peer.received) == 2


def test_a_proxy_the_site_names_is_used(peer, elsewhere, no_env_proxy):
    with GuardedSession(peer.url, HttpPolicy(proxy=elsewhere.url)) as session:
        session.get(peer.url + "/x", timeout=5)
    # a proxy is sent the absolute URL of the origin
    assert [(m, p) for m, p, _b in elsewhere.received] == [("GET", peer.url + "/x")]
    assert peer.received == []


# -- answers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["big", "big-unannounced"])
def test_an_answer_over_the_cap_is_not_read(peer, kind):
    peer.routes["/x"] = (kind, 4 * 1024 * 1024)
    with GuardedSession(peer.url, HttpPolicy(max_bytes=1024 * 1024)) as session, \
            pytest.raises(AnswerTooLarge, match="more than the 1 MiB allowed") as info:
        session.get(peer.url + "/x", timeout=5)
    assert info.value.reason == "limit exceeded" and info.value.status == 200


def test_a_streamed_answer_is_capped_where_the_caller_reads_it(peer):
    peer.routes["/image"] = ("big-unannounced", 2 * 1024 * 1024)
    with GuardedSession(peer.url) as session:
        resp = session.get(peer.url + "/image", timeout=5, stream=True)
        got = 0
        with pytest.raises(AnswerTooLarge):
            for chunk in iter_body(resp, session.policy, max_bytes=1024 * 1024):
                got += len(chunk)
        resp.close()
    assert got <= 1024 * 1024


def test_a_trickling_answer_ends_at_its_wall_time(peer):
    # every byte comes well within the read timeout: only the answer's wall time stops it
    peer.routes["/x"] = ("drip", 0.05)
    with GuardedSession(peer.url, HttpPolicy(answer_wall_s=0.5)) as session, \
            pytest.raises(AnswerTooSlow, match=r"still arriving after 0\.5s") as info:
        session.get(peer.url + "/x", timeout=5)
    assert info.value.reason == "timeout" and info.value.received > 0


def test_a_trickling_answer_cannot_extend_the_deadline(peer):
    peer.routes["/x"] = ("drip", 0.05)
    with GuardedSession(peer.url) as session, deadline.deadline(0.5), \
            pytest.raises(DeadlineExceeded, match=r"0\.5s allowed") as info:
        session.get(peer.url + "/x", timeout=5)
    assert info.value.reason == "deadline exceeded"


def test_half_an_answer_then_silence_is_a_timeout(peer):
    peer.routes["/x"] = ("half", None)
    with GuardedSession(peer.url) as session, pytest.raises(AnswerTooSlow) as info:
        session.get(peer.url + "/x", timeout=0.5)
    assert info.value.received == 400 and "stopped after 400 bytes" in str(info.value)
    assert info.value.reason == "timeout"


def test_a_request_after_the_deadline_is_not_sent(peer):
    with GuardedSession(peer.url) as session, deadline.deadline(0.0), \
            pytest.raises(DeadlineExceeded):
        session.get(peer.url + "/x", timeout=5)
    assert peer.received == []


def test_an_inner_deadline_never_extends_the_outer_one():
    with deadline.deadline(0.0), deadline.deadline(60):
        assert deadline.allowed_s() == 0.0
        with pytest.raises(DeadlineExceeded):
            deadline.check("http://x/")
    with deadline.deadline(60), deadline.deadline(5):
        assert deadline.allowed_s() == 5  # a shorter inner one holds inside
    assert deadline.remaining_s() is None


def test_urls_in_messages_carry_no_user_info():
    assert loggable_url("https://root:pw@10.0.0.5:443/redfish/v1/?$expand=.") == \
        "https://10.0.0.5:443/redfish/v1/?$expand=."
    assert "pw" not in loggable_url("https://root:pw@10.0.0.5:99999/x")


@pytest.mark.parametrize("raw, error, message", [
    (b"[" * 200_000 + b"]" * 200_000, jsonlimits.JSONLimit, "nested deeper"),
    (b'{"a": 1e999}', jsonlimits.JSONLimit, "out of range"),
    (b'{"a": NaN}', jsonlimits.JSONLimit, "not a JSON number"),
    (b'{"a": -' + b"9" * 41 + b"}", jsonlimits.JSONLimit, "41 digits"),
    (b"<html>", jsonlimits.NotJSON, None),
    (b'{"a": ', jsonlimits.NotJSON, None),
])
def test_json_no_peer_sends_is_refused(raw, error, message):
    with pytest.raises(error, match=message):
        jsonlimits.loads(raw)
    assert jsonlimits.loads(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
