"""Xid / SXid events from the kernel log, classified by NVIDIA's Xid catalogue action buckets.

The table below follows the "Resolution Bucket (Immediate Action)" column of NVIDIA's Xid
catalogue (docs.nvidia.com/deploy/xid-errors) for Ampere/Hopper, folded into five buckets.
Any timestamp prefix works (``dmesg -T``, ``--time-format=iso``, journald, raw /dev/kmsg):
the parser anchors on the ``NVRM: Xid`` / ``SXid`` text, not on the prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from provisioner.health.nvsmi import normalize_bus_id


class XidAction(StrEnum):
    """NVIDIA's immediate-action buckets, as this tool acts on them."""

    IGNORE = "ignore"
    WORKFLOW = "workflow"  # RESTART_APP and WORKFLOW_*: an application or job fault
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"  # RESTART_BM / RESTART_VM
    CONTACT_SUPPORT = "contact_support"  # hardware: open a repair ticket naming the GPU
    UNKNOWN = "unknown"


_A = XidAction
# code: (mnemonic or short description, immediate action)
XID_CATALOGUE: dict[int, tuple[str, XidAction]] = {
    8: ("GPU stopped processing (FIFO idle timeout)", _A.WORKFLOW),
    13: ("Graphics engine exception", _A.WORKFLOW),
    31: ("GPU memory page fault", _A.WORKFLOW),
    32: ("Invalid or corrupted push buffer stream", _A.WORKFLOW),
    38: ("Driver firmware error", _A.RESET_GPU),
    43: ("GPU stopped processing (channel reset)", _A.WORKFLOW),
    44: ("Graphics engine fault during context switch", _A.RESET_GPU),
    45: ("Preemptive cleanup due to previous errors", _A.IGNORE),
    48: ("Double bit ECC error (DBE)", _A.RESET_GPU),
    54: ("Auxiliary power is not connected", _A.CONTACT_SUPPORT),
    56: ("Display engine error", _A.IGNORE),
    57: ("Error programming video memory interface", _A.CONTACT_SUPPORT),
    61: ("Internal micro-controller breakpoint/warning", _A.RESET_GPU),
    62: ("Internal micro-controller halt", _A.RESET_GPU),
    63: ("Row remapping / page retirement recorded", _A.RESET_GPU),
    64: ("Row remapping / page retirement failure", _A.CONTACT_SUPPORT),
    68: ("Video processor exception", _A.WORKFLOW),
    69: ("Graphics engine class error", _A.WORKFLOW),
    74: ("NVLink error", _A.RESET_GPU),
    79: ("GPU has fallen off the bus", _A.REBOOT),
    92: ("High single-bit ECC error rate", _A.IGNORE),
    94: ("Contained ECC error", _A.WORKFLOW),
    95: ("Uncontained ECC error", _A.RESET_GPU),
    109: ("Context switch timeout", _A.WORKFLOW),
    110: ("Security fault", _A.RESET_GPU),
    119: ("GSP RPC timeout", _A.RESET_GPU),
    120: ("GSP error", _A.RESET_GPU),
    121: ("C2C link error", _A.RESET_GPU),
    122: ("SPI PMU RPC read failure", _A.IGNORE),
    123: ("SPI PMU RPC write failure", _A.IGNORE),
    136: ("GPU initialization failure", _A.REBOOT),
    137: ("NVLink FLA privilege error", _A.WORKFLOW),
    140: ("Unrecovered ECC error", _A.RESET_GPU),
    143: ("GPU initialization failure (GSP)", _A.CONTACT_SUPPORT),
    144: ("NVLink SAW MVB error", _A.RESET_GPU),
    145: ("NVLink RLW error", _A.RESET_GPU),
    146: ("NVLink TLW error", _A.RESET_GPU),
    147: ("NVLink TREX error", _A.RESET_GPU),
    148: ("NVLink NVLPW error", _A.RESET_GPU),
    149: ("NVLink NETIR error", _A.RESET_GPU),
    150: ("NVLink MSE error", _A.RESET_GPU),
    155: ("NVLink SW-defined error", _A.RESET_GPU),
}

# Xid 154 carries the driver's own verdict in its text ("GPU recovery action changed ... to X").
_XID154_ACTION = (
    (re.compile(r"node reboot required", re.I), _A.REBOOT),
    (re.compile(r"drain (p2p )?and reset|gpu reset required", re.I), _A.RESET_GPU),
    (re.compile(r"drain p2p", re.I), _A.RESET_GPU),
    (re.compile(r"\bnone\b", re.I), _A.IGNORE),
)

_XID = re.compile(
    r"NVRM: Xid \((?P<bus>(?:PCI:)?[0-9A-Fa-f]{4}:[0-9A-Fa-f:.]+)\): (?P<code>[0-9]{1,9}),?\s*(?P<msg>.*)$"
)
# e.g. "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Non-fatal, Link 41 egress ..."
_SXID = re.compile(
    r"SXid \((?P<bus>PCI:[0-9A-Fa-f:.]+)\): (?P<code>[0-9]{1,9}),\s*(?P<fatal>Non-fatal|Fatal)?,?\s*(?P<msg>.*)$",
    re.I,
)
# nv-fabricmanager: "detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id ..."
_FM_SXID = re.compile(
    r"detected NVSwitch (?P<fatal>non-fatal|fatal) error (?P<code>[0-9]{1,9}) .*?pci bus id "
    r"(?P<bus>[0-9A-Fa-f:.]+)(?P<msg>.*)$",
    re.I,
)
_GPU_SERIAL = re.compile(r"NVRM: GPU Board Serial Number: (?P<serial>\S+)")
_GPU_AT = re.compile(r"NVRM: GPU at (?P<bus>PCI:[0-9A-Fa-f:.]+): (?P<uuid>GPU-[0-9a-f-]+)")


@dataclass(frozen=True)
class XidEvent:
    """One Xid (GPU) or SXid (NVSwitch) line."""

    kind: str  # "xid" or "sxid"
    code: int
    bus_id: str
    action: XidAction
    description: str
    message: str
    line: str
    fatal: bool = False


def classify_xid(code: int, message: str = "") -> tuple[str, XidAction]:
    """The catalogue entry for an Xid code (154 is judged from the driver's stated action)."""
    if code == 154:
        for pattern, action in _XID154_ACTION:
            if pattern.search(message):
                return "GPU recovery action changed", action
        return "GPU recovery action changed", _A.RESET_GPU
    return XID_CATALOGUE.get(code, (f"Xid {code} (not in this tool's table)", _A.UNKNOWN))


def parse_kernel_log(lines: Iterable[str]) -> list[XidEvent]:
    """All Xid and SXid events in kernel-log lines, in order."""
    events: list[XidEvent] = []
    for raw in lines:
        line = raw.rstrip("\n")
        m = _XID.search(line)
        if m:
            code = int(m.group("code"))
            desc, action = classify_xid(code, m.group("msg"))
            events.append(
                XidEvent("xid", code, normalize_bus_id(m.group("bus")), action, desc,
                         m.group("msg").strip(), line)
            )
            continue
        m = _SXID.search(line) or _FM_SXID.search(line)
        if m:
            fatal = (m.group("fatal") or "").lower() == "fatal"
            events.append(
                XidEvent(
                    "sxid", int(m.group("code")), normalize_bus_id(m.group("bus")),
                    # A fatal SXid leaves the NVSwitch fabric unusable until the system resets.
                    _A.REBOOT if fatal else _A.IGNORE,
                    "NVSwitch fatal error" if fatal else "NVSwitch non-fatal error",
                    m.group("msg").strip(), line, fatal=fatal,
                )
            )
    return events


def serials_from_kernel_log(lines: Iterable[str]) -> dict[str, str]:
    """Map PCI address -> board serial from the driver's "GPU at PCI... / Board Serial" lines."""
    out: dict[str, str] = {}
    last_bus: str | None = None
    for line in lines:
        m = _GPU_AT.search(line)
        if m:
            last_bus = normalize_bus_id(m.group("bus"))
            continue
        s = _GPU_SERIAL.search(line)
        if s and last_bus:
            out[last_bus] = s.group("serial")
            last_bus = None
    return out
