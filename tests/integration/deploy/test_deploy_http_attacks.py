"""Attacks on the embedded deploy server from the provisioning network (docs/deploy-embedded.md).

The real server listens on 127.0.0.1. Stand-ins: the host being deployed sends from 127.0.0.3
(its DHCP reservation in this test), an attacker on the same network from 127.0.0.2; both are
real TCP clients bound to those loopback addresses.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from requests_toolbelt.adapters.source import SourceAddressAdapter

from provisioner.deploy.embedded.http import MAX_BODY, MAX_URL, DeployServer
from provisioner.deploy.embedded.peers import PeerPool
from provisioner.deploy.embedded.sessions import FINISHED, START, HostSession
from provisioner.secrets import Secret
from tests.support.waiting import HANG_S, wait_until

HOST_IP, ATTACKER_IP = "127.0.0.3", "127.0.0.2"
MAC = "52-54-00-18-00-01"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DeployServer]:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="http://198.18.254.1:8080")
    srv.start()
    yield srv
    srv.stop()


def client(source: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", SourceAddressAdapter(source))
    return session


@pytest.fixture
def host() -> requests.Session:
    return client(HOST_IP)


@pytest.fixture
def attacker() -> requests.Session:
    return client(ATTACKER_IP)


def image_session() -> HostSession:
    s = HostSession(host="lab-host01", mac=MAC.replace("-", ":"), method="image",
                    ipxe_script="", address=HOST_IP)
    s.ipxe_script = f"#!ipxe\nkernel x deploy_key={s.boot_key.reveal()}\n"
    s.config_env = f"DEPLOY_TOKEN='{s.token.reveal()}'\n"
    s.seed = {"user-data": "#cloud-config\n"}
    return s


def autoinstall_session() -> HostSession:
    s = HostSession(host="gpu-u03", mac=MAC.replace("-", ":"), method="autoinstall",
                    ipxe_script="#!ipxe\n", address=HOST_IP)
    s.autoinstall = {"user-data": f"#cloud-config\nautoinstall: {{token: {s.token.reveal()}}}\n",
                     "meta-data": "instance-id: x\n"}
    return s


def url(srv: DeployServer, path: str) -> str:
    return f"http://127.0.0.1:{srv.port}{path}"


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def test_ipxe_script_with_the_boot_key_only_for_the_hosts_address(server, host, attacker):
    s = image_session()
    server.register(s)
    refused = attacker.get(url(server, f"/ipxe/{MAC}"), timeout=5)
    assert refused.status_code == 403 and s.boot_key.reveal() not in refused.text
    assert host.get(url(server, f"/ipxe/{MAC}"), timeout=5).text == s.ipxe_script


def test_config_only_for_the_host_with_its_boot_key(server, host, attacker):
    s = image_session()
    server.register(s)
    path = url(server, "/deploy/lab-host01/config")
    # First come is no longer first served: not without the key, not from another address.
    assert attacker.get(path, timeout=5).status_code == 403
    assert attacker.get(path, headers=bearer(s.boot_key.reveal()), timeout=5).status_code == 403
    assert host.get(path, timeout=5).status_code == 403
    assert host.get(path, headers=bearer("guess"), timeout=5).status_code == 403
    got = host.get(path, headers=bearer(s.boot_key.reveal()), timeout=5)
    assert got.status_code == 200 and s.token.reveal() in got.text  # the real ramdisk's turn
    assert host.get(path, headers=bearer(s.boot_key.reveal()), timeout=5).status_code == 410


def test_user_data_with_the_callback_token_is_not_served_to_anyone(server, host, attacker):
    s = autoinstall_session()
    server.register(s)
    key = s.boot_key.reveal()
    # The old, open address is gone; the keyed one is for the host's address only.
    for who in (attacker, host):
        assert who.get(url(server, "/autoinstall/gpu-u03/user-data"), timeout=5).status_code \
            == 404
    assert attacker.get(url(server, f"/autoinstall/gpu-u03/{key}/user-data"),
                        timeout=5).status_code == 403
    assert host.get(url(server, "/autoinstall/gpu-u03/wrong-key/user-data"),
                    timeout=5).status_code == 403
    for _ in range(2):  # cloud-init may read it more than once while it runs
        got = host.get(url(server, f"/autoinstall/gpu-u03/{key}/user-data"), timeout=5)
        assert got.status_code == 200 and s.token.reveal() in got.text
    assert host.get(url(server, f"/autoinstall/gpu-u03/{key}/vendor-data"),
                    timeout=5).status_code == 200
    s.report(START, s.token.reveal(), "installer started")
    # Once the installer runs, it has what it needs: the data is withdrawn.
    assert host.get(url(server, f"/autoinstall/gpu-u03/{key}/user-data"),
                    timeout=5).status_code == 410


def test_a_forged_finished_callback_does_not_switch_the_host_to_disk(server, host, attacker):
    s = image_session()
    server.register(s)
    # Even an attacker who learnt the token (a console log) is refused off the host's address.
    forged = attacker.post(url(server, "/callback/lab-host01/finished"), data="ok",
                           headers=bearer(s.token.reveal()), timeout=5)
    assert forged.status_code == 403
    assert FINISHED not in s.reports
    assert "kernel" in host.get(url(server, f"/ipxe/{MAC}"), timeout=5).text
    done = host.post(url(server, "/callback/lab-host01/finished"), data="ok",
                     headers=bearer(s.token.reveal()), timeout=5)
    assert done.status_code == 200 and s.installed


def _raw_request(server: DeployServer, head: str, body: bytes = b"",
                 source: str = HOST_IP) -> bytes:
    """Send a request by hand, then read the answer (a server reading a 300 MB body that
    never comes would not answer before the 5 s timeout)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5,
                                  source_address=(source, 0)) as sock:
        sock.sendall(head.encode() + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


@pytest.mark.parametrize("token, size, status", [
    ("good", 300 * 1024 * 1024, b"413"),  # too large, whoever sends it
    ("forged", MAX_BODY, b"403"),  # within the limit, but refused before any of it is read
])
def test_a_callback_body_is_refused_before_it_is_read(server, token, size, status):
    s = image_session()
    server.register(s)
    value = s.token.reveal() if token == "good" else "forged"
    head = (f"POST /callback/lab-host01/failed HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {value}\r\nContent-Length: {size}\r\n\r\n")
    answer = _raw_request(server, head, b"x" * 1024)
    assert answer.split(b"\r\n", 1)[0].split()[1] == status, answer[:200]
    assert s.reports == {}


def test_a_callback_body_without_length_stops_at_the_limit(server, host):
    s = image_session()
    server.register(s)

    def endless() -> Iterator[bytes]:
        for _ in range(MAX_BODY // (1 << 20) + 2):
            yield b"x" * (1 << 20)

    r = host.post(url(server, "/callback/lab-host01/failed"), data=endless(),
                  headers=bearer(s.token.reveal()), timeout=10)
    assert r.status_code == 413
    assert s.reports == {}


@pytest.mark.parametrize("length", [MAX_URL + 100, 200_000])
def test_a_huge_url_is_answered_414(server, length, caplog):
    caplog.set_level(logging.INFO, logger="provisioner.deploy.http")
    answer = _raw_request(server, f"GET /{'a' * length} HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"414", answer[:200]
    assert all(len(r.getMessage()) < 1000 for r in caplog.records)  # no 200 KB log lines


def test_keys_and_tokens_never_reach_the_log(server, host, attacker, caplog):
    caplog.set_level(logging.DEBUG, logger="provisioner.deploy.http")
    s = autoinstall_session()
    server.register(s)
    key = s.boot_key.reveal()
    host.get(url(server, f"/autoinstall/gpu-u03/{key}/user-data"), timeout=5)
    attacker.get(url(server, f"/autoinstall/gpu-u03/{key}/meta-data"), timeout=5)
    attacker.post(url(server, "/callback/gpu-u03/started"), headers=bearer(s.token.reveal()),
                  timeout=5)
    text = caplog.text
    assert "/autoinstall/gpu-u03/***/user-data" in text
    assert f"not to {ATTACKER_IP}" in text  # the refusal names who asked
    for secret in (key, s.token.reveal(), s.boot_token.reveal()):
        assert secret not in text


@pytest.mark.parametrize("headers", [
    "".join(f"X-H{i}: v\r\n" for i in range(200)),  # more headers than any client sends
    f"X-Long: {'v' * 100_000}\r\n",  # a header line over 64 KiB
])
def test_oversized_headers_are_refused_without_a_crash(server, headers, caplog):
    caplog.set_level(logging.INFO, logger="provisioner.deploy.http")
    answer = _raw_request(server, f"GET /ipxe/boot.ipxe HTTP/1.1\r\nHost: x\r\n{headers}\r\n")
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"431", answer[:200]
    assert all(len(r.getMessage()) < 1000 for r in caplog.records)


def test_a_silent_connection_is_closed_after_the_header_timeout(server, monkeypatch):
    from provisioner.deploy.embedded import http as deploy_http

    monkeypatch.setattr(deploy_http._QuietHandler, "header_timeout_s", 0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /ipxe/boot.ipxe HTTP/1.1\r\n")  # and never the rest
        assert sock.recv(1024) == b""  # closed by the server (our own 5 s timeout would raise)
    # a complete request is still served
    r = requests.get(url(server, "/ipxe/boot.ipxe"), timeout=5)
    assert r.status_code == 200 and r.text.startswith("#!ipxe")


def test_a_connection_flood_is_refused_and_the_host_is_served_after_it(monkeypatch, caplog):
    from provisioner.deploy.embedded import http as deploy_http

    # long enough that the GET below comes before the flood is cut, however loaded the machine
    monkeypatch.setattr(deploy_http._QuietHandler, "header_timeout_s", 5.0)
    caplog.set_level(logging.INFO, logger="provisioner.deploy.http")
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="http://198.18.254.1:8080",
                       max_connections=8)
    srv.start()
    try:
        flood = [socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
                 for _ in range(8)]
        # accepted in connection order: the flood holds all 8 slots before this GET comes
        refused = requests.get(url(srv, "/ipxe/boot.ipxe"), timeout=5)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
        for sock in flood:  # the server closes each at its header deadline
            assert sock.recv(1024) == b""
            sock.close()
        # each slot comes back when its thread ends, just after the close
        r = wait_until(lambda: _ok(requests.get(url(srv, "/ipxe/boot.ipxe"), timeout=5)),
                       "a slot to come back after the flood")
        assert r.text.startswith("#!ipxe")
    finally:
        srv.stop()
    assert any("refused 1 connection(s): 8 at once" in r.getMessage() for r in caplog.records)
    assert not any(r.exc_info for r in caplog.records)


def _ok(r: requests.Response) -> requests.Response | None:
    return r if r.status_code == 200 else None


# -- peer serving ------------------------------------------------------------------------------

PEER_IP = "127.0.0.4"  # a host whose image verified and serves it


@pytest.fixture
def peer_server(tmp_path: Path) -> Iterator[DeployServer]:
    srv = DeployServer(bind="127.0.0.1", port=0, public_url="", max_image_streams=1, hold_s=0,
                       peers=PeerPool(linger_s=30))
    (tmp_path / "image.raw").write_bytes(b"i" * 4096)
    srv.files["images/x.raw"] = tmp_path / "image.raw"
    srv.gated_files.add("images/x.raw")
    srv.start()
    yield srv
    srv.stop()


def peer_session(name: str, address: str) -> HostSession:
    return HostSession(host=name, mac="52:54:00:18:00:0" + name[-1], method="image",
                       ipxe_script="", address=address, locality="r1",
                       peer_key=Secret(f"peer-key-of-{name}"), peer_port=8081)


def test_peer_routes_refuse_strangers_and_redirects_hold_no_reusable_secret(
    peer_server: DeployServer, host: requests.Session, attacker: requests.Session,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="provisioner.deploy.http")
    gate = peer_server.gate
    assert gate is not None
    base = f"http://127.0.0.1:{peer_server.port}"
    seeder, waiting = peer_session("seed1", PEER_IP), peer_session("host2", HOST_IP)
    peer_server.register(seeder)
    peer_server.register(waiting)
    seed_client = client(PEER_IP)
    bearer = {"Authorization": f"Bearer {seeder.token.reveal()}"}
    # nobody but the host itself, with its token, may offer to serve or ask to leave
    for who, headers in ((attacker, bearer), (seed_client, {}),
                         (seed_client, {"Authorization": "Bearer forged"})):
        assert who.post(f"{base}/callback/seed1/verified?serve=1", headers=headers,
                        timeout=5).status_code == 403
        assert who.get(f"{base}/deploy/seed1/peer", headers=headers,
                       timeout=5).status_code == 403
    assert gate.peers() == {}
    assert seed_client.post(f"{base}/callback/seed1/verified?serve=1", headers=bearer,
                            timeout=5).status_code == 200
    assert gate.peers() == {"host seed1": []}
    assert gate.try_admit("blocker").admitted  # the server's stream is busy
    # an attacker naming the waiting host is refused (not its address), never sent to the peer
    stolen = attacker.get(f"{base}/files/images/x.raw?host=host2", allow_redirects=False,
                          timeout=5)
    assert stolen.status_code == 403 and gate.peers() == {"host seed1": []}
    # the host itself is: 307 to the peer, with a ticket bound to its own address
    sent = host.get(f"{base}/files/images/x.raw?host=host2", allow_redirects=False, timeout=5)
    assert sent.status_code == 307
    ticket = seeder.peer_ticket(HOST_IP)
    assert sent.headers["Location"] == f"http://{PEER_IP}:8081/cgi-bin/image?t={ticket}"
    assert ticket != seeder.peer_ticket(ATTACKER_IP)
    assert gate.peers() == {"host seed1": ["host host2"]}
    # neither the peer's key nor the ticket reaches the log
    text = caplog.text
    assert ticket not in text and seeder.peer_key is not None
    assert seeder.peer_key.reveal() not in text and "handed to peer seed1" in text
    # a report of an unknown next boot is refused, and the token stays usable
    wbearer = {"Authorization": f"Bearer {waiting.token.reveal()}"}
    bad = host.post(f"{base}/callback/host2/finished?next=$(reboot)", headers=wbearer,
                    data="x", timeout=5)
    assert bad.status_code == 400 and FINISHED not in waiting.reports
    # the waiting host verified: the peer is free again, and it may now go
    assert host.post(f"{base}/callback/host2/verified", headers=wbearer,
                     timeout=5).status_code == 200
    assert gate.peers() == {"host seed1": []}
    assert seed_client.get(f"{base}/deploy/seed1/peer", headers=bearer,
                           timeout=10).text == "leave\n"
    assert gate.peers() == {}
