"""Fetching an image (the OS image, a firmware image) onto this machine, bounded.

An image URL is the site's, but what answers it is not to be trusted until its sha256 matched:
it may send more than any image, send it a byte every 20 s, or never end. So a fetch
- goes through the project's HTTP policy (:mod:`provisioner.http_policy`): the URL's own
  origin only (a redirect to another host, scheme or port is refused; http -> https of the same
  host is followed), no environment proxy;
- stops at a size cap (the image's declared size where the site gives one, else a default per
  kind), before reading when the server announces more;
- keeps ``reserve_bytes`` free on the filesystem it writes to (the state store may share it),
  and turns a full disk into a typed error naming the path;
- is cut when it moves less than ``min_bytes_per_s`` over a ``window_s`` window, and at the
  caller's deadline (``firmware update --timeout``) whatever it moves;
- leaves nothing behind when it fails.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import requests

from provisioner.exceptions import InputError, NotReady
from provisioner.http_policy import deadline
from provisioner.http_policy.adapter import iter_body
from provisioner.http_policy.errors import (
    AnswerTooLarge,
    AnswerTooSlow,
    DeadlineExceeded,
    ForeignURL,
    HttpRefused,
    RedirectRefused,
)
from provisioner.http_policy.policy import HttpPolicy
from provisioner.http_policy.session import GuardedSession
from provisioner.http_policy.urls import loggable_url

CHUNK = 1 << 20
GIB = 1 << 30
# Left free on the filesystem an image is written to: the state store and the logs live there.
DEFAULT_RESERVE_BYTES = GIB
# A download slower than this over a window is cut: far below any image server, far above a
# peer that drips bytes to hold the caller.
DEFAULT_MIN_BYTES_PER_S = 64 * 1024
DEFAULT_WINDOW_S = 60.0
FREE_CHECK_BYTES = 64 << 20  # the filesystem's free space is looked at this often
_NO_WALL_S = 1e9  # no wall time of its own: the rate floor and the caller's deadline bound it


class ImageFetchError(NotReady):
    """An image could not be fetched (unreachable, refused, an HTTP error)."""

    reason = "fetch failed"


class ImageTooLarge(ImageFetchError):
    """The image is larger than its cap: refused, nothing kept."""

    reason = "limit exceeded"


class ImageSpaceExhausted(ImageFetchError):
    """The image would leave the filesystem it is written to (nearly) full: stopped."""

    reason = "no space"


class ImageFetchTimeout(ImageFetchError):
    """The image arrived too slowly (below the floor) or not within the caller's deadline."""

    reason = "timeout"


@dataclass(frozen=True)
class FetchLimits:
    """The bounds of one fetch; ``cap_from`` names what sets ``max_bytes`` (for messages)."""

    max_bytes: int
    cap_from: str
    deadline_s: float | None = None
    reserve_bytes: int = DEFAULT_RESERVE_BYTES
    min_bytes_per_s: float = DEFAULT_MIN_BYTES_PER_S
    window_s: float = DEFAULT_WINDOW_S
    read_timeout_s: float = 30.0


Progress = Callable[[int, int | None], None]  # bytes so far, bytes announced


def fetch(url: str, dest: Path, *, what: str, limits: FetchLimits,
          progress: Progress | None = None) -> str:
    """Copy ``url`` (http(s), file:// or a path on this machine) into the new file ``dest``
    under ``limits``; returns its sha256. On any failure ``dest`` is removed."""
    try:
        with dest.open("wb") as out, deadline.deadline(limits.deadline_s):
            writer = _Writer(out, dest, f"{what} {loggable_url(url)}", limits)
            parts = urlsplit(url)
            if parts.scheme in ("http", "https"):
                _from_http(url, writer, what, limits, progress)
            else:
                _from_file(Path(parts.path if parts.scheme == "file" else url).expanduser(),
                           writer, what, progress)
            return writer.digest()
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


class _Writer:
    """Writes and hashes the chunks, under the cap, the reserve and the rate floor."""

    def __init__(self, out: BinaryIO, dest: Path, what: str, limits: FetchLimits) -> None:
        self.out, self.dest, self.what, self.limits = out, dest, what, limits
        self.sha = hashlib.sha256()
        self.size = 0
        self._checked_at = 0
        self._window_start = time.monotonic()
        self._window_bytes = 0

    def check_room(self, announced: int | None) -> None:
        """Refuse, before a byte is read, an image announced beyond the cap or the room."""
        if announced is not None and announced > self.limits.max_bytes:
            raise self.too_large(f"is announced as {announced} bytes")
        if announced is not None:
            self._room(announced)

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limits.max_bytes:
            raise self.too_large(f"went on past {self.size - len(chunk)} bytes")
        if self.size - self._checked_at >= FREE_CHECK_BYTES:
            self._checked_at = self.size
            self._room(len(chunk))
        try:
            self.out.write(chunk)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise self.no_space(f"the disk filled up after {self.size} bytes") from None
            raise ImageFetchError(f"{self.what}: cannot write {self.dest}: "
                                  f"{exc.strerror or exc}") from None
        self.sha.update(chunk)
        self._pace(len(chunk))

    def digest(self) -> str:
        self.out.flush()
        return self.sha.hexdigest()

    def _pace(self, n: int) -> None:
        self._window_bytes += n
        now = time.monotonic()
        took = now - self._window_start
        if took < self.limits.window_s:
            return
        if self._window_bytes < self.limits.min_bytes_per_s * took:
            raise ImageFetchTimeout(
                f"{self.what} arrived at {self._window_bytes / took:.0f} "
                f"bytes/s over the last {took:.0f} s, below the floor of "
                f"{self.limits.min_bytes_per_s:.0f} bytes/s; stopped after {self.size} bytes",
                hint="the image server or the path to it is failing; fetch the image next to "
                     "this machine and name it by path")
        self._window_start, self._window_bytes = now, 0

    def _room(self, coming: int) -> None:
        free = shutil.disk_usage(self.dest.parent).free
        if free - coming < self.limits.reserve_bytes:
            raise self.no_space(f"{free} bytes are free there and {coming} more are coming")

    def too_large(self, how: str) -> ImageTooLarge:
        return ImageTooLarge(
            f"{self.what} {how}, more than its cap of {self.limits.max_bytes} bytes "
            f"({self.limits.cap_from}); stopped, nothing kept at {self.dest}",
            hint=f"if the image really is that large, set {self.limits.cap_from}")

    def no_space(self, how: str) -> ImageSpaceExhausted:
        return ImageSpaceExhausted(
            f"{self.what} not kept at {self.dest}: {how}, and this machine keeps "
            f"{self.limits.reserve_bytes} bytes free there (its state and logs); "
            f"the image's cap is {self.limits.max_bytes} bytes ({self.limits.cap_from})",
            hint=f"free space on the filesystem of {self.dest.parent}")


def _from_http(url: str, writer: _Writer, what: str, limits: FetchLimits,
               progress: Progress | None) -> None:
    policy = HttpPolicy(max_bytes=limits.max_bytes,
                        answer_wall_s=limits.deadline_s or _NO_WALL_S, upgrade_to_https=True)
    shown = loggable_url(url)
    try:
        with GuardedSession(url, policy, pool_maxsize=1) as session, session.get(
                url, stream=True, timeout=(10.0, limits.read_timeout_s)) as resp:
            if resp.status_code >= 400:
                raise ImageFetchError(f"{what} {shown} answered HTTP {resp.status_code}",
                                      hint="check the image's url in the site file")
            announced = resp.headers.get("Content-Length", "").strip()
            if announced.isdigit() and len(announced) > 20:  # beyond any disk, and int()'s limit
                raise writer.too_large(f"is announced as a {len(announced)}-digit size")
            total = int(announced) if announced.isdigit() else None
            writer.check_room(total)
            _copy(iter_body(resp, policy), writer, total, progress)
    except ImageFetchError:
        raise
    except AnswerTooLarge:
        raise writer.too_large(f"went on past {writer.size} bytes") from None
    except (AnswerTooSlow, DeadlineExceeded) as exc:
        within = f" within the {limits.deadline_s:g} s allowed" if limits.deadline_s else ""
        raise ImageFetchTimeout(
            f"{what} {shown} did not arrive{within}: {exc.message}",
            hint="the image server or the path to it is failing; fetch the image next to this "
                 "machine and name it by path") from None
    except (RedirectRefused, ForeignURL) as exc:
        target = getattr(exc, "target", exc.url)
        raise ImageFetchError(
            f"{what} {shown} redirects to {target}, another host, scheme or port: not followed",
            hint="name the image's final URL in the site file") from None
    except HttpRefused as exc:  # a broken answer (cut short, bad chunks or compression)
        raise ImageFetchError(f"{what} {shown}: {exc.message}",
                              hint="the image server or the path to it is failing") from None
    except requests.RequestException as exc:
        raise ImageFetchError(f"cannot download the {what} {shown} ({type(exc).__name__})",
                              hint="check the image's url and that this machine reaches it"
                              ) from None


def _from_file(source: Path, writer: _Writer, what: str,
               progress: Progress | None) -> None:
    if not source.is_file():
        raise InputError(f"{what} {source} does not exist",
                         hint="the image's url is an http(s) URL or a path on this machine")
    total = source.stat().st_size
    writer.check_room(total)
    with source.open("rb") as fh:
        _copy(iter(lambda: fh.read(CHUNK), b""), writer, total, progress)


def _copy(chunks: Iterable[bytes], writer: _Writer, total: int | None,
          progress: Progress | None) -> None:
    said = time.monotonic()
    for chunk in chunks:
        writer.write(chunk)
        if progress is not None and time.monotonic() - said >= 1.0:
            said = time.monotonic()
            progress(writer.size, total)
