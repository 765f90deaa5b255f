"""The UFM REST client against a stand-in UFM: a real HTTP server on loopback, written by the
project from UFM's published REST API and serving UFM-shaped JSON (no UFM can run here)."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from cabling.discovery.ufm import Password, UfmClient
from cabling.errors import DiscoveryUnavailable
from provisioner.cli.main import app

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cabling"
PASSWORD = "s3cret-ufm-pw"
TOKEN = "tok-123"


class FakeUfm:
    """Serves /ufmRest/resources/* with basic auth and /ufmRestV3/resources/* with a token."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.data = {n: (FIXTURES / "ufm" / f"{n}.json").read_text() for n in ("systems", "ports", "links")}

    def __call__(self, environ, start_response):
        req = Request(environ)
        auth = req.headers.get("Authorization", "")
        prefix, _, resource = req.path.rpartition("/resources/")
        if prefix == "/ufmRest":
            ok = auth == "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
        else:
            ok = prefix == "/ufmRestV3" and auth == f"Basic {TOKEN}"
        if not ok:
            resp = Response("unauthorized", status=401)
        elif self.mode == "error":
            resp = Response("boom", status=500)
        elif self.mode == "html":
            resp = Response("<html>login</html>", content_type="text/html")
        elif self.mode == "object":
            resp = Response(json.dumps({"error": "x"}), content_type="application/json")
        elif self.mode == "endless":
            # A wrong URL or a hostile server: an answer that never ends (chunked, no length).
            chunk = b"[" + b'{"name": "x"},' * 4096

            def forever():
                while True:
                    yield chunk

            resp = Response(forever(), content_type="application/json")
        elif resource in self.data:
            resp = Response(self.data[resource], content_type="application/json")
        else:
            resp = Response("not found", status=404)
        return resp(environ, start_response)


@pytest.fixture
def ufm() -> Iterator[tuple[str, FakeUfm]]:
    fake = FakeUfm()
    server = make_server("127.0.0.1", 0, fake, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", fake
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_fetch_fabric_with_password(ufm, monkeypatch):
    url, _ = ufm
    monkeypatch.setenv("UFM_PASSWORD", PASSWORD)
    monkeypatch.delenv("UFM_TOKEN", raising=False)
    client = UfmClient.from_env(url)
    fab = client.fabric()
    assert len(fab.links) == 11 and fab.source == url
    assert PASSWORD not in repr(client) and PASSWORD not in repr(Password(PASSWORD)) and "***" in str(Password("x"))


def test_fetch_with_token(ufm, monkeypatch):
    url, _ = ufm
    monkeypatch.setenv("UFM_TOKEN", TOKEN)
    assert len(UfmClient.from_env(url).get("links")) == 11


def test_cli_validate_against_live_ufm(ufm, monkeypatch):
    url, _ = ufm
    monkeypatch.setenv("UFM_PASSWORD", PASSWORD)
    monkeypatch.delenv("UFM_TOKEN", raising=False)
    r = CliRunner().invoke(app, ["cabling", "validate", "-m", str(FIXTURES / "small-fabric.yaml"), "--ufm", url])
    assert r.exit_code == 3, r.output
    assert "h2:mlx5_1 <-> l1:2 trained at 2x" in r.output and PASSWORD not in r.output


@pytest.mark.parametrize(("mode", "password", "message"), [
    ("ok", "wrong", "refused the credentials (HTTP 401)"),
    ("error", PASSWORD, "request failed: HTTP 500"),
    ("html", PASSWORD, "answer is not JSON"),
    ("object", PASSWORD, "answer is not a list"),
])
def test_errors_say_what_to_check(ufm, mode, password, message):
    url, fake = ufm
    fake.mode = mode
    client = UfmClient(url, "admin", Password(password))
    with pytest.raises(DiscoveryUnavailable, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
        client.fabric()
    assert password not in str(exc.value)


def test_unreachable_ufm():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = CliRunner().invoke(app, ["cabling", "import", "--ufm", f"http://127.0.0.1:{port}", "--json"])
    assert r.exit_code == 2 and "cannot reach UFM" in r.output


def test_an_endless_answer_is_cut_at_the_ufm_cap(ufm, monkeypatch):
    import cabling.discovery.ufm as ufm_module
    from cabling.limits import Cap

    url, fake = ufm
    fake.mode = "endless"
    monkeypatch.setattr(ufm_module, "UFM", Cap("a UFM resource", 2 << 20, "lowered for this test"))
    client = UfmClient(url, password=Password(PASSWORD))
    with pytest.raises(DiscoveryUnavailable, match="larger than 2 MiB, the cap for a UFM resource"):
        client.get("systems")
