"""The OS image the embedded backend serves, made ready once per run.

``settings.image`` names it (an http(s) URL, a file:// URL or a path) with its sha256. It is
fetched into the cache (bounded: its ``size_bytes`` or a default cap, a rate floor, room kept
free on the disk: deploy/images/fetch.py) and verified before any host is touched; a qcow2 image is converted to raw
here, because the ramdisk streams the image straight onto the disk and a qcow2 stream cannot be
written that way. The ramdisk then verifies the sha256 of the raw stream it received. Without
``settings.image`` the project's own lab image (debootstrap bookworm) is built and used.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from provisioner.deploy.images.cache import build_slot, mark_done, read_manifest, sha256_file
from provisioner.deploy.images.commands import run
from provisioner.deploy.images.fetch import (
    DEFAULT_RESERVE_BYTES,
    GIB,
    FetchLimits,
    ImageFetchError,
    fetch,
)
from provisioner.events import Event, emit
from provisioner.exceptions import DeployError, InputError
from provisioner.http_policy.urls import loggable_url
from provisioner.inventory.spec import ImageSettings

# The largest OS image fetched when the site gives no size_bytes.
DEFAULT_MAX_IMAGE_BYTES = 256 * GIB


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


def _fetch(image: ImageSettings, dest: Path) -> None:
    """The image's bytes into ``dest``, bounded (deploy/images/fetch.py) and sha256-checked."""
    assert image.url is not None and image.sha256 is not None
    url = image.url
    emit(Event("stage", f"fetching the OS image {loggable_url(url)}"))

    def said(done: int, total: int | None) -> None:  # the download's own progress line
        of = f" of {total >> 20}" if total else ""
        emit(Event("output", f"{done >> 20}{of} MiB", data={"stage": url}))

    try:
        got = fetch(url, dest, what="OS image", limits=_limits(image), progress=said)
    except ImageFetchError as exc:
        raise DeployError(exc.message, hint=exc.hint) from None
    if got != image.sha256.lower():
        dest.unlink(missing_ok=True)
        raise DeployError(
            f"OS image {loggable_url(url)} has sha256 {got}, the site file says {image.sha256}",
            hint="the download is corrupt or settings.image.sha256 is out of date",
        )


def _limits(image: ImageSettings) -> FetchLimits:
    """The OS image's cap: ``size_bytes`` (the raw image's size; a qcow2 of it may carry a
    little metadata more), else the default."""
    if image.size_bytes is None:
        return FetchLimits(max_bytes=DEFAULT_MAX_IMAGE_BYTES,
                           cap_from="the default for OS images; set settings.image.size_bytes")
    slack = max(64 << 20, image.size_bytes // 100) if image.format == "qcow2" else 0
    return FetchLimits(max_bytes=image.size_bytes + slack, cap_from="settings.image.size_bytes")


def _check_virtual_size(image: ImageSettings, qcow2: Path, out: Path) -> None:
    """A qcow2's raw size, before it is converted: within the cap and the room left (a small
    qcow2 of compressed clusters can expand to any size)."""
    info = run(["qemu-img", "info", "--output=json", qcow2], what="reading the qcow2's size")
    try:
        virtual = int(json.loads(info)["virtual-size"])
    except (ValueError, KeyError, TypeError):
        raise DeployError(f"qemu-img cannot tell the size of {qcow2}: not a qcow2 image",
                          hint="check settings.image.format") from None
    cap = image.size_bytes or DEFAULT_MAX_IMAGE_BYTES
    if virtual > cap:
        raise DeployError(
            f"the OS image {loggable_url(image.url or '')} is {virtual} bytes once converted to "
            f"raw, more than its cap of {cap} bytes "
            f"({'settings.image.size_bytes' if image.size_bytes else 'the default'}); "
            "not converted",
            hint="set settings.image.size_bytes to the raw image's size")
    free = shutil.disk_usage(out).free
    if virtual > free - DEFAULT_RESERVE_BYTES:
        raise DeployError(
            f"the OS image needs {virtual} bytes as raw at {out}, where {free} are free and "
            f"{DEFAULT_RESERVE_BYTES} are kept free: not converted",
            hint=f"free space on the filesystem of {out}")


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
            _fetch(image, fetched)
            raw = out / "disk.raw"
            emit(Event("stage", "checked the OS image's sha256"))
            if image.format == "qcow2":
                _check_virtual_size(image, fetched, out)
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
