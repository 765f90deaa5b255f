"""`provision firmware update --timeout` against an image URL that trickles (#32 item 6): the
fetch is bounded by the timeout, the host fails with a timeout naming the image, nothing reaches
the BMC, and the site lock is given back.

Stand-ins: the BMC is the UpdateService stand-in (provisioner/testing/update_peer.py) behind a
TLS proxy; the image server is a real ``http.server`` on 127.0.0.1 written here, sending the
right image a byte every 10 ms (a minute and more for 1 MiB, above any rate floor).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.inventory import load_site
from provisioner.state import StateStore
from provisioner.testing.update_peer import UpdatePeer, firmware_rack_site, image_bytes
from tests.support.waiting import HANG_S

USER, PASSWORD = "admin", "fw-Canary-Pa55"
IMAGE = image_bytes("BMC", "2.0")


class Trickle(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Trickle

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(IMAGE)))
        self.end_headers()
        give_up = time.monotonic() + HANG_S  # a fetch that ignores the timeout gets a short body
        for i in range(len(IMAGE)):
            if self.server.stop.wait(0.01) or time.monotonic() > give_up:
                return
            self.wfile.write(IMAGE[i:i + 1])
            self.wfile.flush()


@pytest.fixture
def rack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[tuple[Path, dict[str, UpdatePeer]]]:
    monkeypatch.setenv("FW_BMC_PASSWORD", PASSWORD)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    trickle = Trickle()
    url = f"http://127.0.0.1:{trickle.server_address[1]}/bmc-2.0.bin"
    sha = hashlib.sha256(IMAGE).hexdigest()

    def profiles(images: Path) -> str:
        return ("profiles:\n  bmc:\n    provisioning_nic: {rule: first-onboard-up}\n"
                f"    firmware: [{{component: BMC, version: '2.0', "
                f"image: {{url: '{url}', sha256: '{sha}'}}}}]\n")

    try:
        with ExitStack() as stack:
            yield firmware_rack_site(
                stack, tmp_path, "fwfetch", USER, PASSWORD,
                {"a": ({"BMC": {"Name": "BMC", "Version": "1.0"}}, {}, {})}, {"a": "bmc"},
                profiles)
    finally:
        trickle.stop.set()
        trickle.shutdown()
        trickle.server_close()


def test_a_trickling_image_is_bounded_by_the_timeout(rack):
    site, peers = rack
    result = CliRunner().invoke(app, ["firmware", "update", "a", "--site", str(site), "--yes",
                                      "--timeout", "2", "--json"])
    assert result.exit_code == 3, result.stdout + result.stderr
    (res,) = json.loads(result.stdout)
    assert res["reason"] == "timeout", res
    assert "firmware image http://127.0.0.1:" in res["error"]
    assert "did not arrive within the 2 s allowed" in res["error"]
    assert not peers["a"].fetched  # nothing was offered to the BMC
    assert peers["a"].inventory["BMC"]["Version"] == "1.0"
    # the site lock was given back: the next run may start
    with StateStore.for_site(load_site(site)).orchestrator_lock("next run"):
        pass
