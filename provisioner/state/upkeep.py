"""Looking after a site's state file: a consistent backup while runs go on, and putting a backup
back in place of a damaged file (with the site held whole, the damaged file kept aside)."""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from provisioner.exceptions import InputError
from provisioner.state.errors import damaged, state_unavailable, translate
from provisioner.state.locks import SiteLocks
from provisioner.state.store import StateStore


@dataclass(frozen=True)
class FileSummary:
    """What a state file holds, for `provision state check`."""

    path: Path
    size_bytes: int
    hosts: int
    events: int
    health_runs: int
    problems: list[str]


def summarise(store: StateStore) -> FileSummary:
    """Count what ``store`` holds and run SQLite's integrity check over it."""
    problems = store.integrity_problems()
    counts = store.counts()
    return FileSummary(store.path, store.size_bytes(), counts["hosts"], counts["events"],
                       counts["health_runs"], problems)  # fmt: skip


def backup(store: StateStore, dest: Path) -> int:
    """Copy the state file to ``dest`` as one consistent snapshot (SQLite's online backup:
    writers may go on meanwhile); return its size. The copy appears whole or not at all."""
    if dest.exists() and dest.is_dir():
        raise InputError(f"{dest} is a directory", hint="name the backup file, e.g. site.sqlite.bak")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        out = sqlite3.connect(tmp)
        try:
            store.copy_to(out)
        finally:
            out.close()
        _fsync(tmp)
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        tmp.unlink(missing_ok=True)
        raise translate(dest, exc, f"write the backup {dest}") from None
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise state_unavailable(dest, exc, f"write the backup {dest}") from None
    return dest.stat().st_size


def restore(store_path: Path, site: str, source: Path, command: str) -> Path | None:
    """Put the backup ``source`` in place of the site's state file; return where the file it
    replaces was kept (None when there was none).

    The backup is checked whole first; the site is held whole meanwhile (no run may be writing),
    and the old file (with its write-ahead log) is moved aside, never deleted.
    """
    try:
        check = StateStore(source, site=site, readonly=True)
        problems = check.integrity_problems()
        check.counts()  # the project's tables are there
        check.close()
    except sqlite3.Error as exc:
        raise translate(source, exc, "read the backup") from None
    if problems:
        raise damaged(source, "; ".join(problems[:3]), "restore from it")
    # the lock file only: the state file itself may be too damaged to open
    lease = SiteLocks(store_path.parent, site).acquire(command, site_wide=True)
    try:
        return _swap(store_path, source)
    finally:
        lease.release()


def _swap(store_path: Path, source: Path) -> Path | None:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    kept = store_path.with_name(f"{store_path.name}.replaced-{stamp}")
    tmp = store_path.with_name(f".{store_path.name}.restore.tmp")
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
        out = sqlite3.connect(tmp)
        try:
            src.backup(out)
        finally:
            out.close()
            src.close()
        _fsync(tmp)
        moved = None
        if store_path.exists():
            os.replace(store_path, kept)
            moved = kept
        for suffix in ("-wal", "-shm"):
            side = store_path.with_name(store_path.name + suffix)
            if side.exists():
                os.replace(side, kept.with_name(kept.name + suffix))
        os.replace(tmp, store_path)
        return moved
    except sqlite3.Error as exc:
        tmp.unlink(missing_ok=True)
        raise translate(source, exc, "restore the backup") from None
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise state_unavailable(store_path, exc, "restore the backup") from None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
