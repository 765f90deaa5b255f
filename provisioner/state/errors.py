"""What a damaged, read-only, full or busy state file means for the user: one typed error each,
naming the file and the way out (never SQLite's bare message and a traceback)."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from provisioner.exceptions import NotReady, ProvisionerError, SiteLocked, StateError

READ_ONLY_VERBS = "status, history, hosts"


class StateFileDamaged(StateError):
    """The state file is not a (whole) SQLite database: corrupt or truncated. Exit 2."""


class StateUnavailable(NotReady):
    """The state file cannot be written (read-only, disk full) or opened. Exit 5."""


def _recovery(path: Path) -> str:
    site = path.name.removesuffix(".sqlite")
    return (
        f"`provision state check --site {site}` says what is damaged; `provision state "
        f"restore BACKUP --site {site}` puts back a copy made by `provision state backup`; "
        "moving the file aside starts the site with no state (every host enrolled again)"
    )


def damaged(path: Path, detail: str, action: str) -> StateFileDamaged:
    """The error for a state file SQLite cannot read."""
    return StateFileDamaged(
        f"the state file {path} is damaged ({detail}); cannot {action}", hint=_recovery(path)
    )


def _free(path: Path) -> str:
    try:
        free = shutil.disk_usage(path if path.is_dir() else path.parent).free
    except OSError:
        return "unknown"
    return f"{free / 2**20:.1f} MiB"


def read_only(path: Path, action: str) -> StateUnavailable:
    """The error for a state directory (or file) this process may not write."""
    where = path if path.is_dir() else path.parent
    return StateUnavailable(
        f"the state directory {where} is read-only: cannot {action}",
        hint="make it writable for this user (or point PROVISIONER_STATE_DIR elsewhere); "
        f"read-only commands ({READ_ONLY_VERBS}) work meanwhile",
    )


def full(path: Path, action: str) -> StateUnavailable:
    """The error for a state filesystem without room: the change was rolled back whole."""
    return StateUnavailable(
        f"no space left for the state file {path} ({_free(path)} free): could not {action}; "
        "the change was rolled back, nothing is half-written",
        hint="free space on that filesystem (`provision state prune` drops old health runs "
        "and events), or move the state directory (PROVISIONER_STATE_DIR)",
    )


def state_unavailable(path: Path, exc: OSError, action: str) -> ProvisionerError:
    """An OSError on the state directory (making it, a lock or a record) as a typed error."""
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return read_only(path, action)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return full(path, action)
    return StateUnavailable(
        f"cannot {action}: {path}: {exc.strerror or exc}",
        hint="check that the state directory exists and is usable (PROVISIONER_STATE_DIR)",
    )


def translate(path: Path, exc: sqlite3.Error, action: str) -> ProvisionerError:
    """A SQLite error on the state file as the project's typed error."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc)
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in text:
        return damaged(path, text, action)
    if primary == sqlite3.SQLITE_FULL:
        return full(path, action)
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM) or (
        primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR)
        and not os.access(path.parent, os.W_OK)
    ):
        # a read-only mount or directory: SQLite cannot make its journal files beside the file
        return read_only(path, action)
    if primary == sqlite3.SQLITE_BUSY:
        return SiteLocked(
            f"the state file {path} stayed locked by another process: cannot {action}",
            hint="another provision command is writing to it; try again when it is done",
        )
    if primary == sqlite3.SQLITE_IOERR and _no_space(path):
        return full(path, action)
    if primary == sqlite3.SQLITE_CANTOPEN:
        return StateUnavailable(
            f"cannot open the state file {path} ({text}): cannot {action}",
            hint="check that the state directory exists and this user may read it "
            "(PROVISIONER_STATE_DIR)",
        )
    return StateUnavailable(
        f"the state file {path} failed: {text}; cannot {action}", hint=_recovery(path)
    )


def _no_space(path: Path) -> bool:
    """Whether the state filesystem is (nearly) full: SQLite reports ENOSPC on some writes
    as a plain I/O error."""
    try:
        return shutil.disk_usage(path.parent).free < 1 << 20
    except OSError:
        return False
