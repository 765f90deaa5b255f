"""Ubuntu autoinstall user-data: the root disk by its hint, static network, NTP, apt proxy, and
callbacks to the deploy server from early-, late- and error-commands.

Subiquity picks "an arbitrary disk" when a match spec fits several, so an early-command runs the
same disk-selection script as the deploy ramdisk and fails the install (reporting the
candidates) unless exactly one disk fits the hint.
"""

from __future__ import annotations

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


def match_spec(hint: RootDiskHint | None) -> dict[str, Any]:
    """Subiquity's storage ``match`` for a root-disk hint."""
    if hint is None:
        raise InputError(
            "autoinstall needs a root-disk hint: without one subiquity picks the largest disk, "
            "which may be a data disk",
            hint="set profiles.<profile>.root_disk or the host's root_disk in the site file",
        )
    match: dict[str, Any] = {}
    if hint.serial:
        # ID_SERIAL is "<model>_<serial>" on most real disks and the bare serial on virtio
        match["serial"] = f"*{hint.serial}"
    if hint.by_path:
        match["id_path"] = hint.by_path.removeprefix("/dev/disk/by-path/")
    if hint.wwn:
        match["path"] = f"/dev/disk/by-id/wwn-{hint.wwn}"
    if hint.model:
        match["model"] = hint.model
    if not match:
        # a size-only rule: the guard enforces the bounds; prefer the smallest fitting disk
        match["size"] = "smallest"
    return match


def _hint_args(hint: RootDiskHint | None) -> str:
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
    return " ".join(shlex.quote(a) for a in args)


def _post(cb: CallbackSpec, kind: str, data: str) -> str:
    # the installer environment has curl; the token goes in a header, never in a URL
    return (
        f"curl -fsS -m 30 -X POST -H 'Authorization: Bearer {cb.token}' "
        f"--data-binary {data} {cb.base_url}/{kind} || true"
    )


def autoinstall_dict(
    seed: SeedSpec, hint: RootDiskHint | None, callback: CallbackSpec
) -> dict[str, Any]:
    """The mapping that goes under ``autoinstall:`` (validated against subiquity's schema)."""
    guard = (
        f"curl -fsS -m 60 -o /tmp/pick-disk.sh {callback.pick_disk_url} && "
        f"sh /tmp/pick-disk.sh {_hint_args(hint)} > /tmp/pick-disk.out 2>&1 || "
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
        "storage": {"layout": {"name": "direct", "match": match_spec(hint)}},
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


def user_data(seed: SeedSpec, hint: RootDiskHint | None, callback: CallbackSpec) -> str:
    """The NoCloud user-data the installer fetches: ``#cloud-config`` wrapping ``autoinstall:``."""
    body = {"autoinstall": autoinstall_dict(seed, hint, callback)}
    return "#cloud-config\n" + yaml.safe_dump(body, sort_keys=False, width=1000)
