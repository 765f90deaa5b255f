"""Parser of ``nvidia-smi topo -m``: GPU/NIC relations (NV#, PIX, PXB, PHB, NODE, SYS) and affinity.

Seen layouts: tab-separated (nvidia-smi's own output, sometimes with an ANSI underline on the
header), space-aligned (copied from a terminal), NIC columns named ``NIC0``.. with a "NIC Legend"
block (drivers 470+) or named by device (``mlx5_0``, older drivers), a trailing "GPU NUMA ID"
column (535+), empty CPU-affinity cells, NIC rows shorter than the header, any number of NIC
columns (NIC0..NIC17 and beyond on B200/GB200 hosts with storage and front-end NICs).

Affinity cells: a CPU list ("0-47,96-143", "0,2,4,6", "48-63") and NUMA nodes as one node, a
range or a list ("1", "6-7", "0,1": a GPU whose PCIe root spans nodes, or NPS/SNC settings), or
"N/A"; Grace hosts (GH200/GB200) also fill "GPU NUMA ID" (the GPU's own memory node). nvidia-smi
pads tab-separated rows with empty cells, so the values are matched to the affinity headers from
the right (an empty CPU Affinity cell is the one that goes missing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from provisioner.health.errors import ParseError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_GPU_LABEL = re.compile(r"^GPU[0-9]+$")
_LEGEND = re.compile(r"^\s*(NIC[0-9]+):\s*(\S+)\s*$")
_NIC_ROW = re.compile(r"^(NIC[0-9]+|mlx[0-9]+_[0-9]+|mlx5_\w+|ib\w+)$")
_RELATION = re.compile(r"^(X|NV[0-9]{1,4}|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
_NODES = re.compile(r"^[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*$")
MAX_CPUS = 65536  # a CPU or node list naming more is not one (hostile input)

# Closest first. SOC is the pre-2017 spelling of SYS.
RELATION_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}


@dataclass
class TopoMatrix:
    """One ``nvidia-smi topo -m``: devices, pairwise relations and each GPU's affinity."""

    gpus: list[str]
    nics: list[str]
    nic_devices: dict[str, str]  # column label -> RDMA device ("NIC0" -> "mlx5_0")
    relation: dict[tuple[str, str], str] = field(default_factory=dict)
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)
    numa_affinity: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    gpu_numa_id: dict[str, tuple[int, ...] | None] = field(default_factory=dict)  # Grace hosts

    def nvlinks(self, a: str, b: str) -> int:
        """Bonded NVLinks between two GPUs ("NV18" -> 18; 0 when they talk over PCIe)."""
        rel = self.relation.get((a, b), "")
        return int(rel[2:]) if rel.startswith("NV") and rel[2:].isdigit() else 0

    def nearest_nics(self, gpu: str) -> tuple[str | None, list[str]]:
        """The closest relation from ``gpu`` to any NIC and the RDMA devices at that distance."""
        best: str | None = None
        devs: list[str] = []
        for nic in self.nics:
            rel = self.relation.get((gpu, nic)) or self.relation.get((nic, gpu))
            if rel not in RELATION_RANK:
                continue
            if best is None or RELATION_RANK[rel] < RELATION_RANK[best]:
                best, devs = rel, []
            if rel == best or RELATION_RANK[rel] == RELATION_RANK[best]:
                devs.append(self.nic_devices.get(nic, nic))
        return best, sorted(devs)


def _cells(line: str, tabbed: bool) -> list[str]:
    if tabbed:
        return [c.strip() for c in line.rstrip("\n").split("\t")]
    return line.split()


def _header(line: str, tabbed: bool) -> list[str]:
    if not tabbed:
        for col in _AFFINITY_COLUMNS:
            line = line.replace(col, col.replace(" ", "_"))
    cells = [c.replace("_", " ") if c.replace("_", " ") in _AFFINITY_COLUMNS else c
             for c in _cells(line, tabbed)]
    return [c for c in cells if c]


def parse_list(cell: str | None) -> tuple[int, ...] | None:
    """ "6-7" -> (6, 7), "0,2-3" -> (0, 2, 3), "1" -> (1,); None for N/A, empty or malformed."""
    if cell is None or not _NODES.match(cell.strip()):
        return None
    out: set[int] = set()
    for part in cell.strip().split(","):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first or last - first > MAX_CPUS or len(out) > MAX_CPUS:
            return None
        out.update(range(first, last + 1))
    return tuple(sorted(out))


def _affinity(extra: list[str], header: list[str]) -> tuple[str | None, tuple[int, ...] | None,
                                                          tuple[int, ...] | None]:
    """CPU affinity, NUMA affinity and GPU NUMA ID from the cells after the relation columns,
    matched to the affinity headers from the right (padding cells dropped)."""
    names = [h for h in header if h in _AFFINITY_COLUMNS]
    values = [c.strip() for c in extra if c.strip()]
    if len(values) > len(names):
        values = values[len(values) - len(names):]
    named = dict(zip(names[len(names) - len(values):], values, strict=True))
    cpu = named.get("CPU Affinity")
    if cpu is not None and parse_list(cpu) is None:
        cpu = None  # "N/A", or not a CPU list at all
    return cpu, parse_list(named.get("NUMA Affinity")), parse_list(named.get("GPU NUMA ID"))


def parse_topo(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m``; ParseError when there is no GPU header row."""
    lines = [_ANSI.sub("", ln) for ln in text.splitlines()]
    head_i = next((i for i, ln in enumerate(lines) if re.search(r"(^|\s)GPU0(\s|$)", ln)), None)
    if head_i is None:
        raise ParseError("nvidia-smi topo -m", "no header row with GPU0; is this topo -m output?")
    tabbed = "\t" in lines[head_i]
    header = _header(lines[head_i], tabbed)
    columns = [h for h in header if h not in _AFFINITY_COLUMNS]
    gpus = [c for c in columns if _GPU_LABEL.match(c)]
    nics = [c for c in columns if not _GPU_LABEL.match(c)]
    topo = TopoMatrix(gpus=gpus, nics=nics, nic_devices={n: n for n in nics})
    for ln in lines[head_i + 1:]:
        legend = _LEGEND.match(ln)
        if legend and legend.group(1) in topo.nic_devices:
            topo.nic_devices[legend.group(1)] = legend.group(2)
            continue
        cells = _cells(ln, tabbed)
        if cells and _NIC_ROW.match(cells[0]) and cells[0] not in columns:
            # A terminal-truncated matrix keeps NIC rows but drops the NIC columns.
            topo.nics.append(cells[0])
            topo.nic_devices[cells[0]] = cells[0]
            columns.append(cells[0])
        if not cells or cells[0] not in columns:
            continue
        row, values = cells[0], cells[1:]
        rels = values[: len(columns)]
        for col, rel in zip(columns, rels, strict=False):  # a short row is cut, not shifted
            if _RELATION.match(rel):
                topo.relation[(row, col)] = rel
        if row in gpus:
            extra = values[len(columns):]
            cpu, numa, gpu_numa = _affinity(extra, header)
            topo.cpu_affinity[row], topo.numa_affinity[row], topo.gpu_numa_id[row] = cpu, numa, gpu_numa
    return topo
