"""The Ironic client against a real loopback HTTP server: Ironic's JSON-in-JSON faults, the
node lock retried, a redirect off the API's origin refused before anything is sent, oversized
answers refused, the microversion pinned on every request, and secrets never in a message."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.errors import (
    IronicAuthError,
    IronicBadRequest,
    IronicConflict,
    IronicProtocolError,
)
from provisioner.secrets import Secret

Handler = Callable[[http.server.BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]


def fault(text: str) -> bytes:
    inner = json.dumps({"faultcode": "Client", "faultstring": text, "debuginfo": None})
    return json.dumps({"error_message": inner}).encode()


@pytest.fixture
def api() -> Iterator[Callable[[Handler], str]]:
    servers: list[http.server.ThreadingHTTPServer] = []
    seen: list[dict[str, Any]] = []

    def start(handle: Handler) -> str:
        class H(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                seen.append({"method": self.command, "path": self.path, "body": body,
                             "headers": dict(self.headers)})
                status, headers, payload = handle(self)
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    start.seen = seen  # type: ignore[attr-defined]
    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def client(url: str) -> IronicClient:
    return IronicClient(url, microversion="1.81", timeout_s=5, retries=2,
                        sleep=lambda _s: None)


def test_faults_are_typed_with_ironics_own_text(api):
    answers = iter([(409, {}, fault('A node with name n1 already exists.')),
                    (400, {}, fault('The requested action "provide" can not be performed on '
                                    'node "n1" while it is in state "enroll".')),
                    (401, {}, b'{"error_message": "Unauthorized"}'),
                    (406, {}, fault("Version 1.81 was requested but the maximum is 1.46"))])
    url = api(lambda _h: next(answers))
    c = client(url)
    with pytest.raises(IronicConflict, match="HTTP 409: A node with name n1 already exists"):
        c.create_node({"name": "n1"})
    with pytest.raises(IronicBadRequest, match='while it is in state "enroll"'):
        c.set_provision_state("n1", "provide")
    with pytest.raises(IronicAuthError, match="Unauthorized"):
        c.node("n1")
    with pytest.raises(IronicBadRequest) as exc:
        c.node("n1")
    assert "lower settings.ironic.microversion" in (exc.value.hint or "")
    assert {r["headers"]["X-OpenStack-Ironic-API-Version"] for r in api.seen} == {"1.81"}


def test_a_locked_node_is_asked_again_and_the_action_is_sent_once_it_frees(api):
    answers = iter([(409, {}, fault("Node n1 is locked by host c1, please retry after the "
                                    "current operation is completed.")),
                    (202, {}, b"")])
    url = api(lambda _h: next(answers))
    client(url).set_provision_state("n1", "manage")
    assert [r["method"] for r in api.seen] == ["PUT", "PUT"]


def test_a_redirect_off_the_api_is_refused_before_anything_goes_there(api):
    other = api(lambda _h: (200, {}, b'{"uuid": "x"}'))
    url = api(lambda _h: (307, {"Location": other + "/v1/nodes"}, b""))
    c = IronicClient(url, microversion="1.81", token=Secret("tok-s3cret-value"), timeout_s=5)
    with pytest.raises(IronicProtocolError, match="not followed") as exc:
        c.create_node({"name": "n1", "driver_info": {"redfish_password": Secret("bmc-pw-1")}})
    assert [r["path"] for r in api.seen] == ["/v1/nodes"]  # one request, to the API only
    assert "tok-s3cret-value" not in str(exc.value)


def test_an_echoed_password_never_reaches_the_message(api):
    def echo(h: http.server.BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        sent = api.seen[-1]["body"].decode()
        return 400, {}, fault(f"bad driver_info: {sent}")

    url = api(echo)
    with pytest.raises(IronicBadRequest) as exc:
        client(url).create_node({"name": "n1",
                                 "driver_info": {"redfish_password": Secret("bmc-pw-echoed")}})
    assert "bmc-pw-echoed" not in str(exc.value)
    assert "redfish_password" in str(exc.value)


def test_an_oversized_answer_is_refused(api):
    big = b'{"nodes": [' + b'{"uuid": "x"},' * 3_000_000 + b'{"uuid": "y"}]}'
    url = api(lambda _h: (200, {}, big))
    with pytest.raises(IronicProtocolError, match="refused"):
        client(url).nodes()


def test_the_node_list_follows_ironics_next_links_and_counts_pages(api):
    def pages(h: http.server.BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        port = h.server.server_address[1]
        if "marker" not in h.path:
            return 200, {}, json.dumps({"nodes": [{"uuid": "a"}], "next":
                                        f"http://127.0.0.1:{port}/v1/nodes?marker=a"}).encode()
        return 200, {}, json.dumps({"nodes": [{"uuid": "b"}]}).encode()

    url = api(pages)
    nodes, count = client(url).list_nodes(("uuid",))
    assert ([n["uuid"] for n in nodes], count) == (["a", "b"], 2)
