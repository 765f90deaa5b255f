"""Parser of ``nvidia-smi topo -m``: GPU/NIC relations (NV#, PIX, PXB, PHB, NODE, SYS) and affinity.

Seen layouts: tab-separated (nvidia-smi's own output, sometimes with an ANSI underline on the
header), space-aligned (copied from a terminal), NIC columns named ``NIC0``.. with a "NIC Legend"
block (drivers 470+) or named by device (``mlx5_0``, older drivers), a trailing "GPU NUMA ID"
column (535+), empty CPU-affinity cells, NIC rows shorter than the header.
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
_RELATION = re.compile(r"^(X|NV[0-9]+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")

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
    numa_affinity: dict[str, int | None] = field(default_factory=dict)

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


def _affinity(extra: list[str], tabbed: bool, header: list[str]) -> tuple[str | None, int | None]:
    """CPU and NUMA affinity from the cells after the relation columns."""
    if tabbed:
        named = dict(zip([h for h in header if h in _AFFINITY_COLUMNS], extra, strict=False))
        cpu, numa = named.get("CPU Affinity") or None, named.get("NUMA Affinity")
    else:
        vals = [c for c in extra if c]
        cpu = next((v for v in vals if re.fullmatch(r"[0-9,\-]+", v) and ("-" in v or "," in v)), None)
        rest = [v for v in vals if v != cpu]
        numa = rest[0] if rest else None
    n = int(numa) if numa is not None and numa.isdigit() else None
    return cpu, n


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
            topo.cpu_affinity[row], topo.numa_affinity[row] = _affinity(extra, tabbed, header)
    return topo
