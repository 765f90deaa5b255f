"""The files a site file points at (CA bundles, secret files, vaults) exist and can be read.

``provision inventory check`` runs this so that a wrong path fails there, naming its key and line,
and not hours later when discovery first opens the file.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from provisioner.exceptions import CredentialError
from provisioner.inventory.yamlsrc import LineMap, Path_

_SECRET_KEYS = {"env", "file", "vault", "key"}


def check_referenced_files(data: Any, site_dir: Path, lines: LineMap) -> None:
    """Raise an InventoryError for the first referenced file that is missing or unreadable."""
    problems = list(_problems(data, site_dir))
    if problems:
        path, message, hint = problems[0]
        more = len(problems) - 1
        if more:
            message += f" (and {more} more file problem{'s' if more > 1 else ''})"
        raise lines.error(path, message, hint=hint)


Problem = tuple[Path_, str, str | None]  # where in the site file, what, how to fix it


def _problems(data: Any, site_dir: Path) -> Iterator[Problem]:
    for path, value in _walk(data, ()):
        if path and path[-1] == "ca_bundle" and isinstance(value, str) and value:
            for where, why, fix in _ca_bundle(_resolve(site_dir, value), path):
                yield where, f"{why}{_whose(data, path)}", fix
        elif _is_secret_ref(value):
            for kind in ("file", "vault"):
                if isinstance(value.get(kind), str) and value[kind]:
                    yield from _secret(_resolve(site_dir, value[kind]), kind, (*path, kind))


def _whose(data: Any, path: Path_) -> str:
    """Whose BMCs a ca_bundle key covers, for the message."""
    if path[:1] == ("settings",):
        return " (the site's default for every BMC)"
    if len(path) >= 4 and path[0] == "racks" and path[2] == "hosts":
        try:
            host = data["racks"][path[1]]["hosts"][path[3]]
            rack = data["racks"][path[1]].get("name", path[1])
            return f" (host {host.get('name') or 'at U' + str(host.get('u'))} in rack {rack})"
        except (KeyError, IndexError, TypeError, AttributeError):
            return ""
    if len(path) >= 3 and path[0] == "racks" and path[2] == "defaults":
        try:
            return f" (every host of rack {data['racks'][path[1]].get('name', path[1])})"
        except (KeyError, IndexError, TypeError, AttributeError):
            return ""
    return ""


def _walk(node: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(k, str | int):
                yield from _walk(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, (*path, i))


def _is_secret_ref(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= _SECRET_KEYS and (
        "file" in value or "vault" in value
    )


def _resolve(site_dir: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else site_dir / p


def _unreadable(file: Path) -> str | None:
    """Why ``file`` cannot be read, or None."""
    if not file.exists():
        return "does not exist"
    if not file.is_file():
        return "is not a file"
    try:
        with file.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def _ca_bundle(file: Path, path: Path_) -> Iterator[Problem]:
    why = _unreadable(file)
    if why is None:
        try:
            ssl.create_default_context(cafile=str(file))
        except (ssl.SSLError, ValueError, OSError):
            why = "holds no PEM certificate"
    if why:
        yield (
            path,
            f"CA bundle {file} {why}",
            "point ca_bundle at the PEM file of the CA that signed the BMC certificates "
            "(relative paths start at the site's directory)",
        )


def _secret(file: Path, kind: str, path: Path_) -> Iterator[Problem]:
    what = "secret file" if kind == "file" else "vault"
    why = _unreadable(file)
    if why:
        yield (
            path,
            f"{what} {file} {why}",
            f"create it (mode 0600, readable by {_user()}) or fix the path "
            "(relative paths start at the site's directory)",
        )
        return
    if kind == "file":
        from provisioner.inventory.credentials import _refuse_if_committable

        try:
            _refuse_if_committable(file, "")
        except CredentialError as exc:
            yield path, exc.message.replace(" ()", ""), exc.hint


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return "you"
