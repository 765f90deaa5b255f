"""Ubuntu autoinstall user-data: the root disk by its hint, static network, NTP, apt proxy, and
callbacks to the deploy server from early-, late- and error-commands.

How subiquity compares a ``storage: layout: match`` (subiquity/models/storage.py, read, not
copied): every key is a case-sensitive glob (``fnmatch.fnmatchcase``) against a udev property
of the disk: ``serial`` against ``ID_SERIAL`` ("<model>_<serial>" on ATA/NVMe, the bare serial on
virtio, "3<naa>" on SAS), ``model`` against ``ID_MODEL`` (ata_id/scsi_id replace each run of
blanks with one "_"; the NVMe rule copies the sysfs model with its spaces), so a blank or "_"
in a hint becomes ``[_ ]``,
``id_path`` against ``ID_PATH`` (the /dev/disk/by-path name), ``path`` against the kernel path
(/dev/sda), never a /dev/disk/by-id link. There is no ``wwn`` key; a WWN hint therefore gets a
placeholder ``path`` that the early-command guard rewrites in /autoinstall.yaml (re-read after
the early-commands) to the one disk it resolved.

Subiquity picks "an arbitrary disk" when a match fits several, so the early-command runs the
same disk-selection script as the deploy ramdisk, with the installer's own globs against the
installer's own udev properties, and fails the install (reporting the candidates) unless the
hint and the match both select exactly the same single disk.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from provisioner.deploy.cloudinit import SeedSpec, network_config_dict, user_data_dict
from provisioner.exceptions import InputError
from provisioner.inventory.spec import RootDiskHint


@dataclass(frozen=True)
class CallbackSpec:
    """Where and how the installer reports back."""

    base_url: str  # e.g. http://198.18.254.1:8080/callback/gpu-r01-u02
    token: str
    pick_disk_url: str  # the disk-selection script served by the deploy server


# Rewritten by the early-command guard to the resolved disk (e.g. /dev/sda); matches no disk
# until then, so an install without the guard fails instead of guessing.
ROOT_DISK_PLACEHOLDER = "/dev/provisioner-root-disk"
# A mirrored root: the guard resolves exactly two disks and writes them over "<prefix>0/1".
MIRROR_PREFIX = "/dev/provisioner-root-disk-"
MIRROR_DISKS = (f"{MIRROR_PREFIX}0", f"{MIRROR_PREFIX}1")
_ACTION_TYPES = {"disk", "partition", "raid", "format", "mount"}


def mirrored_storage() -> dict[str, Any]:
    """A curtin ``storage: config`` for a RAID1 root over the two disks the guard resolves
    (UEFI: an ESP on each disk, both grub targets; the rest of each disk in md0, ext4 on /).
    curtin finds a disk action's ``path`` among each disk's DEVNAME/DEVLINKS."""
    config: list[dict[str, Any]] = []
    for i, path in enumerate(MIRROR_DISKS):
        config += [
            {"type": "disk", "id": f"root-disk-{i}", "path": path, "ptable": "gpt",
             "wipe": "superblock-recursive", "preserve": False},
            {"type": "partition", "id": f"esp-{i}", "device": f"root-disk-{i}", "number": 1,
             "size": "1G", "flag": "boot", "grub_device": True, "wipe": "superblock",
             "preserve": False},
            {"type": "partition", "id": f"md-part-{i}", "device": f"root-disk-{i}", "number": 2,
             "size": -1, "wipe": "superblock", "preserve": False},
            {"type": "format", "id": f"fmt-esp-{i}", "volume": f"esp-{i}", "fstype": "fat32",
             "preserve": False},
        ]
    config += [
        {"type": "raid", "id": "md-root", "name": "md0", "raidlevel": 1,
         "devices": ["md-part-0", "md-part-1"], "preserve": False},
        {"type": "format", "id": "fmt-root", "volume": "md-root", "fstype": "ext4", "preserve": False},
        {"type": "mount", "id": "mnt-root", "device": "fmt-root", "path": "/"},
        {"type": "mount", "id": "mnt-esp", "device": "fmt-esp-0", "path": "/boot/efi"},
    ]
    return {"config": config, "swap": {"size": 0}}


def glob_literal(value: str) -> str:
    """``value`` as an fnmatch/sh-case pattern matching only itself ("*", "?", "[" bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", value)


def glob_words(value: str) -> str:
    """A model/serial as a glob matching udev's spellings: each blank or "_" run is ``[_ ]``."""
    return "[_ ]".join(glob_literal(w) for w in re.split(r"[\s_]+", value.strip()) if w)


def match_spec(hint: RootDiskHint | None) -> dict[str, Any]:
    """Subiquity's storage ``match`` for a root-disk hint, keyed as subiquity compares them."""
    if hint is None:
        raise InputError(
            "autoinstall needs a root-disk hint: without one subiquity picks the largest disk, "
            "which may be a data disk",
            hint="set profiles.<profile>.root_disk or the host's root_disk in the site file",
        )
    match: dict[str, Any] = {}
    if hint.serial:
        # ID_SERIAL is "<model>_<serial>" on ATA/NVMe disks and the bare serial on virtio
        match["serial"] = "*" + glob_words(hint.serial)
    if hint.by_path:
        match["id_path"] = glob_literal(hint.by_path.removeprefix("/dev/disk/by-path/"))
    if hint.wwn:
        match["path"] = ROOT_DISK_PLACEHOLDER
    if hint.model:
        match["model"] = glob_words(hint.model)
    if not match:
        # Size bounds only: subiquity has no bound keys ("size: smallest" takes the smallest
        # disk of any size, a USB stick included), so the guard pins the disk it resolved.
        match["path"] = ROOT_DISK_PLACEHOLDER
    return match


def _hint_args(hint: RootDiskHint | None, match: dict[str, Any] | None = None,
               mirror: bool = False) -> str:
    args: list[str] = []
    if hint is not None:
        for key, flag in (
            ("serial", "--serial"),
            ("wwn", "--wwn"),
            ("by_path", "--by-path"),
            ("model", "--model"),
            ("size_gb_min", "--min-gb"),
            ("size_gb_max", "--max-gb"),
        ):
            value = getattr(hint, key)
            if value is not None:
                args += [flag, str(value)]
    for key, flag in (("serial", "--match-serial"), ("model", "--match-model"),
                      ("id_path", "--match-id-path")):
        if match and key in match:
            args += [flag, str(match[key])]
    if match and match.get("path") == ROOT_DISK_PLACEHOLDER:
        args += ["--pin", "/autoinstall.yaml", "--placeholder", ROOT_DISK_PLACEHOLDER]
    if mirror:
        args += ["--count", "2", "--pin", "/autoinstall.yaml", "--placeholder", MIRROR_PREFIX]
    return " ".join(shlex.quote(a) for a in args)


def _post(cb: CallbackSpec, kind: str, data: str) -> str:
    # the installer environment has curl; the token goes in a header, never in a URL
    return (
        f"curl -fsS -m 30 -X POST -H 'Authorization: Bearer {cb.token}' "
        f"--data-binary {data} {cb.base_url}/{kind} || true"
    )


def autoinstall_dict(
    seed: SeedSpec, hint: RootDiskHint | None, callback: CallbackSpec, *, mirror: bool = False
) -> dict[str, Any]:
    """The mapping that goes under ``autoinstall:`` (validated against subiquity's schema).
    ``mirror``: RAID1 root over the two disks the hint selects (curtin storage config)."""
    match = match_spec(hint)
    storage = mirrored_storage() if mirror else {"layout": {"name": "direct", "match": match}}
    args = _hint_args(hint, None, mirror=True) if mirror else _hint_args(hint, match)
    guard = (
        f"curl -fsS -m 60 -o /tmp/pick-disk.sh {callback.pick_disk_url} && "
        f"sh /tmp/pick-disk.sh {args} > /tmp/pick-disk.out 2>&1 || "
        f"{{ {_post(callback, 'failed', '@/tmp/pick-disk.out')}; exit 1; }}"
    )
    target_user_data = user_data_dict(seed)
    doc: dict[str, Any] = {
        "version": 1,
        "early-commands": [
            _post(callback, "started", "'installer started'"),
            ["sh", "-c", guard],
        ],
        "locale": "en_US.UTF-8",
        "keyboard": {"layout": "us"},
        "network": network_config_dict(seed),
        "storage": storage,
        "ssh": {
            "install-server": True,
            "allow-pw": False,
            "authorized-keys": list(seed.ssh_authorized_keys),
        },
        # identity is left out: the target's users come from user-data, so no password exists
        "user-data": target_user_data,
        "late-commands": [
            [
                "sh",
                "-c",
                "tail -c 60000 /var/log/installer/subiquity-server-debug.log > /tmp/ai.log "
                "2>/dev/null; " + _post(callback, "finished", "@/tmp/ai.log"),
            ]
        ],
        "error-commands": [
            [
                "sh",
                "-c",
                "tail -c 60000 /var/log/installer/subiquity-server-debug.log > /tmp/ai.log "
                "2>/dev/null; " + _post(callback, "failed", "@/tmp/ai.log"),
            ]
        ],
        # power off rather than reboot: the backend then sets a one-time disk boot and powers on
        "shutdown": "poweroff",
    }
    if seed.apt_proxy:
        doc["proxy"] = seed.apt_proxy
    return doc


_MATCH_KEYS = {"serial", "model", "id_path", "path"}


def _check_config(config: Any) -> None:
    """A mirrored root's curtin config: the two guard-resolved disks and nothing else."""
    if not isinstance(config, list) or not all(isinstance(a, dict) for a in config):
        raise InputError("autoinstall storage config must be a list of actions")
    ids = {a.get("id") for a in config}
    disks = [a for a in config if a.get("type") == "disk"]
    bad_types = sorted({str(a.get("type")) for a in config} - _ACTION_TYPES)
    if bad_types:
        raise InputError(f"autoinstall storage config has action types {bad_types}")
    if sorted(str(d.get("path")) for d in disks) != sorted(MIRROR_DISKS) or any(
            set(d) & {"serial", "wwn", "model", "device_id"} for d in disks):
        raise InputError(
            "autoinstall storage config must name exactly the two root disks the guard resolves "
            f"({', '.join(MIRROR_DISKS)}); found {[d.get('path') for d in disks]}",
            hint="a data disk in the config would be wiped by the installer")
    for a in config:
        refs = [a.get(k) for k in ("device", "volume") if k in a] + list(a.get("devices", []))
        missing = [r for r in refs if r not in ids]
        if missing:
            raise InputError(f"autoinstall storage action {a.get('id')!r} refers to {missing}, "
                             "which the config does not define")


def check_storage(doc: dict[str, Any], hint: RootDiskHint | None,
                  data_disk_model: str | None = None, *, mirror: bool = False) -> None:
    """Our own storage check of generated autoinstall (subiquity's schema leaves ``storage``
    untyped): one direct layout whose match is exactly the hint's, never fitting data disks,
    or a mirrored root's config over the two guard-resolved disks only."""
    storage = doc.get("storage")
    if mirror:
        if not isinstance(storage, dict) or not set(storage) <= {"config", "swap"}:
            raise InputError("a mirrored root needs a storage config (no layout)")
        _check_config(storage.get("config"))
        match_spec(hint)  # a mirror still needs a hint: the guard resolves the disks by it
        return
    if not isinstance(storage, dict) or set(storage) != {"layout"}:
        raise InputError("autoinstall storage must be a single layout (a storage config only "
                         "for a mirrored root)",
                         hint="report this: the generated user-data is malformed")
    layout = storage["layout"]
    match = layout.get("match") if isinstance(layout, dict) else None
    if not isinstance(match, dict) or not match or set(match) - _MATCH_KEYS:
        raise InputError(f"autoinstall root-disk match {match!r} uses keys subiquity does not "
                         f"compare ({', '.join(sorted(_MATCH_KEYS))})")
    if match != match_spec(hint):
        raise InputError(f"autoinstall root-disk match {match!r} is not the hint's "
                         f"{match_spec(hint)!r}")
    if "path" in match and match["path"] != ROOT_DISK_PLACEHOLDER:
        raise InputError(f"autoinstall match path {match['path']!r} is not a kernel path the "
                         "guard resolved", hint="give the root disk by wwn/serial/by_path")
    narrowing = {"serial", "id_path", "path"} & set(match)
    if data_disk_model and "model" in match and not narrowing and any(
            fnmatch.fnmatchcase(m, match["model"])
            for m in (data_disk_model.strip(), "_".join(data_disk_model.split()))):
        raise InputError(
            f"the root-disk model {match['model']!r} also fits the data disks "
            f"({data_disk_model!r}): the installer could write the OS on a data disk",
            hint="add serial, wwn or by_path to the root_disk hint")


def user_data(seed: SeedSpec, hint: RootDiskHint | None, callback: CallbackSpec,
              data_disk_model: str | None = None, *, mirror: bool = False) -> str:
    """The NoCloud user-data the installer fetches: ``#cloud-config`` wrapping ``autoinstall:``."""
    body = {"autoinstall": autoinstall_dict(seed, hint, callback, mirror=mirror)}
    check_storage(body["autoinstall"], hint, data_disk_model, mirror=mirror)
    return "#cloud-config\n" + yaml.safe_dump(body, sort_keys=False, width=1000)
