"""The node poller against a real loopback HTTP server standing in for Ironic's node list:
waiters that acted before a list call was sent share it, their first read included."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from provisioner.deploy.ironic.client import IronicClient
from provisioner.deploy.ironic.errors import IronicNotFound
from provisioner.deploy.ironic.poller import NodePoller

NODES = [{"uuid": "aaa", "provision_state": "deploying"},
         {"uuid": "bbb", "provision_state": "active"}]


@pytest.fixture
def ironic_list() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            payload = json.dumps({"nodes": NODES}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_watched_waiters_first_read_shares_another_waiters_list_call(ironic_list):
    url, seen = ironic_list
    now = [0.0]
    poller = NodePoller(IronicClient(url, microversion="1.81"), max_age_s=1.8, clock=lambda: now[0])
    poller.watch("aaa")  # host a acted at t=0
    now[0] = 0.1
    poller.watch("bbb")  # host b acted at t=0.1
    now[0] = 2.0
    assert poller.read("aaa", since=0.0)["provision_state"] == "deploying"
    assert poller.read("bbb", since=0.1)["provision_state"] == "active"  # no request of its own
    assert (poller.polls, poller.reads, len(seen)) == (1, 2, 1)
    # an action after that list call was sent needs a newer one
    assert poller.read("bbb", since=2.5)["provision_state"] == "active"
    assert (poller.polls, len(seen)) == (2, 2)


def test_a_node_gone_from_the_list_is_named(ironic_list):
    url, _ = ironic_list
    poller = NodePoller(IronicClient(url, microversion="1.81"), max_age_s=1.0, clock=lambda: 0.0)
    poller.watch("ccc")
    with pytest.raises(IronicNotFound, match="ccc disappeared"):
        poller.read("ccc", since=0.0)
