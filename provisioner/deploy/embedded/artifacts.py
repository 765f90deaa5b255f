"""The OS image the embedded backend serves, made ready once per run.

``settings.image`` names it (an http(s) URL, a file:// URL or a path) with its sha256. It is
fetched into the cache and verified before any host is touched; a qcow2 image is converted to raw
here, because the ramdisk streams the image straight onto the disk and a qcow2 stream cannot be
written that way. The ramdisk then verifies the sha256 of the raw stream it received. Without
``settings.image`` the project's own lab image (debootstrap bookworm) is built and used.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import requests

from provisioner.deploy.images.cache import build_slot, mark_done, read_manifest, sha256_file
from provisioner.deploy.images.commands import run
from provisioner.events import Event, emit
from provisioner.exceptions import DeployError, InputError
from provisioner.inventory.spec import ImageSettings


@dataclass(frozen=True)
class ServedImage:
    """A raw image ready to stream to hosts."""

    path: Path
    sha256: str
    size_bytes: int
    root_partition: int | None  # None: the deploy script takes the last partition


def lab_image() -> ServedImage:
    """The project's lab image (built and cached on first use)."""
    from provisioner.deploy.images import build_lab_image

    img = build_lab_image()
    return ServedImage(img.path, img.sha256, img.size_bytes, img.root_partition)


def _fetch(url: str, dest: Path, expected: str) -> None:
    parsed = urlparse(url)
    h = hashlib.sha256()
    emit(Event("stage", f"fetching the OS image {url}"))
    if parsed.scheme in ("http", "https"):
        try:
            with requests.get(url, stream=True, timeout=30) as r, dest.open("wb") as f:
                r.raise_for_status()
                total = int(r.headers["Content-Length"]) if "Content-Length" in r.headers else None
                done, said = 0, time.monotonic()
                for chunk in r.iter_content(4 << 20):
                    h.update(chunk)
                    f.write(chunk)
                    done += len(chunk)
                    if time.monotonic() - said >= 1.0:  # the download's own progress line
                        said = time.monotonic()
                        of = f" of {total >> 20}" if total else ""
                        emit(Event("output", f"{done >> 20}{of} MiB", data={"stage": url}))
        except requests.RequestException as exc:
            raise DeployError(
                f"cannot download the OS image {url}: {exc}",
                hint="check settings.image.url and that this machine can reach it",
            ) from exc
    else:
        src = Path(parsed.path if parsed.scheme == "file" else url).expanduser()
        if not src.is_file():
            raise InputError(
                f"OS image {src} does not exist", hint="fix settings.image.url in the site file"
            )
        with src.open("rb") as s, dest.open("wb") as f:
            while block := s.read(4 << 20):
                h.update(block)
                f.write(block)
    got = h.hexdigest()
    if got != expected.lower():
        raise DeployError(
            f"OS image {url} has sha256 {got}, the site file says {expected}",
            hint="the download is corrupt or settings.image.sha256 is out of date",
        )


def prepare_image(image: ImageSettings | None) -> ServedImage:
    """The image to serve: verified against its sha256 and converted to raw (cached)."""
    if image is None or image.url is None:
        return lab_image()
    if not image.sha256:
        raise InputError(
            "settings.image.sha256 is required: an image is never written unverified",
            hint="add `sha256: <hex>` (sha256sum of the image file) under settings.image",
        )
    key = f"{image.sha256.lower()[:32]}-{image.format}"
    with build_slot("served-images", key) as (out, done):
        if done:
            emit(Event("stage", f"OS image: cached in {out}"))
        else:
            fetched = out / f"download.{image.format}"
            _fetch(image.url, fetched, image.sha256)
            raw = out / "disk.raw"
            emit(Event("stage", "checked the OS image's sha256"))
            if image.format == "qcow2":
                run(
                    ["qemu-img", "convert", "-f", "qcow2", "-O", "raw", fetched, raw],
                    what=f"converting {image.url} from qcow2 to raw",
                )
                fetched.unlink()
            else:
                shutil.move(fetched, raw)
            mark_done(out, {"sha256": sha256_file(raw), "size_bytes": raw.stat().st_size})
        m = read_manifest(out)
    return ServedImage(out / "disk.raw", m["sha256"], m["size_bytes"], None)
