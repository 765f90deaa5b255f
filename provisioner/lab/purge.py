"""What `lab down` leaves behind on purpose, and `lab down --purge` removes.

`lab down` removes what runs and what the lab made for itself (VMs, disks, BMCs, networks, the
generated site). It keeps the lab site's state database and logs (the record of what was
installed, read by `provision status/history`) and the lab OS image in the build cache (a
rebuild takes minutes). `--purge` removes those too, and nothing else: other sites' state, the
deploy ramdisk (every site using the embedded backend shares it) and other caches stay.
"""

from __future__ import annotations

import fcntl
import shutil
from dataclasses import dataclass
from pathlib import Path

from provisioner.deploy.images.cache import cache_root
from provisioner.lab.plan import LabPlan
from provisioner.lab.sitegen import SITE_NAME
from provisioner.state.store import default_state_dir

FACT_CACHE = Path("~/.cache/provisioner/ansible-facts")  # ansible.cfg's fact_caching_connection


@dataclass(frozen=True)
class Leftover:
    """One thing `lab down` keeps: what it is and where."""

    what: str
    path: Path
    size_bytes: int


def _size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())


def _lab_images() -> list[Path]:
    """Finished or abandoned lab image builds; one being built right now is skipped."""
    base = cache_root() / "images"  # only the lab image builder writes this kind
    if not base.is_dir():
        return []
    found = []
    for entry in sorted(base.iterdir()):
        if not entry.is_dir():
            continue
        lock = base / f"{entry.name}.lock"
        if lock.exists():
            with lock.open("a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a build holds it
                fcntl.flock(fh, fcntl.LOCK_UN)
        found.append(entry)
    return found


def leftovers(plan: LabPlan) -> list[Leftover]:
    """What of this lab `lab down` keeps, as it is on disk now."""
    state = default_state_dir()
    db = state / f"{SITE_NAME}.sqlite"
    items: list[tuple[str, Path]] = [
        ("state database", db),
        ("state database", db.with_name(db.name + "-wal")),
        ("state database", db.with_name(db.name + "-shm")),
        ("state database", db.with_suffix(".lock")),
        ("state database", state / f"{SITE_NAME}.runs"),
        ("site.yml logs", state / f"{SITE_NAME}-logs"),
        ("deploy server state and logs", state / f"{SITE_NAME}-embedded"),
    ]
    facts = FACT_CACHE.expanduser()
    items += [("Ansible fact cache", facts / h.name) for h in plan.lab_hosts]
    items += [("lab OS image cache", p) for p in _lab_images()]
    return [Leftover(what, p, _size(p)) for what, p in items if p.exists() or p.is_symlink()]


def shared_leftovers() -> list[Leftover]:
    """What `lab down` keeps that is not the lab's alone, so --purge keeps it too: the deploy
    ramdisk builds every site on the embedded backend boots (a rebuild takes minutes)."""
    base = cache_root() / "ramdisk"
    if not base.is_dir():
        return []
    return [Leftover("deploy ramdisk cache", p, _size(p))
            for p in sorted(base.iterdir()) if p.is_dir() and not p.is_symlink()]


def purge(plan: LabPlan) -> list[Leftover]:
    """Remove this lab's leftovers; return what was removed."""
    removed = leftovers(plan)
    for item in removed:
        p = item.path
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
        lock = p.parent / f"{p.name}.lock"
        if item.what == "lab OS image cache" and lock.exists():
            lock.unlink(missing_ok=True)
    return removed


def describe(items: list[Leftover]) -> list[str]:
    """One line per kind of leftover: what, where, how big."""
    by_what: dict[str, list[Leftover]] = {}
    for item in items:
        by_what.setdefault(item.what, []).append(item)
    lines = []
    for what, group in by_what.items():
        size = sum(i.size_bytes for i in group)
        more = f" and {len(group) - 1} more" if len(group) > 1 else ""
        lines.append(f"{what}: {group[0].path}{more} ({human_size(size)})")
    return lines


def human_size(n: int) -> str:
    """Bytes as "512 B", "3.2 MiB", "1.4 GiB"."""
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
