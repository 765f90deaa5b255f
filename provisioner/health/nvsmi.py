"""Parser of ``nvidia-smi -q`` (text): per-GPU identity, ECC, row remapping, PCIe link, throttling.

The text is an indented tree ("Key : Value" leaves, bare-key sections). Field names moved
between driver branches, so lookups try each known spelling and ignore case and spacing:

| field | spellings seen in recordings |
|---|---|
| ECC mode | "Ecc Mode" (<= 525, e.g. 525.105.17), "ECC Mode" (535+) |
| clock reasons | "Clocks Throttle Reasons" (<= 530), "Clocks Event Reasons" (535+) |
| PCIe max gen | "Max" (all), "Device Max" / "Host Max" (520+) |
| ECC counters | "Single Bit"/"Double Bit" sections (Volta), "SRAM/DRAM (Un)correctable" (Ampere+), |
|  | "SRAM Uncorrectable Parity" / "SRAM Uncorrectable SEC-DED" (550+) |
| reset status | "GPU Reset Status" (550+; absent before; 570+ says "Requested functionality has |
|  | been deprecated" there and states "GPU Recovery Action" instead) |
| module id | "Module ID" (<= 560), "Platform Info" > "Module Id" (565+) |

A GPU the driver cannot query prints an error string instead of a value ("GPU requires reset",
"Unknown Error", "ERR!", bracketed or not). Those are never read as values: a judged field
holding one is recorded in ``Gpu.errors`` so the checks ask for a reset naming the GPU instead
of judging "ECC off" or "wrong model". Fields no check judges may say "Unknown Error" on healthy
GPUs (535 prints "Addressing Mode : Unknown Error" on RTX 4090s) and are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from provisioner.health.errors import ParseError

Tree = dict[str, Any]

_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_LEAF = re.compile(r"^(?P<key>[^:]+?)\s*:\s?(?P<value>.*)$")
_NA = {"N/A", "[N/A]", "Not Supported", "[Not Supported]", "",
       "Requested functionality has been deprecated"}  # 570+ for the "GPU Reset Status" fields
# NVML errors as nvidia-smi prints them in place of a value (nvmlErrorString, "ERR!" in tables).
_ERRORS = {"gpu requires reset", "unknown error", "err!", "gpu is lost"}
# Top-level sections of a GPU block that some check judges; an error string there matters.
JUDGED_SECTIONS = ("Product Name", "Serial Number", "GPU UUID", "VBIOS Version", "ECC Mode",
                   "ECC Errors", "Remapped Rows", "GPU Reset Status", "GPU Recovery Action")


def _fold(key: str) -> str:
    return " ".join(key.lower().split())


_JUDGED_FOLDED = frozenset(_fold(s) for s in JUDGED_SECTIONS)


def is_error_value(value: Any) -> bool:
    """Whether nvidia-smi printed an NVML error instead of a value ("[GPU requires reset]")."""
    return isinstance(value, str) and value.strip().strip("[]").strip().lower() in _ERRORS


def _no_value(value: Any) -> bool:
    return not isinstance(value, str) or value in _NA or is_error_value(value)


def normalize_bus_id(bus: str) -> str:
    """Canonical PCI address "dddd:bb:dd.f" in lower case, from any nvidia-smi/lspci/dmesg form."""
    bus = bus.strip().lower()
    if bus.startswith("pci:"):
        bus = bus[4:]
    parts = bus.split(":")
    if len(parts) == 2 and len(parts[0]) >= 4 and "." not in parts[1]:
        parts = [*parts, "00"]  # "dddd:bb" (a short Xid address): device 0 of that bus
    elif len(parts) == 2:  # "bb:dd.f" (lspci without -D)
        parts = ["0000", *parts]
    if len(parts) < 3:
        return bus  # not an address (a cut log line): keep it as it is, never crash
    domain = parts[0][-4:].rjust(4, "0")
    dev_fn = parts[2] if "." in parts[2] else f"{parts[2]}.0"
    return f"{domain}:{parts[1].rjust(2, '0')}:{dev_fn}"


def parse_tree(lines: list[str]) -> Tree:
    """Turn indented "Key : Value" lines into nested dicts (bare keys open a section)."""
    root: Tree = {}
    stack: list[tuple[int, Tree]] = [(-1, root)]
    for raw in lines:
        raw = raw.expandtabs(4)  # a tab-indented copy keeps its tree
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        text = raw.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        m = _LEAF.match(text)
        if m and m.group("value") != "":
            parent[m.group("key").strip()] = m.group("value").strip()
        else:
            key = m.group("key").strip() if m else text
            child: Tree = {}
            parent[key] = child
            stack.append((indent, child))
    return root


def _child(node: Any, key: str) -> Any:
    """``node[key]``, matching case and runs of spaces loosely ("Ecc Mode" is "ECC Mode")."""
    if not isinstance(node, dict):
        return None
    if key in node:
        return node[key]
    want = _fold(key)
    for k, v in node.items():
        if _fold(k) == want:
            return v
    return None


def _get(tree: Tree, *path: str) -> Any:
    node: Any = tree
    for p in path:
        node = _child(node, p)
        if node is None:
            return None
    return node


def _first(tree: Tree, *paths: tuple[str, ...]) -> Any:
    for p in paths:
        v = _get(tree, *p)
        if v is not None:
            return v
    return None


def _int(value: Any) -> int | None:
    if _no_value(value):
        return None
    m = re.match(r"^-?[0-9]{1,30}", value.strip())
    return int(m.group(0)) if m else None


def _yes(value: Any) -> bool | None:
    if _no_value(value):
        return None
    return value.strip().lower() in ("yes", "enabled", "active", "true")


def _str(value: Any) -> str | None:
    if _no_value(value):
        return None
    return str(value)


@dataclass
class Gpu:
    """The facts one health check needs about one GPU."""

    bus_id: str
    product: str | None
    serial: str | None
    uuid: str | None
    vbios: str | None
    module_id: int | None
    ecc_current: bool | None
    ecc_pending: bool | None
    uncorrectable_volatile: int | None  # DRAM + SRAM uncorrectable since driver load
    uncorrectable_aggregate: int | None
    remap_uncorrectable: int | None
    remap_pending: bool | None  # None where the GPU has no row remapper (pre-Ampere)
    remap_failure: bool | None
    reset_required: bool | None
    drain_recommended: bool | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    width_current: int | None
    width_max: int | None
    utilization_pct: int | None
    throttle_active: list[str] = field(default_factory=list)
    recovery_action: str | None = None  # "GPU Recovery Action" (550+): None, Reset, Reboot, ...
    fabric_state: str | None = None
    fabric_status: str | None = None
    errors: dict[str, str] = field(default_factory=dict)  # judged field path -> NVML error string

    def errors_in(self, *sections: str) -> list[str]:
        """"Path: error" for the judged fields under these top-level sections."""
        want = {_fold(s) for s in sections}
        return [f"{k}: {v}" for k, v in self.errors.items() if _fold(k.split(" > ")[0]) in want]

    def label(self) -> str:
        """How a technician finds the part: PCI address, module slot and board serial."""
        bits = [f"GPU at PCI {self.bus_id}"]
        if self.module_id is not None:
            bits.append(f"module {self.module_id}")
        if self.serial:
            bits.append(f"serial {self.serial}")
        return " ".join(bits)


@dataclass
class NvsmiReport:
    """A whole ``nvidia-smi -q`` document."""

    driver_version: str | None
    attached: int
    gpus: list[Gpu]  # one per PCI address: a block printed twice is kept once
    duplicates: list[str] = field(default_factory=list)  # addresses whose block came twice

    @property
    def truncated(self) -> bool:
        """Fewer distinct GPUs than "Attached GPUs" says: the output was cut (or a GPU hung)."""
        return len(self.gpus) < self.attached


def _sum_uncorrectable(ecc: Any) -> int | None:
    """Add up every uncorrectable counter in an "ECC Errors > Volatile/Aggregate" section."""
    if not isinstance(ecc, dict):
        return None
    total = 0
    seen = False
    for key, value in ecc.items():
        if isinstance(value, dict):
            if key.startswith("Double Bit"):
                n = _int(value.get("Total"))
                if n is not None:
                    total, seen = total + n, True
            continue
        if "Uncorrectable" in key:
            n = _int(value)
            if n is not None:
                total, seen = total + n, True
    return total if seen else None


def _throttle(gpu: Tree) -> list[str]:
    section = _first(gpu, ("Clocks Event Reasons",), ("Clocks Throttle Reasons",))
    active: list[str] = []

    def walk(node: Tree) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value)
            elif _yes(value) and key not in active:
                active.append(key)

    if isinstance(section, dict):
        walk(section)
    return active


def _error_fields(t: Tree) -> dict[str, str]:
    """Judged fields (JUDGED_SECTIONS, walked down) whose value is an NVML error string."""
    out: dict[str, str] = {}

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*path, key])
        elif is_error_value(node):
            out[" > ".join(path)] = str(node).strip()

    for key, value in t.items():
        if _fold(key) in _JUDGED_FOLDED:
            walk(value, [key])
    return out


def _gpu(bus: str, t: Tree) -> Gpu:
    width = _get(t, "PCI", "GPU Link Info", "Link Width")
    gen = _get(t, "PCI", "GPU Link Info", "PCIe Generation")
    return Gpu(
        bus_id=normalize_bus_id(bus),
        product=_str(_get(t, "Product Name")),
        serial=_str(_get(t, "Serial Number")),
        uuid=_str(_get(t, "GPU UUID")),
        vbios=_str(_get(t, "VBIOS Version")),
        module_id=_int(_first(t, ("Module ID",), ("Platform Info", "Module Id"))),
        ecc_current=_yes(_get(t, "ECC Mode", "Current")),
        ecc_pending=_yes(_get(t, "ECC Mode", "Pending")),
        uncorrectable_volatile=_sum_uncorrectable(_get(t, "ECC Errors", "Volatile")),
        uncorrectable_aggregate=_sum_uncorrectable(_get(t, "ECC Errors", "Aggregate")),
        remap_uncorrectable=_int(_get(t, "Remapped Rows", "Uncorrectable Error")),
        remap_pending=_yes(_get(t, "Remapped Rows", "Pending")),
        remap_failure=_yes(_get(t, "Remapped Rows", "Remapping Failure Occurred")),
        reset_required=_yes(_get(t, "GPU Reset Status", "Reset Required")),
        drain_recommended=_yes(_get(t, "GPU Reset Status", "Drain and Reset Recommended")),
        recovery_action=_str(_get(t, "GPU Recovery Action")),
        pcie_gen_current=_int(_get(gen, "Current")) if isinstance(gen, dict) else None,
        pcie_gen_max=_int(_first(gen, ("Device Max",), ("Max",))) if isinstance(gen, dict) else None,
        width_current=_int(_get(width, "Current")) if isinstance(width, dict) else None,
        width_max=_int(_get(width, "Max")) if isinstance(width, dict) else None,
        utilization_pct=_int(_get(t, "Utilization", "GPU")),
        throttle_active=_throttle(t),
        fabric_state=_str(_get(t, "Fabric", "State")),
        fabric_status=_str(_get(t, "Fabric", "Status")),
        errors=_error_fields(t),
    )


def parse_nvsmi(text: str) -> NvsmiReport:
    """Parse ``nvidia-smi -q``; raises ParseError when the text is not such a document."""
    lines = text.splitlines()
    header: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        m = _GPU_HEADER.match(line)
        if m:
            blocks.append((m.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            header.append(line)
    top = parse_tree([ln for ln in header if not ln.startswith("=")])
    attached = _int(_get(top, "Attached GPUs"))
    if attached is None:
        raise ParseError("nvidia-smi -q", "no 'Attached GPUs' line; is this nvidia-smi -q output?")
    gpus: dict[str, Gpu] = {}
    duplicates: list[str] = []
    for bus, body in blocks:
        gpu = _gpu(bus, parse_tree(body))
        if gpu.bus_id in gpus:  # the same GPU twice must not stand in for a missing one
            duplicates.append(gpu.bus_id)
            continue
        gpus[gpu.bus_id] = gpu
    return NvsmiReport(driver_version=_str(_get(top, "Driver Version")), attached=attached,
                       gpus=list(gpus.values()), duplicates=duplicates)
