"""A build cache under ~/.cache/provisioner/, keyed by the hash of a recipe's inputs.

Builds run once per recipe: a second call finds the finished artefact; concurrent callers (tests
in parallel) wait on a file lock instead of building twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    """$PROVISIONER_CACHE_DIR, else $XDG_CACHE_HOME/provisioner, else ~/.cache/provisioner."""
    env = os.environ.get("PROVISIONER_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "provisioner"


def recipe_key(recipe: dict[str, Any]) -> str:
    """A short stable hash of a JSON-able recipe."""
    blob = json.dumps(recipe, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@contextmanager
def build_slot(kind: str, key: str) -> Iterator[tuple[Path, bool]]:
    """Yield (directory, already_built) for a recipe, holding an exclusive lock while inside.

    The caller builds into the directory when ``already_built`` is false and must call
    :func:`mark_done` at the end; a build that raises leaves nothing half-made behind.
    """
    base = cache_root() / kind
    base.mkdir(parents=True, exist_ok=True)
    lock = (base / f"{key}.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = base / key
        done = (out / ".done").exists()
        if not done and out.exists():
            shutil.rmtree(out)  # an earlier build died half-way
        out.mkdir(exist_ok=True)
        try:
            yield out, done
        except BaseException:
            if not (out / ".done").exists():
                shutil.rmtree(out, ignore_errors=True)
            raise
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def mark_done(out: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest and the marker that makes the build reusable."""
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / ".done").write_text("ok\n")


def read_manifest(out: Path) -> dict[str, Any]:
    """The manifest of a finished build."""
    data: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return data
