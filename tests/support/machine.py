"""What a test may skip for (a machine capability from one explicit list) and what it may not
(a tool the project's own scripts install: its absence fails the test, naming the fix).

A skip reason is written by `needs`/`require` only, as ``needs capability NAME: what``;
tests/skip_policy.py refuses any other reason, an unknown NAME, and a NAME this machine has.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest


def _is_root() -> bool:
    return os.geteuid() == 0


def _char_device(path: str) -> Callable[[], bool]:
    def probe() -> bool:
        return os.access(path, os.R_OK | os.W_OK)
    return probe


@dataclass(frozen=True)
class Capability:
    """Something a machine has or lacks that no install script of ours can give it."""

    name: str
    what: str
    probe: Callable[[], bool]


# The explicit list. A missing package is never here: scripts/install-deps installs those.
CAPABILITIES: dict[str, Capability] = {c.name: c for c in (
    Capability("root", "runs as root (network namespaces, DHCP on port 67, libvirt, podman "
                       "storage, /var/run)", _is_root),
    Capability("tun", "/dev/net/tun (tap devices for qemu guests)", _char_device("/dev/net/tun")),
    Capability("dev-full", "/dev/full (a device whose writes fail with ENOSPC)",
               _char_device("/dev/full")),
)}

REASON = re.compile(r"^needs capability (?P<name>[\w-]+): ")


def skip_reason(name: str) -> str:
    """The one wording of a skip for capability `name` (the skip policy parses it)."""
    return f"needs capability {name}: {CAPABILITIES[name].what}"


def has(name: str) -> bool:
    """Whether this machine has capability `name` (a KeyError for a name not on the list)."""
    return CAPABILITIES[name].probe()


def needs(*names: str) -> pytest.MarkDecorator:
    """A skipif mark for the first of `names` this machine lacks."""
    lacking = [n for n in names if not has(n)]
    return pytest.mark.skipif(bool(lacking), reason=skip_reason(lacking[0]) if lacking else "")


def require(*names: str) -> None:
    """Skips the calling test for the first of `names` this machine lacks."""
    for name in names:
        if not has(name):
            pytest.skip(skip_reason(name))


def missing_tools(tools: Iterable[str]) -> list[str]:
    """The commands (names on PATH, or absolute paths) that are not there."""
    return [t for t in tools if not (Path(t).exists() if t.startswith("/") else shutil.which(t))]


def require_tools(tools: Iterable[str], deps: str = "scripts/deps/*.list") -> None:
    """Fails the calling test when a tool the project's install script provides is absent."""
    fail_if_missing(missing_tools(tools), deps)


def fail_if_missing(missing: list[str], deps: str = "scripts/deps/*.list") -> None:
    """Fails the calling test naming what is not installed and the script that installs it."""
    if missing:
        pytest.fail(f"not installed: {', '.join(missing)}; ./scripts/install-deps installs it "
                    f"({deps})", pytrace=False)
