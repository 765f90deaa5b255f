"""Firmware images for `provision firmware update`: fetched once (bounded: size cap, rate floor,
the caller's deadline, room left on the disk; provisioner/deploy/images/fetch.py), checked
against the sha256 the site file gives, and served to the BMCs from this machine."""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import quote, urlsplit

from werkzeug.wrappers import Request, Response

from provisioner.deploy.images.fetch import GIB, FetchLimits, fetch
from provisioner.exceptions import InputError, NotReady
from provisioner.inventory.spec import FirmwareImage, FirmwareServerSettings
from provisioner.serving import GuardedHandler, GuardedServer

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


log = logging.getLogger(__name__)


class _QuietHandler(GuardedHandler):
    """The image server's access log goes to the debug log (`--debug`), not to the
    terminal the update's progress and table are printed on."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("image server: %s %s %s", self.address_string(), self.requestline, code)


class ImageChecksumError(InputError):
    """A firmware image is not the one the site file names (its sha256 differs)."""

    reason = "checksum mismatch"


CHUNK = 1 << 20
# The largest firmware image fetched when the site gives no size: vendor bundles (a whole
# HGX tray's package) run to a few GB.
DEFAULT_MAX_IMAGE_BYTES = 8 * GIB


class ImageCache:
    """Verified images by sha256, under a directory of this machine's."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path_of(self, image: FirmwareImage) -> Path:
        """Where the verified copy of an image lives (named by its checksum)."""
        name = Path(urlsplit(image.url).path).name or "image.bin"
        return self.directory / image.sha256 / name

    def fetch(self, image: FirmwareImage, *, deadline_s: float | None = None) -> Path:
        """The verified local copy of an image: downloaded (or copied) once, within
        ``deadline_s`` and the image's size cap, sha256 checked before it is kept; a mismatch
        is an error and nothing is kept."""
        dest = self.path_of(image)
        if dest.is_file() and _sha256(dest) == image.sha256:
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        limits = FetchLimits(
            max_bytes=image.size_bytes or DEFAULT_MAX_IMAGE_BYTES,
            cap_from="its size_bytes in the site file" if image.size_bytes else
            "the default for firmware images; set the image's size_bytes",
            deadline_s=deadline_s)
        with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp:
            pass
        digest = fetch(image.url, Path(tmp.name), what="firmware image", limits=limits)
        if digest != image.sha256:
            Path(tmp.name).unlink(missing_ok=True)
            raise ImageChecksumError(
                f"firmware image {image.url} has sha256 {digest}, the site file says "
                f"{image.sha256}: not served to any BMC",
                hint="fix the sha256 in the site file, or the image at that URL")
        Path(tmp.name).replace(dest)
        return dest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


@contextmanager
def serve_images(settings: FirmwareServerSettings, cache: ImageCache) -> Iterator[ImageServer]:
    """Serve the cache's verified images over HTTP for the BMCs, for the duration."""
    port = urlsplit(settings.url).port or 80
    server = ImageServer(settings, cache)
    try:
        httpd = GuardedServer(settings.listen, port, server, _QuietHandler)
    except OSError as exc:
        raise NotReady(f"cannot serve firmware images on {settings.listen}:{port}: {exc}",
                       hint="free the port or change settings.firmware_server.url") from exc
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


class ImageServer:
    """Answers GET /firmware/<sha256>/<name> with a verified image, nothing else."""

    def __init__(self, settings: FirmwareServerSettings, cache: ImageCache) -> None:
        self.settings = settings
        self.cache = cache
        self.fetches: list[str] = []  # who fetched what: the BMCs' addresses, for the history

    def url_of(self, image: FirmwareImage) -> str:
        """The URL a BMC fetches the image from."""
        path = self.cache.path_of(image)
        return f"{self.settings.url}/firmware/{image.sha256}/{quote(path.name)}"

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        return self.handle(Request(environ))(environ, start_response)

    def handle(self, request: Request) -> Response:
        """The image, or 404 for anything else."""
        parts = request.path.strip("/").split("/")
        if request.method != "GET" or len(parts) != 3 or parts[0] != "firmware":
            return Response("not found\n", status=404)
        sha, name = parts[1], parts[2]
        path = self.cache.directory / sha / name
        if not (len(sha) == 64 and path.is_file() and path.parent.parent == self.cache.directory):
            return Response("not found\n", status=404)
        self.fetches.append(f"{request.remote_addr} {name}")
        fh = path.open("rb")
        return Response(_stream(fh), mimetype="application/octet-stream",
                        headers={"Content-Length": str(path.stat().st_size)},
                        direct_passthrough=True)


def _stream(fh: BinaryIO) -> Iterator[bytes]:
    with fh:
        yield from iter(lambda: fh.read(CHUNK), b"")

