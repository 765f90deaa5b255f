"""Image streams report their bytes: the deploy HTTP server on loopback emits "bytes" events
for a host being deployed (never for a name no session has), and the counter sees the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from provisioner import events
from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.sessions import HostSession
from provisioner.deploy.embedded.stream_progress import counted
from provisioner.events import ListSink
from tests.support.waiting import wait_until

IMAGE = "images/abc.raw"
SIZE = 3 << 20


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DeployServer]:
    srv = DeployServer(
        bind="127.0.0.1", port=0, public_url="http://127.0.0.1", max_image_streams=2,
        retry_after_s=1,
    )  # fmt: skip
    image = tmp_path / "image.raw"
    image.write_bytes(b"\x5a" * SIZE)
    srv.files[IMAGE] = image
    srv.gated_files.add(IMAGE)
    srv.register(HostSession(host="h1", mac="52:54:00:00:00:01", method="image", ipxe_script=""))
    srv.start()
    yield srv
    srv.stop()


def _wait(cond: Callable[[], object]) -> None:
    wait_until(cond, "the stream's events")


def test_a_deployed_hosts_stream_emits_bytes_to_the_end(server: DeployServer) -> None:
    sink = ListSink()
    with events.sinks(sink):
        r = requests.get(f"http://127.0.0.1:{server.port}/files/{IMAGE}?host=h1", timeout=30)
        assert r.status_code == 200 and len(r.content) == SIZE
        _wait(lambda: any(e.data.get("complete") for e in sink.of("bytes")))
        # a name no deploy session has gets no stream, so no events in the operator's view
        r = requests.get(f"http://127.0.0.1:{server.port}/files/{IMAGE}?host=nobody", timeout=30)
        assert r.status_code == 404
    got = sink.of("bytes")
    assert {e.host for e in got} == {"h1"}
    assert got[0].data == {"done": 0, "total": SIZE}
    assert got[-1].data == {"done": SIZE, "total": SIZE, "complete": True}
    assert all(e.phase == "install" for e in got)


def test_counted_passes_chunks_through_and_reports_an_early_end() -> None:
    sink = ListSink()
    closed: list[bool] = []

    class Body:
        def __iter__(self) -> Iterator[bytes]:
            yield from (b"a" * 10, b"b" * 10, b"c" * 10)

        def close(self) -> None:
            closed.append(True)

    with events.sinks(sink):
        gen = counted(Body(), "h2", 30, every_s=0.0)
        assert next(gen) == b"a" * 10
        gen.close()  # the client went away after the first chunk
    ends = sink.of("bytes")
    assert ends[-1].data == {"done": 10, "total": 30, "complete": False}
    assert closed == [True]
    with events.sinks(sink):
        assert b"".join(counted(Body(), "h3", None)) == b"a" * 10 + b"b" * 10 + b"c" * 10
    assert sink.of("bytes")[-1].data == {"done": 30, "total": None, "complete": False}
