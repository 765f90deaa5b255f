"""The deploy HTTP server on loopback: per-MAC iPXE scripts, one-time config, token-checked seed
and callbacks (bad token, replay, use after the final report), Range requests, redacted logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from provisioner.deploy.embedded.http import DeployServer, redact_path
from provisioner.deploy.embedded.sessions import FAILED, FINISHED, START, HostSession


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DeployServer]:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="http://198.18.254.1:8080")
    blob = tmp_path / "image.raw"
    blob.write_bytes(bytes(range(256)) * 4096)
    srv.files["images/abc.raw"] = blob
    srv.static["pick-disk.sh"] = b"#!/bin/sh\n"
    srv.start()
    yield srv
    srv.stop()


def url(srv: DeployServer, path: str) -> str:
    return f"http://127.0.0.1:{srv.port}{path}"


def session(host: str = "lab-host01", mac: str = "52:54:00:18:00:01") -> HostSession:
    return HostSession(
        host=host,
        mac=mac,
        method="image",
        ipxe_script="#!ipxe\nkernel x\n",
        config_env="DEPLOY_TOKEN='t'\n",
        seed={"user-data": "#cloud-config\n", "meta-data": "instance-id: x\n"},
    )


def auth(s: HostSession) -> dict[str, str]:
    return {"Authorization": f"Bearer {s.token.reveal()}"}


def test_ipxe_script_by_mac_in_either_spelling(server: DeployServer) -> None:
    s = session()
    server.register(s)
    for mac in ("52-54-00-18-00-01", "52:54:00:18:00:01", "52-54-00-18-00-01".upper()):
        r = requests.get(url(server, f"/ipxe/{mac}"), timeout=5)
        assert r.status_code == 200 and r.text == s.ipxe_script
    assert requests.get(url(server, "/ipxe/52-54-00-18-00-99"), timeout=5).status_code == 404
    chain = requests.get(url(server, "/ipxe/boot.ipxe"), timeout=5).text
    assert "chain http://198.18.254.1:8080/ipxe/${netX/mac:hexhyp}" in chain


def test_installed_host_is_sent_to_its_disk(server: DeployServer) -> None:
    s = session()
    server.register(s)
    s.report(START, s.token.reveal(), "")
    s.report(FINISHED, s.token.reveal(), "ok")
    r = requests.get(url(server, "/ipxe/52-54-00-18-00-01"), timeout=5)
    assert r.text.endswith("exit\n")


def test_config_is_handed_out_once(server: DeployServer) -> None:
    s = session()
    server.register(s)
    key = {"Authorization": f"Bearer {s.boot_key.reveal()}"}
    first = requests.get(url(server, "/deploy/lab-host01/config"), headers=key, timeout=5)
    assert first.status_code == 200 and "DEPLOY_TOKEN" in first.text
    again = requests.get(url(server, "/deploy/lab-host01/config"), headers=key, timeout=5)
    assert again.status_code == 410
    assert requests.get(url(server, "/deploy/other/config"), timeout=5).status_code == 404


def test_seed_needs_the_token(server: DeployServer) -> None:
    s = session()
    server.register(s)
    path = url(server, "/deploy/lab-host01/seed/user-data")
    assert requests.get(path, timeout=5).status_code == 403
    assert requests.get(path, headers={"Authorization": "Bearer nope"}, timeout=5).status_code == 403
    r = requests.get(path, headers=auth(s), timeout=5)
    assert r.status_code == 200 and r.text == "#cloud-config\n"
    bad_doc = url(server, "/deploy/lab-host01/seed/vendor-data")
    assert requests.get(bad_doc, headers=auth(s), timeout=5).status_code == 404


def test_callbacks_are_authenticated_once_and_revoked(server: DeployServer) -> None:
    s = session()
    server.register(s)
    cb = url(server, "/callback/lab-host01")
    assert requests.post(f"{cb}/started", data="x", timeout=5).status_code == 403
    assert requests.post(f"{cb}/started", data="x", headers=auth(s), timeout=5).status_code == 200
    # a replayed report is refused
    assert requests.post(f"{cb}/started", data="x", headers=auth(s), timeout=5).status_code == 409
    assert requests.post(f"{cb}/bogus", data="x", headers=auth(s), timeout=5).status_code == 404
    r = requests.post(f"{cb}/failed", data="deploy: FAILED: no disk\n", headers=auth(s), timeout=5)
    assert r.status_code == 200
    assert s.reports[FAILED].log == "deploy: FAILED: no disk\n"
    # after the final report the token is spent: nothing more is accepted with it
    assert requests.post(f"{cb}/finished", data="x", headers=auth(s), timeout=5).status_code == 409
    seed = url(server, "/deploy/lab-host01/seed/user-data")
    assert requests.get(seed, headers=auth(s), timeout=5).status_code == 409
    assert s.wait_for((FINISHED, FAILED), 0.1) is s.reports[FAILED]


def test_a_new_attempt_invalidates_the_old_token(server: DeployServer) -> None:
    old = session()
    server.register(old)
    new = session()
    server.register(new)
    cb = url(server, "/callback/lab-host01/started")
    assert requests.post(cb, headers=auth(old), timeout=5).status_code == 403
    assert requests.post(cb, headers=auth(new), timeout=5).status_code == 200


def test_phone_home(server: DeployServer) -> None:
    s = session()
    server.register(s)
    base = url(server, "/phone-home/lab-host01")
    assert requests.post(f"{base}/wrong", data={"instance_id": "x"}, timeout=5).status_code == 403
    good = f"{base}/{s.boot_token.reveal()}"
    assert requests.post(good, data={"instance_id": "x"}, timeout=5).status_code == 200
    assert requests.post(good, data={"instance_id": "x"}, timeout=5).status_code == 409


def test_files_support_range_requests(server: DeployServer) -> None:
    r = requests.get(url(server, "/files/images/abc.raw"), headers={"Range": "bytes=256-511"}, timeout=5)
    assert r.status_code == 206
    assert r.content == bytes(range(256))
    full = requests.get(url(server, "/files/images/abc.raw"), timeout=5)
    assert full.status_code == 200 and len(full.content) == 256 * 4096
    assert requests.get(url(server, "/files/../etc/passwd"), timeout=5).status_code == 404
    assert requests.get(url(server, "/static/pick-disk.sh"), timeout=5).text == "#!/bin/sh\n"


def test_tokens_never_reach_the_log(server: DeployServer, caplog: pytest.LogCaptureFixture) -> None:
    s = session()
    server.register(s)
    caplog.set_level(logging.INFO, logger="provisioner.deploy.http")
    requests.post(url(server, f"/phone-home/lab-host01/{s.boot_token.reveal()}"), timeout=5)
    requests.post(url(server, "/callback/lab-host01/started"), headers=auth(s), timeout=5)
    requests.post(url(server, "/callback/lab-host01/started"), headers=auth(s), timeout=5)
    text = caplog.text
    assert "phone-home/lab-host01/***" in text
    assert "refused" in text
    for secret in (s.token.reveal(), s.boot_token.reveal()):
        assert secret not in text
    assert s.token.reveal() not in repr(s)
    assert redact_path("/phone-home/h/abc?x=1") == "/phone-home/h/***"


def test_port_in_use_is_a_clear_error(server: DeployServer) -> None:
    from provisioner.exceptions import DeployError

    other = DeployServer(bind="127.0.0.1", port=server.port, public_url="http://x")
    with pytest.raises(DeployError, match=f"cannot listen on 127.0.0.1:{server.port}"):
        other.start()
