"""The MAAS API client against the MAAS contract server: signing, errors, retries.

The contract server (maas_contract_server.py) reproduces MAAS 3.x API 2.0 from its published
documentation; it is not MAAS.
"""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from maas_contract_server import NEW, READY, MAASContractServer, Raw
from werkzeug.wrappers import Response

from provisioner.deploy.maas.apikey import parse_api_key
from provisioner.deploy.maas.client import MAASClient, api_root
from provisioner.deploy.maas.errors import (
    MAASAuthError,
    MAASConflict,
    MAASError,
    MAASNotFound,
    MAASUnavailable,
    MAASValidationError,
)
from provisioner.secrets import Secret


@pytest.fixture
def client(maas_server: MAASContractServer) -> MAASClient:
    return MAASClient(maas_server.url, parse_api_key(Secret(maas_server.api_key)), retries=2)


def test_api_root_accepts_both_url_forms():
    assert api_root("http://m:5240/MAAS") == "http://m:5240/MAAS/api/2.0/"
    assert api_root("http://m:5240/MAAS/api/2.0/") == "http://m:5240/MAAS/api/2.0/"


def test_version_and_whoami_with_a_signed_request(client: MAASClient, maas_server):
    assert client.version()["version"].startswith("3.")
    assert client.whoami() == "admin"
    assert maas_server.auth_failures == 0


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("other:kTQyWpZmCw4dGe3Wqc:8sDf7GhJ2kL9mN4bV6cX1zQ3wE5rT7yU", "Invalid consumer"),
        ("Wq9nM4xK2pL8vR3tYb:other:8sDf7GhJ2kL9mN4bV6cX1zQ3wE5rT7yU", "Invalid access token"),
        ("Wq9nM4xK2pL8vR3tYb:kTQyWpZmCw4dGe3Wqc:wrong", "Invalid signature"),
    ],
)
def test_wrong_key_parts_get_401(maas_server: MAASContractServer, key: str, problem: str):
    bad = MAASClient(maas_server.url, parse_api_key(key))
    with pytest.raises(MAASAuthError, match=problem) as exc:
        bad.machines()
    assert exc.value.status == 401
    assert "wrong" not in str(exc.value)  # the secret part is never echoed


def test_unsigned_request_is_refused(maas_server: MAASContractServer):
    import requests

    resp = requests.get(maas_server.url + "/api/2.0/machines/", timeout=5)
    assert resp.status_code == 401
    assert resp.text.startswith("Authorization Error")


def test_not_found_carries_system_id_and_maas_message(client: MAASClient):
    with pytest.raises(MAASNotFound) as exc:
        client.machine("nope42")
    assert exc.value.system_id == "nope42"
    assert exc.value.maas_message == "No Machine matches the given query."
    assert "for machine nope42: HTTP 404: No Machine matches the given query." in str(exc.value)


def test_state_conflict_is_409_with_maas_text(client: MAASClient, maas_server):
    sid = maas_server.add_machine("h1", ["aa:bb:cc:dd:ee:01"], status=NEW)
    with pytest.raises(MAASConflict) as exc:
        client.deploy(sid, distro_series="jammy")
    assert exc.value.system_id == sid
    assert exc.value.maas_message == "Can't deploy a machine that is in the 'New' state"
    with pytest.raises(MAASConflict, match=r"cannot be released in its current state \('New'\)"):
        client.release(sid)


def test_validation_errors_name_the_fields(client: MAASClient, maas_server):
    maas_server.add_machine("h1", ["aa:bb:cc:dd:ee:01"], status=READY)
    with pytest.raises(MAASValidationError) as exc:
        client.create_machine(
            hostname="h2", mac_addresses=["AA:BB:CC:DD:EE:01"], architecture="amd64/generic",
            power_type="redfish", power_parameters={"power_address": "10.0.0.1",
                                                    "power_pass": Secret("s3cr3t-pw")},
        )
    assert exc.value.status == 400
    assert "mac_addresses: One or more MAC addresses is invalid" in str(exc.value)
    assert "already in use on h1" in str(exc.value)
    sid = maas_server.by_hostname("h1").record["system_id"]
    with pytest.raises(MAASValidationError, match="root_device: '99' is not a valid root_device"):
        client.set_storage_layout(sid, layout="flat", root_device=99)


def test_power_parameters_come_back_as_secret(client: MAASClient, maas_server):
    sid = maas_server.add_machine("h1", ["aa:bb:cc:dd:ee:01"],
                                  power={"power_address": "1.2.3.4", "power_pass": "pw-123"})
    params = client.power_parameters(sid)
    assert isinstance(params["power_pass"], Secret) and params["power_pass"].reveal() == "pw-123"
    assert "pw-123" not in repr(params)


def test_unreachable_region_is_not_ready():
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    key = parse_api_key("a:b:c")
    c = MAASClient(f"http://127.0.0.1:{port}/MAAS", key, retries=2, timeout_s=1)
    with pytest.raises(MAASUnavailable, match="cannot reach MAAS") as exc:
        c.version()
    assert exc.value.exit_code == 5


def test_reads_are_retried_on_503(client: MAASClient, maas_server: MAASContractServer):
    calls = {"n": 0}
    original = maas_server._h_version

    def flaky(request):
        calls["n"] += 1
        if calls["n"] == 1:
            from maas_contract_server import HTTPError

            raise HTTPError(503, "Unable to connect to any rack controller")
        return original(request)

    maas_server._h_version = flaky  # type: ignore[method-assign]
    assert client.version()["version"]
    assert calls["n"] == 2


def test_actions_are_not_retried_and_5xx_is_typed(client: MAASClient, maas_server):
    from maas_contract_server import HTTPError

    calls = {"n": 0}

    def down(request, **kwargs):
        calls["n"] += 1
        raise HTTPError(503, "Unable to connect to any rack controller")

    maas_server._h_machine = down  # type: ignore[method-assign]
    with pytest.raises(MAASUnavailable, match="HTTP 503: Unable to connect"):
        client.commission("abc123")
    assert calls["n"] == 1


def test_client_is_usable_from_threads(client: MAASClient, maas_server):
    for i in range(6):
        maas_server.add_machine(f"h{i}", [f"aa:bb:cc:dd:ee:0{i}"])
    errors: list[Exception] = []

    def worker(i: int) -> None:
        try:
            (m,) = client.machines(mac_addresses=[f"aa:bb:cc:dd:ee:0{i}"])
            assert m.hostname == f"h{i}"
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_body_of_another_shape_is_a_typed_error(client: MAASClient, maas_server):
    from provisioner.deploy.maas.errors import MAASError

    maas_server._h_machines = lambda request: [{"hostname": "not-a-machine"}]  # type: ignore
    with pytest.raises(MAASError, match=r"unexpected Machine \(system_id: Field required\)"):
        client.machines()


def test_secrets_echoed_by_maas_are_masked_in_errors(client: MAASClient, maas_server):
    from maas_contract_server import HTTPError

    def echo(request, **kwargs):
        raise HTTPError(400, {"power_parameters": [f"bad: {dict(request.form)}"]})

    maas_server._h_machine = echo  # type: ignore[method-assign]
    with pytest.raises(MAASValidationError) as exc:
        client.update_machine("abc123", {"power_parameters_power_pass": Secret("hunter2-bmc")})
    assert "hunter2-bmc" not in str(exc.value) and "***" in str(exc.value)
    assert exc.value.system_id == "abc123"


def test_skewed_clock_gets_a_clock_hint(client: MAASClient, maas_server, monkeypatch):
    import time

    import oauthlib.oauth1.rfc5849 as rfc5849

    monkeypatch.setattr(rfc5849, "generate_timestamp", lambda: str(int(time.time()) - 900))
    with pytest.raises(MAASAuthError, match="Expired timestamp") as exc:
        client.version()
    assert "clock" in (exc.value.hint or "")


# -- the HTTP policy (#32 item 1) ----------------------------------------------------------------
# Stand-ins: "elsewhere" (where a hostile region redirects, or a proxy) is a real http.server on
# 127.0.0.2 written here that records every request reaching it; as a proxy it forwards.


class Elsewhere(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, forward: bool = False) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        self.forward = forward
        super().__init__(("127.0.0.2", 0), _ElsewhereHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.2:{self.server_address[1]}"


class _ElsewhereHandler(http.server.BaseHTTPRequestHandler):
    server: Elsewhere

    def log_message(self, *args: object) -> None:
        pass

    def _any(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append((self.command, self.path, body))
        status, payload = 200, b"{}"
        if self.server.forward:  # a proxy: the request line holds the absolute URL
            req = urllib.request.Request(self.path, data=body or None, method=self.command,
                                         headers=dict(self.headers))
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req) as r:
                status, payload = r.status, r.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = _any


@pytest.fixture
def elsewhere() -> Iterator[Elsewhere]:
    srv = Elsewhere()
    yield srv
    srv.shutdown()
    srv.server_close()


CANARY = "canary-bmc-pw-7f3e"


def _enlist(client: MAASClient) -> None:
    client.create_machine(hostname="h1", mac_addresses=["aa:bb:cc:dd:ee:01"],
                          architecture="amd64/generic", power_type="redfish",
                          power_parameters={"power_address": "10.0.0.1",
                                            "power_user": "root", "power_pass": Secret(CANARY)})


@pytest.mark.parametrize("status", [307, 308, 302])
def test_a_redirect_to_another_host_takes_no_form_and_no_signature_there(
        client: MAASClient, maas_server, elsewhere: Elsewhere, status: int):
    def moved(request):
        raise Raw(Response(status=status,
                           headers={"Location": f"{elsewhere.url}/MAAS/api/2.0/machines/"}))

    maas_server._h_machines = moved  # type: ignore[method-assign]
    with pytest.raises(MAASError, match="another host than the region's") as exc:
        _enlist(client)
    assert elsewhere.received == []  # not the BMC password, not the OAuth header, nothing
    assert CANARY not in str(exc.value) and exc.value.exit_code != 0
    assert "127.0.0.2" in str(exc.value) and "settings.maas.url" in (exc.value.hint or "")


def test_the_environments_proxy_is_never_used(maas_server, elsewhere: Elsewhere, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, elsewhere.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    c = MAASClient(maas_server.url, parse_api_key(Secret(maas_server.api_key)))
    assert c.whoami() == "admin"
    assert elsewhere.received == []  # the signature went to MAAS alone


def test_the_sites_proxy_is_the_one_used(maas_server):
    proxy = Elsewhere(forward=True)
    try:
        c = MAASClient(maas_server.url, parse_api_key(Secret(maas_server.api_key)),
                       proxy=proxy.url)
        assert c.whoami() == "admin"
        assert [(m, p.split("?")[0]) for m, p, _ in proxy.received] == [
            ("GET", f"{maas_server.url}/api/2.0/users/")]
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_an_oversized_answer_is_refused_unread(client: MAASClient, maas_server, monkeypatch):
    from provisioner.deploy.maas import client as maas_client

    monkeypatch.setattr(maas_client, "MAX_ANSWER_BYTES", 1 << 20)
    c = MAASClient(maas_server.url, parse_api_key(Secret(maas_server.api_key)))
    maas_server._h_machines = lambda request: [{"hostname": "x" * (2 << 20)}]  # type: ignore
    with pytest.raises(MAASError, match="answered GET machines/ with too much"):
        c.machines()


def test_a_trickling_answer_is_a_timeout_within_the_wall(maas_server):
    def trickle() -> Iterator[bytes]:
        for _ in range(10_000):
            yield b" "
            stop.wait(0.05)

    stop = threading.Event()
    maas_server._h_version = lambda request: (_ for _ in ()).throw(  # type: ignore
        Raw(Response(trickle(), 200, mimetype="application/json")))
    c = MAASClient(maas_server.url, parse_api_key(Secret(maas_server.api_key)), timeout_s=0.5,
                   retries=1)
    try:
        with pytest.raises(MAASUnavailable, match="did not answer GET version/ in time"):
            c.version()  # 2 s of wall (4 x the timeout), though a byte comes every 50 ms
    finally:
        stop.set()
