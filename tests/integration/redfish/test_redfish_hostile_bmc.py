"""The Redfish client and `provision discover` against hostile and broken BMCs.

Stand-ins: each hostile BMC is a real HTTPS server on 127.0.0.1 written here (a BMC whose
firmware or network path misbehaves), answering just enough Redfish to reach its fault; the
"elsewhere" a BMC redirects to is a real HTTP server on another loopback address (127.0.0.2)
that records every request it receives. Healthy BMCs are sushy-emulator behind TLS proxies.
"""

from __future__ import annotations

import base64
import http.server
import json
import logging
import shutil
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.redfish.client import ClientOptions, RedfishClient
from provisioner.redfish.errors import (
    BMCDeadline,
    BMCForeignLink,
    BMCLimitExceeded,
    BMCRedirectRefused,
    BMCTimeout,
    RedfishError,
)
from provisioner.redfish.transport import host_deadline
from provisioner.secrets import Secret
from provisioner.state import NodeState, StateStore
from provisioner.testing.redfish_peers import (
    TLSFiles,
    fake_system,
    fault_proxy,
    make_tls,
    sushy_emulator,
    write_emulator_config,
)

USER = "admin"
CANARY_PASSWORD = "canary-Pa55-7f3e91"
CANARY_TOKEN = "canary-token-5b2d0c"
ELSEWHERE = "127.0.0.2"
SESSIONS = "/redfish/v1/SessionService/Sessions"
ROOT = {
    "@odata.id": "/redfish/v1/", "RedfishVersion": "1.15.0", "UUID": "hostile",
    "Systems": {"@odata.id": "/redfish/v1/Systems"},
    "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
    "Managers": {"@odata.id": "/redfish/v1/Managers"},
    "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
    "Links": {"Sessions": {"@odata.id": SESSIONS}},
}
FAST = ClientOptions(timeout_s=2.0, retries=1, backoff_s=0.05)


class Recorder(http.server.ThreadingHTTPServer):
    """The host a hostile BMC redirects to: it records whatever reaches it."""

    daemon_threads = True

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        super().__init__((ELSEWHERE, 0), _RecorderHandler)

    @property
    def url(self) -> str:
        return f"http://{ELSEWHERE}:{self.server_address[1]}"


class _RecorderHandler(http.server.BaseHTTPRequestHandler):
    server: Recorder

    def log_message(self, *args: object) -> None:
        pass

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.received.append({"method": self.command, "path": self.path,
                                     "headers": dict(self.headers), "body": body})
        data = b"{}"
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("X-Auth-Token", "stolen")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PATCH = _record


class HostileBMC(http.server.ThreadingHTTPServer):
    """An HTTPS 'BMC' that misbehaves in one way, named by ``mode``."""

    daemon_threads = True

    def __init__(self, tls: TLSFiles, mode: str, elsewhere: str = "") -> None:
        self.mode = mode
        self.elsewhere = elsewhere
        self.seen: list[tuple[str, str]] = []
        self.silence = threading.Event()  # set: a silent answer's handler may end
        super().__init__(("127.0.0.1", 0), _HostileHandler)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(tls.cert, tls.key)
        self.socket = ctx.wrap_socket(self.socket, server_side=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client hanging up on a 50 MB answer is the point


class _HostileHandler(http.server.BaseHTTPRequestHandler):
    server: HostileBMC
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
              raw: bytes | None = None) -> None:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else b"")
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _redirect(self, location: str) -> None:
        self._send(307, {}, {"Location": location})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.seen.append(("POST", self.path))
        if self.server.mode == "session-307":
            self._redirect(self.server.elsewhere + SESSIONS)
            return
        if self.server.mode == "echo-login":  # quotes what it was sent, as some firmware does
            self._send(400, {"error": {"code": "Base.1.8.GeneralError", "message":
                                       f"cannot parse {body.decode(errors='replace')}"}})
            return
        self._send(201, {"@odata.id": SESSIONS + "/1"},
                   {"X-Auth-Token": CANARY_TOKEN, "Location": SESSIONS + "/1"})

    def do_DELETE(self) -> None:
        self.server.seen.append(("DELETE", self.path))
        if self.server.mode == "echo":
            self._send(500, {"error": {"@Message.ExtendedInfo": [{
                "MessageId": "Base.1.8.InternalError", "Message": "Session with token "
                f"{self.headers.get('X-Auth-Token')} could not be deleted"}]}})
            return
        self._send(204)

    def do_GET(self) -> None:
        mode, path = self.server.mode, self.path
        self.server.seen.append(("GET", path))
        if path.startswith("/redfish/v1/?") or path == "/redfish/v1/":
            if mode == "deep":
                self._send(200, raw=b"[" * 200_000 + b"]" * 200_000)
            elif mode == "overflow":
                self._send(200, raw=json.dumps(ROOT).encode()[:-1] + b', "Big": 1e999}')
            elif mode == "huge":
                self._send(200, raw=b'{"Pad": "' + b"x" * (50 * 1024 * 1024) + b'"}')
            elif mode == "huge-stream":
                self._stream_without_length(50 * 1024 * 1024)
            elif mode == "drip":
                self._drip()
            elif mode == "half":
                self._half_then_silence()
            else:
                self._send(200, ROOT)
            return
        if mode == "echo-login":
            self._send(401, {"error": {"message": "bad credentials: Authorization: "
                                       f"{self.headers.get('Authorization')}"}})
            return
        if self.headers.get("X-Auth-Token") != CANARY_TOKEN:
            self._send(401, {"error": {"message": "no session"}})
            return
        if mode == "echo":
            self._send(500, {"error": {"code": "Base.1.8.GeneralError", "message": (
                f"token {CANARY_TOKEN} of user {USER} with password "
                f"{json.dumps(CANARY_PASSWORD)} failed"), "@Message.ExtendedInfo": [{
                    "MessageId": "Base.1.8.InternalError", "Message": "internal error",
                    "Resolution": f"log in again with {CANARY_PASSWORD}"}]}})
            return
        base = path.split("?")[0]
        if mode == "get-307" and base == "/redfish/v1/Systems":
            self._redirect(self.server.elsewhere + "/redfish/v1/Systems")
        elif mode == "relocate" and base == "/redfish/v1/Systems":
            self._send(308, {}, {"Location": self.server.url + "/redfish/v1/Systems/"})
        elif mode == "foreign-link" and base == "/redfish/v1/Systems":
            # "@host:port/..." appended to the BMC's URL makes the BMC's address user info
            target = self.server.elsewhere.removeprefix("http://")
            self._send(200, {"Members": [{"@odata.id": f"@{target}/redfish/v1/Systems/1"}]})
        elif base in ("/redfish/v1/Systems", "/redfish/v1/Systems/"):
            count = 20_000 if mode == "members" else 0
            members = [{"@odata.id": f"/redfish/v1/Systems/s{i}"} for i in range(count)]
            self._send(200, {"@odata.id": "/redfish/v1/Systems", "Members": members,
                             "Members@odata.count": count})
        else:
            self._send(404, {})

    def _stream_without_length(self, size: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b'{"Pad": "')
        block = b"x" * (1024 * 1024)
        for _ in range(size // len(block)):
            self.wfile.write(block)
        self.close_connection = True

    def _drip(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b'{"Pad": "')
        for _ in range(100_000):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(0.1)


    def _half_then_silence(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(json.dumps(ROOT).encode()[:200])
        self.wfile.flush()
        self.server.silence.wait(30)


@contextmanager
def serving(server: http.server.HTTPServer) -> Iterator[Any]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        if isinstance(server, HostileBMC):
            server.silence.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    with serving(Recorder()) as server:
        yield server


def client_for(bmc: HostileBMC, tls: TLSFiles, **options: Any) -> RedfishClient:
    opts = ClientOptions(**{"ca_bundle": tls.ca, "timeout_s": 2.0, "retries": 1,
                            "backoff_s": 0.05, **options})
    return RedfishClient(bmc.url, USER, Secret(CANARY_PASSWORD), opts, name="hostile")


def assert_nothing_reached(recorder: Recorder) -> None:
    assert recorder.received == []


def test_session_post_redirected_elsewhere_never_sends_the_password(tls, recorder):
    with serving(HostileBMC(tls, "session-307", recorder.url)) as bmc:
        client = client_for(bmc, tls)
        with pytest.raises(BMCRedirectRefused) as info:
            client.login()  # no fallback to basic auth either: it would send the password
        client.close()
    assert_nothing_reached(recorder)
    message = str(info.value)
    assert f"{recorder.url}{SESSIONS}" in message and "(HTTP 307)" in message
    assert info.value.reason == "unsafe redirect"
    assert CANARY_PASSWORD not in message
    assert bmc.seen == [("GET", "/redfish/v1/"), ("POST", SESSIONS)]


def test_get_redirected_elsewhere_never_sends_the_session_token(tls, recorder):
    with serving(HostileBMC(tls, "get-307", recorder.url)) as bmc:
        client = client_for(bmc, tls)
        client.login()
        assert client.auth_method == "session"
        with pytest.raises(BMCRedirectRefused) as info:
            client.get("/redfish/v1/Systems")
        client.close()
    assert_nothing_reached(recorder)
    assert CANARY_TOKEN not in str(info.value)
    assert ("DELETE", SESSIONS + "/1") in bmc.seen  # still logged out of the BMC itself


def test_redirect_to_another_host_over_https_is_refused_too(tls):
    with serving(HostileBMC(tls, "get-307", f"https://{ELSEWHERE}:1")) as bmc:
        client = client_for(bmc, tls)
        client.login()
        with pytest.raises(BMCRedirectRefused, match=f"https://{ELSEWHERE}:1/redfish"):
            client.get("/redfish/v1/Systems")
        client.close()


def test_a_member_link_leading_off_the_bmc_is_not_requested(tls, recorder):
    with serving(HostileBMC(tls, "foreign-link", recorder.url)) as bmc:
        client = client_for(bmc, tls)
        client.login()
        with pytest.raises(BMCForeignLink, match=f"{ELSEWHERE}:") as info:
            client.members("/redfish/v1/Systems")
        client.close()
    assert_nothing_reached(recorder)
    assert info.value.reason == "foreign link" and CANARY_TOKEN not in str(info.value)


def test_redirect_on_the_same_host_over_https_is_followed(tls):
    with serving(HostileBMC(tls, "relocate")) as bmc, client_for(bmc, tls) as client:
        assert client.get("/redfish/v1/Systems")["Members"] == []
    assert ("GET", "/redfish/v1/Systems/") in bmc.seen


@pytest.mark.parametrize("mode, message", [
    ("deep", "nested deeper than 64 levels"),
    ("overflow", "1e999 is out of range"),
    ("huge", "more than the 16 MiB"),
    ("huge-stream", "more than the 16 MiB"),
])
def test_answers_no_bmc_sends_are_a_limit_error(tls, mode, message):
    with serving(HostileBMC(tls, mode)) as bmc:
        client = client_for(bmc, tls)
        with pytest.raises(BMCLimitExceeded, match=message) as info:
            client.login()
        client.close()
    assert info.value.reason == "limit exceeded"
    assert len(bmc.seen) == 1  # not retried


def test_a_collection_of_20000_members_is_refused_before_reading_them(tls):
    with (serving(HostileBMC(tls, "members")) as bmc, client_for(bmc, tls) as client,
          pytest.raises(BMCLimitExceeded, match="20000 collection members")):
        client.members("/redfish/v1/Systems")
    gets = [p for m, p in bmc.seen if m == "GET"]
    assert len(gets) <= 3  # root, the collection (maybe once more without $expand)


def test_a_dripping_answer_ends_at_the_host_deadline(tls):
    # Each byte arrives well within the socket timeout; only the deadline stops it.
    with serving(HostileBMC(tls, "drip")) as bmc:
        client = client_for(bmc, tls)
        with host_deadline(1.5), pytest.raises(BMCDeadline) as info:
            client.login()
        client.close()
    assert "1.5s allowed" in str(info.value)
    assert info.value.reason == "deadline exceeded"


def test_a_dripping_answer_ends_without_a_deadline_too(tls):
    # power and boot verbs run without a host deadline: one answer still has a wall time
    # (shortened here from 300 s), however the bytes trickle in.
    with serving(HostileBMC(tls, "drip")) as bmc:
        client = client_for(bmc, tls, answer_wall_s=1.0)
        with pytest.raises(BMCTimeout, match="answer still arriving after 1s"):
            client.login()
        client.close()


def test_half_an_answer_then_silence_is_a_timeout_not_a_bad_answer(tls):
    # #32 item 12: the BMC sent 200 of the 1000 bytes it announced, then nothing.
    with serving(HostileBMC(tls, "half")) as bmc:
        client = client_for(bmc, tls, timeout_s=0.5, retries=0)
        with pytest.raises(BMCTimeout, match="stopped after 200 bytes") as info:
            client.login()
        client.close()
    assert info.value.reason == "timeout"


# -- the whole `provision discover` ---------------------------------------------------------

HOSTILE = {  # host -> (mode, expected reason)
    "h1-u03": ("session-307", "unsafe redirect"),
    "h1-u04": ("get-307", "unsafe redirect"),
    "h1-u05": ("members", "limit exceeded"),
    "h1-u06": ("deep", "limit exceeded"),
    "h1-u07": ("overflow", "limit exceeded"),
    "h1-u08": ("huge-stream", "limit exceeded"),
    "h1-u09": ("drip", "deadline exceeded"),
    "h1-u10": ("foreign-link", "foreign link"),
}
GOOD = ("h1-u01", "h1-u02")
U1 = "6f9619ff-8b86-d011-b42d-00c04fc96411"


def _site_yaml(ports: dict[str, int]) -> str:
    hosts = "\n".join(
        f"      - {{u: {int(name[-2:])}, bmc: {{address: 127.0.0.1, port: {port}}}}}"
        for name, port in sorted(ports.items()))
    return f"""site: hostile
settings:
  redfish: {{ca_bundle: bmc-ca.pem, timeout_s: 2, retries: 1, discovery_deadline_s: 6}}
networks:
  provisioning: {{cidr: 198.18.0.0/24, reserved: ["198.18.0.1-198.18.0.99"]}}
credentials:
  bmc: {{username: {USER}, password: {{env: HOSTILE_BMC_PASSWORD}}}}
profiles:
  vm:
    gpus: 0
    ib_hcas: 0
    units: 1
    provisioning_nic: {{mac_prefix: "52:54:00:18:00"}}
racks:
  - name: h1
    index: 1
    units: 42
    host_name_template: "h1-u{{u:02d}}"
    defaults: {{profile: vm, bmc: {{vendor: generic, credentials: bmc}}}}
    hosts:
{hosts}
"""


@pytest.fixture(scope="module")
def rack(tmp_path_factory: pytest.TempPathFactory, tls: TLSFiles) -> Iterator[tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("hostile-rack")
    site_dir = root / "site"
    site_dir.mkdir()
    shutil.copy(tls.ca, site_dir / "bmc-ca.pem")
    with ExitStack() as stack:
        recorder = stack.enter_context(serving(Recorder()))
        conf = write_emulator_config(
            root / "emu", [fake_system(U1, "node", ["52:54:00:18:00:01"], "Off")],
            auth=(USER, CANARY_PASSWORD))
        emu = stack.enter_context(sushy_emulator(conf))
        (root / "logs").mkdir()
        good = stack.enter_context(fault_proxy(emu, root / "logs", tls=tls,
                                               listen=("127.0.0.1",) * len(GOOD)))
        ports = {name: int(urlsplit(url).port or 0) for name, url in zip(GOOD, good,
                                                                         strict=True)}
        for name, (mode, _reason) in HOSTILE.items():
            bmc = stack.enter_context(serving(HostileBMC(tls, mode, recorder.url)))
            ports[name] = bmc.server_address[1]
        (site_dir / "site.yml").write_text(_site_yaml(ports))
        yield site_dir / "site.yml", recorder


def test_discover_fails_each_hostile_bmc_alone_and_keeps_every_secret(
        rack, tmp_path, monkeypatch):
    site, recorder = rack
    monkeypatch.setenv("HOSTILE_BMC_PASSWORD", CANARY_PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["--debug", "discover", "--site", str(site), "--json"])
    out, err = result.stdout, result.stderr
    assert result.exit_code == 3, out + err
    results = {r["host"]: r for r in json.loads(out)}
    assert set(results) == set(GOOD) | set(HOSTILE)
    for host in GOOD:
        assert results[host]["ok"], results[host]["error"]
    for host, (_mode, reason) in HOSTILE.items():
        assert results[host]["reason"] == reason, results[host]["error"]
    assert "more than the 2000 a server can have" in results["h1-u05"]["error"]
    assert f"{recorder.url}{SESSIONS}" in results["h1-u03"]["error"]

    # --debug shows each request: method, URL, status, time.
    assert "GET https://127.0.0.1:" in err and "/redfish/v1/ -> 200 in " in err
    assert "POST https://127.0.0.1:" in err and f"{SESSIONS} -> 307" in err

    store = StateStore.for_site(load_site(site))
    for host in GOOD:
        assert store.get(host).state == NodeState.DISCOVERED
    for host, (_mode, reason) in HOSTILE.items():
        record = store.get(host)
        assert record.state == NodeState.FAILED and record.reason == f"discovery: {reason}"

    # The canaries: nowhere but on the wire to the BMC itself.
    state_bytes = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    for secret in (CANARY_PASSWORD, CANARY_TOKEN):
        assert secret not in out and secret not in err
        assert secret.encode() not in state_bytes
    assert_nothing_reached(recorder)


def test_without_debug_nothing_is_logged(rack, tmp_path, monkeypatch):
    site, _recorder = rack
    monkeypatch.setenv("HOSTILE_BMC_PASSWORD", CANARY_PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["discover", "h1-u01", "--site", str(site)])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "/redfish/v1/ -> 200" not in result.stderr



@pytest.mark.parametrize("mode", ["echo", "echo-login"])
def test_a_bmc_quoting_the_secrets_it_was_sent_never_shows_them(tls, mode, caplog):
    # "echo": errors quote the session token and the password; its logout failure too.
    # "echo-login": the session POST is refused quoting its JSON body (the password), then
    # basic auth is refused quoting the Authorization header.
    caplog.set_level(logging.DEBUG)
    basic = base64.b64encode(f"{USER}:{CANARY_PASSWORD}".encode()).decode()
    with serving(HostileBMC(tls, mode)) as bmc:
        client = client_for(bmc, tls)
        with pytest.raises(RedfishError) as info:
            client.login()
            client.get("/redfish/v1/Systems")
        client.close()
    error = info.value
    shown = " ".join([str(error), repr(error), *map(str, error.extended), caplog.text])
    for secret in (CANARY_PASSWORD, CANARY_TOKEN, basic):
        assert secret not in shown
    assert "***" in str(error)


def test_redirect_to_another_port_of_the_same_address_is_refused(tls):
    # Two BMCs on one address (a port-forwarding jump host, the lab): one must not collect
    # the other's password by redirecting the session POST to itself.
    with serving(HostileBMC(tls, "plain")) as other, \
            serving(HostileBMC(tls, "session-307", other.url)) as bmc:
        client = client_for(bmc, tls)
        with pytest.raises(BMCRedirectRefused, match=f"{other.url}{SESSIONS}"):
            client.login()
        client.close()
    assert other.seen == []
