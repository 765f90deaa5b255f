"""Image fetches (the OS image, firmware images) against hostile image servers (#32 item 6): a
byte every few hundred ms, silence after the first bytes, an endless body, a body announced
beyond the cap, a redirect to another host, a proxy in the environment, a full disk.

Stand-ins: each image server is a real ``http.server`` on 127.0.0.1 written here, scripted per
test; "elsewhere" (a redirect's target, an environment proxy) is one on 127.0.0.2 that records
what reaches it. A full disk is the kernel's own /dev/full behind a symlink.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import threading
from collections.abc import Callable, Iterator

import pytest

from provisioner.deploy.embedded.artifacts import prepare_image
from provisioner.deploy.images.fetch import (
    FetchLimits,
    ImageFetchError,
    ImageFetchTimeout,
    ImageSpaceExhausted,
    ImageTooLarge,
    fetch,
)
from provisioner.exceptions import DeployError
from provisioner.inventory.spec import FirmwareImage, ImageSettings
from provisioner.workflow.firmware_images import ImageCache
from tests.support import machine
from tests.support.waiting import HANG_S

IMAGE = bytes(range(256)) * 4096  # 1 MiB
SHA = hashlib.sha256(IMAGE).hexdigest()


class ImageServer(http.server.ThreadingHTTPServer):
    """Answers every GET with ``script(handler)``; records the paths asked."""

    daemon_threads = True

    def __init__(self, script: Callable[[http.server.BaseHTTPRequestHandler], None],
                 host: str = "127.0.0.1") -> None:
        self.script = script
        self.asked: list[str] = []
        self.stop = threading.Event()  # ends a trickle still running when the test is done
        super().__init__((host, 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, path: str = "/image.bin") -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}{path}"

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hanging up on an answer it refused is the point

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ImageServer

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        self.server.script(self)


@pytest.fixture
def serve() -> Iterator[Callable[..., ImageServer]]:
    started: list[ImageServer] = []

    def start(script: Callable[[http.server.BaseHTTPRequestHandler], None],
              host: str = "127.0.0.1") -> ImageServer:
        started.append(ImageServer(script, host))
        return started[-1]

    yield start
    for srv in started:
        srv.close()


def head(h: http.server.BaseHTTPRequestHandler, length: int | None) -> None:
    h.send_response(200)
    if length is not None:
        h.send_header("Content-Length", str(length))
    h.end_headers()


def trickle(every_s: float, first: bytes = b"") -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """``first`` at once, then a byte every ``every_s`` (until the hang guard)."""

    def script(h: http.server.BaseHTTPRequestHandler) -> None:
        head(h, len(IMAGE))
        h.wfile.write(first)
        h.wfile.flush()
        stop: threading.Event = h.server.stop  # type: ignore[attr-defined]
        for i in range(len(first), len(IMAGE)):
            if stop.wait(every_s):
                return
            h.wfile.write(IMAGE[i:i + 1])
            h.wfile.flush()

    return script


def whole(h: http.server.BaseHTTPRequestHandler) -> None:
    head(h, len(IMAGE))
    h.wfile.write(IMAGE)


def limits(**kw: object) -> FetchLimits:
    return FetchLimits(**{"max_bytes": 4 << 20, "cap_from": "the test's cap", **kw})  # type: ignore[arg-type]


def test_a_byte_every_few_hundred_ms_is_cut_at_the_floor(serve, tmp_path):
    srv = serve(trickle(0.2))
    dest = tmp_path / "image.bin"
    with pytest.raises(ImageFetchTimeout, match=r"below the floor of 1000 bytes/s") as exc:
        fetch(srv.url(), dest, what="firmware image",
              limits=limits(min_bytes_per_s=1000, window_s=1.0))
    assert exc.value.exit_code == 5 and not dest.exists()


def test_the_callers_deadline_holds_whatever_moves(serve, tmp_path):
    # above any floor but never done; and silence after the first bytes
    for script in (trickle(0.01), trickle(HANG_S, first=IMAGE[:1000])):
        srv = serve(script)
        dest = tmp_path / "image.bin"
        with pytest.raises(ImageFetchTimeout, match=r"did not arrive within the 1 s allowed"):
            fetch(srv.url(), dest, what="firmware image",
                  limits=limits(deadline_s=1.0, min_bytes_per_s=0))
        assert not dest.exists()


def test_an_endless_image_stops_at_the_cap_naming_it_and_the_path(serve, tmp_path):
    def endless(h: http.server.BaseHTTPRequestHandler) -> None:
        head(h, None)  # no length: the body ends when the server closes (never)
        while not h.server.stop.is_set():  # type: ignore[attr-defined]
            h.wfile.write(IMAGE)

    srv = serve(endless)
    dest = tmp_path / "image.bin"
    with pytest.raises(ImageTooLarge) as exc:
        fetch(srv.url(), dest, what="OS image", limits=limits(max_bytes=3 << 20))
    text = exc.value.message
    assert "more than its cap of 3145728 bytes (the test's cap)" in text and str(dest) in text
    assert not dest.exists()


def test_an_image_announced_beyond_the_cap_is_not_read(serve, tmp_path):
    sent = threading.Event()

    def huge(h: http.server.BaseHTTPRequestHandler) -> None:
        head(h, 1 << 40)
        h.wfile.flush()
        sent.set()

    srv = serve(huge)
    with pytest.raises(ImageTooLarge, match="is announced as 1099511627776 bytes"):
        fetch(srv.url(), tmp_path / "image.bin", what="OS image", limits=limits())
    assert sent.is_set()


def test_a_full_disk_is_a_typed_error_naming_the_path(serve, tmp_path):
    machine.require("dev-full")
    srv = serve(whole)
    dest = tmp_path / "image.bin"
    dest.symlink_to("/dev/full")  # every write: ENOSPC from the kernel
    with pytest.raises(ImageSpaceExhausted, match="the disk filled up") as exc:
        fetch(srv.url(), dest, what="OS image", limits=limits(reserve_bytes=0))
    assert str(dest) in exc.value.message
    assert not dest.is_symlink() and os.path.exists("/dev/full")


def test_the_reserve_on_the_cache_filesystem_is_kept(serve, tmp_path):
    srv = serve(whole)
    free = shutil.disk_usage(tmp_path).free
    # the image would leave less than the reserve free: refused before a byte is written
    with pytest.raises(ImageSpaceExhausted, match="this machine keeps"):
        fetch(srv.url(), tmp_path / "image.bin", what="OS image",
              limits=limits(reserve_bytes=free - len(IMAGE) // 2))
    assert not (tmp_path / "image.bin").exists()


def test_a_redirect_elsewhere_and_an_environment_proxy_are_not_used(serve, tmp_path,
                                                                    monkeypatch):
    elsewhere = serve(whole, host="127.0.0.2")

    def moved(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", elsewhere.url())
        h.send_header("Content-Length", "0")
        h.end_headers()

    srv = serve(moved)
    with pytest.raises(ImageFetchError, match=r"redirects to http://127\.0\.0\.2"):
        fetch(srv.url(), tmp_path / "a.bin", what="firmware image", limits=limits())
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, elsewhere.url("/"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    direct = serve(whole)
    assert fetch(direct.url(), tmp_path / "b.bin", what="firmware image", limits=limits()) == SHA
    assert elsewhere.asked == []


def test_the_firmware_cache_fetches_within_the_deadline_and_keeps_nothing(serve, tmp_path):
    srv = serve(trickle(0.01))
    cache = ImageCache(tmp_path / "cache")
    image = FirmwareImage(url=srv.url(), sha256=SHA)
    with pytest.raises(ImageFetchTimeout, match="within the 1 s allowed"):
        cache.fetch(image, deadline_s=1.0)
    assert list((tmp_path / "cache").rglob("*.*")) == [] and not cache.path_of(image).exists()
    assert cache.fetch(FirmwareImage(url=serve(whole).url(), sha256=SHA)).read_bytes() == IMAGE


def test_a_firmware_image_beyond_its_size_bytes_is_refused(serve, tmp_path):
    cache = ImageCache(tmp_path / "cache")
    image = FirmwareImage(url=serve(whole).url(), sha256=SHA, size_bytes=1000)
    with pytest.raises(ImageTooLarge, match=r"cap of 1000 bytes \(its size_bytes in the site"):
        cache.fetch(image)


def test_the_os_image_fetch_stops_at_size_bytes(serve, tmp_path, monkeypatch):
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path / "cache"))
    url = serve(whole).url()
    with pytest.raises(DeployError, match=r"cap of 1000 bytes \(settings.image.size_bytes\)"):
        prepare_image(ImageSettings(url=url, sha256=SHA, size_bytes=1000))
    assert prepare_image(ImageSettings(url=url, sha256=SHA, size_bytes=len(IMAGE))).sha256 == SHA
