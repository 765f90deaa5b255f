"""Choose the drives of the pool from ``lsblk --json`` and the /dev/disk/by-id links, and
parse ``zpool import`` listings. Kept in Python because the rules (OS disk through md/LVM,
foreign data on partitions) are tree walks that Jinja cannot express readably."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# The mount points that make a drive the OS disk: everything under them is the system.
OS_MOUNTS = ("/", "/boot", "/boot/efi", "/usr", "/var", "[SWAP]")
# Stable names, most preferred first: model+serial names read well in `zpool status`.
BY_ID_PREFERENCE = ("nvme-", "ata-", "scsi-", "wwn-")


def _truthy(value: Any) -> bool:
    # lsblk >= 2.37 prints JSON booleans; older releases print "0"/"1" strings.
    return value in (True, 1, "1", "true")


def _walk(node: dict[str, Any]) -> Iterable[dict[str, Any]]:
    yield node
    for child in node.get("children") or []:
        yield from _walk(child)


def _mounts(node: dict[str, Any]) -> list[str]:
    mounts: list[str] = []
    for n in _walk(node):
        points = n.get("mountpoints") or [n.get("mountpoint")]
        mounts.extend(p for p in points if p)
    return mounts


def _foreign(node: dict[str, Any]) -> list[str]:
    """What the drive holds: partition table, filesystems, RAID/LVM membership."""
    found = []
    if node.get("pttype"):
        found.append(f"a {node['pttype']} partition table")
    for n in _walk(node):
        if n.get("fstype"):
            found.append(f"{n['fstype']} on {n['name']}")
    return found


def _by_id_map(by_id_listing: str) -> dict[str, list[str]]:
    """Kernel name -> by-id names, from `find /dev/disk/by-id -type l -printf '%f %l\\n'`."""
    names: dict[str, list[str]] = {}
    for line in by_id_listing.splitlines():
        parts = line.split()
        if len(parts) != 2 or "-part" in parts[0]:
            continue
        names.setdefault(parts[1].rsplit("/", 1)[-1], []).append(parts[0])
    return names


def _preferred(ids: list[str]) -> str:
    def rank(name: str) -> tuple[int, str]:
        # EUI/NGUID names are stable too, but unreadable in `zpool status`: last resort.
        if name.startswith(("nvme-eui.", "nvme-nvme.")):
            return (len(BY_ID_PREFERENCE), name)
        for i, prefix in enumerate(BY_ID_PREFERENCE):
            if name.startswith(prefix):
                return (i, name)
        return (len(BY_ID_PREFERENCE) + 1, name)

    return sorted(ids, key=rank)[0]


def zfs_raidz_drives(
    lsblk: dict[str, Any],
    by_id_listing: str,
    exclude: list[str] | None = None,
    force: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Sort every whole drive into candidates, os, excluded, mounted, foreign and unusable."""
    excluded = set(exclude or [])
    by_id = _by_id_map(by_id_listing)
    result: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("candidates", "os", "excluded", "mounted", "foreign", "unusable")
    }
    for disk in lsblk.get("blockdevices", []):
        if disk.get("type") != "disk":
            continue
        name = disk["name"]
        ids = by_id.get(name, [])
        entry: dict[str, Any] = {
            "name": name,
            "by_id": _preferred(ids) if ids else None,
            "size": int(disk.get("size") or 0),
            "model": (disk.get("model") or "").strip(),
            "serial": (disk.get("serial") or "").strip(),
        }
        mounts = _mounts(disk)
        if any(m in OS_MOUNTS for m in mounts):
            result["os"].append({**entry, "reason": f"holds {', '.join(sorted(set(mounts)))}"})
        elif name in excluded or excluded.intersection(ids):
            result["excluded"].append({**entry, "reason": "listed in zfs_raidz_exclude"})
        elif mounts:
            result["mounted"].append({**entry, "reason": f"mounted at {', '.join(mounts)}"})
        elif _truthy(disk.get("rota")) or _truthy(disk.get("rm")) or disk.get("tran") == "usb":
            result["unusable"].append({**entry, "reason": "rotational, removable or USB"})
        elif not ids:
            result["unusable"].append({**entry, "reason": "no /dev/disk/by-id name"})
        elif _foreign(disk) and not force:
            result["foreign"].append({**entry, "reason": "holds " + ", ".join(_foreign(disk))})
        else:
            result["candidates"].append(entry)
    for group in result.values():
        group.sort(key=lambda e: e["by_id"] or e["name"])
        for e in group:
            where = f"/dev/disk/by-id/{e['by_id']} ({e['name']})" if e["by_id"] else f"/dev/{e['name']}"
            e["summary"] = f"{where} {e['reason']}" if e.get("reason") else where
    return result


def zfs_raidz_level_for(count: int, table: list[dict[str, Any]]) -> str | None:
    """The raidz level of the table entry with the highest min_drives not above ``count``."""
    fitting = [row for row in table if int(row["min_drives"]) <= count]
    if not fitting:
        return None
    return str(max(fitting, key=lambda row: int(row["min_drives"]))["level"])


def zpool_create_argv(
    pool: str,
    level: str,
    by_ids: list[str],
    ashift: int = 12,
    properties: dict[str, Any] | None = None,
    force: bool = False,
) -> list[str]:
    """The ``zpool create`` command line: ashift, root dataset properties, no mountpoint."""
    argv = ["zpool", "create"] + (["-f"] if force else []) + ["-o", f"ashift={int(ashift)}"]
    for key, value in (properties or {}).items():
        argv += ["-O", f"{key}={_zfs_value(value)}"]
    # The pool root is not mounted: only the datasets below it are.
    argv += ["-m", "none", pool, level]
    return argv + [f"/dev/disk/by-id/{name}" for name in by_ids]


def _zfs_value(value: Any) -> str:
    # YAML turns an unquoted `off` into False: write it back as ZFS spells it.
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def zfs_property_args(properties: dict[str, Any]) -> list[str]:
    """``-o key=value`` pairs for ``zfs create``."""
    args: list[str] = []
    for key, value in properties.items():
        args += ["-o", f"{key}={_zfs_value(value)}"]
    return args


def zfs_raidz_wanted(
    pool: str, root_properties: dict[str, Any], datasets: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The properties the role manages: the pool root's, and each dataset's with its mountpoint."""
    wanted = [{"dataset": pool, "properties": dict(root_properties)}]
    for ds in datasets:
        props = {"mountpoint": ds["mountpoint"], **(ds.get("properties") or {})}
        wanted.append({"dataset": f"{pool}/{ds['name']}", "properties": props})
    return wanted


def zfs_property_names(wanted: list[dict[str, Any]]) -> list[str]:
    """Every property named in the wanted state, sorted."""
    return sorted({key for item in wanted for key in item["properties"]})


def zfs_property_changes(zfs_get_output: str, wanted: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The ``zfs set`` needed to turn ``zfs get -H -o name,property,value`` into ``wanted``."""
    current: dict[tuple[str, str], str] = {}
    for line in zfs_get_output.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            current[(parts[0], parts[1])] = parts[2]
    changes = []
    for item in wanted:
        for key, value in item["properties"].items():
            want = _zfs_value(value)
            have = current.get((item["dataset"], key))
            if have != want:
                changes.append(
                    {"dataset": item["dataset"], "property": key, "value": want, "current": str(have)}
                )
    return changes


_IMPORT_FIELD = re.compile(r"^\s*(pool|id|state|status|action):\s?(.*)$")


def zpool_importable(output: str) -> list[dict[str, str]]:
    """The pools ``zpool import`` (no arguments) lists: name, id, state, status, action."""
    pools: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    last_key = ""
    for line in output.splitlines():
        m = _IMPORT_FIELD.match(line)
        if m:
            key, value = m[1], m[2].strip()
            if key == "pool":
                current = {"name": value, "id": "", "state": "", "status": "", "action": ""}
                pools.append(current)
            elif current is not None:
                current[key] = value
            last_key = key
        elif current is not None and last_key in ("status", "action") and line.startswith("\t"):
            # status/action wrap onto tab-indented continuation lines.
            current[last_key] = f"{current[last_key]} {line.strip()}".strip()
        elif line.strip().startswith(("see:", "config:")):
            last_key = ""
    return pools


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "zfs_raidz_drives": zfs_raidz_drives,
            "zfs_raidz_level_for": zfs_raidz_level_for,
            "zpool_importable": zpool_importable,
            "zpool_create_argv": zpool_create_argv,
            "zfs_property_args": zfs_property_args,
            "zfs_property_names": zfs_property_names,
            "zfs_raidz_wanted": zfs_raidz_wanted,
            "zfs_property_changes": zfs_property_changes,
        }
