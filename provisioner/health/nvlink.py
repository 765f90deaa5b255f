"""Parsers of ``nvidia-smi nvlink --status`` and ``nvidia-smi nvlink -e`` (error counters)."""

from __future__ import annotations

import re
from dataclasses import dataclass


# What a healthy GPU of each SXM model shows in ``nvidia-smi nvlink --status``: link count and
# per-link speed as nvidia-smi prints it (one direction). Sources: NVIDIA's H100/H800/A100/A800
# and Blackwell datasheets (NVLink4 900 GB/s = 18 links, H800 400 GB/s = 8 links; NVLink3 A100
# 600 GB/s = 12 links, A800 400 GB/s = 8 links; NVLink5 1.8 TB/s = 18 links on B200/B300/GB200/
# GB300), the recordings in tests/fixtures/corpus (26.562 GB/s per NVLink4 link, 25 GB/s per
# NVLink3 link) and a public B300 SXM6 listing (driver 610: 53.125 GB/s per NVLink5 link).
# First match wins: "H800" before "H100", "GB200" before "B200".
@dataclass(frozen=True)
class NvlinkSpec:
    """Links per GPU and per-link speed (GB/s) a healthy GPU of a model reports."""

    links: int
    speed_gbs: float


NVLINK_BY_MODEL: tuple[tuple[str, NvlinkSpec], ...] = (
    ("GB300", NvlinkSpec(18, 53.125)),
    ("GB200", NvlinkSpec(18, 53.125)),
    ("B300", NvlinkSpec(18, 53.125)),
    ("B200", NvlinkSpec(18, 53.125)),
    ("H800", NvlinkSpec(8, 26.562)),
    ("H100 80GB HBM3", NvlinkSpec(18, 26.562)),  # H100 SXM5 (the PCIe card prints "H100 PCIe")
    ("H100 SXM", NvlinkSpec(18, 26.562)),
    ("H200", NvlinkSpec(18, 26.562)),  # H200 SXM (141GB HBM3e); the NVL card differs
    ("A800-SXM", NvlinkSpec(8, 25.0)),
    ("A100-SXM", NvlinkSpec(12, 25.0)),
)


# PCIe cards ("H100 PCIe", "H800 PCIe") and NVL cards ("H100 NVL", "H200 NVL") link through
# bridges with fewer links: they are judged against the host's own GPUs instead.
_NOT_SXM = ("pcie", "nvl")


def nvlink_spec(product: str | None) -> NvlinkSpec | None:
    """The table entry for a GPU product name (``nvidia-smi``'s "Product Name"), if known."""
    if product and any(word in product.lower().split() for word in _NOT_SXM):
        return None
    for needle, spec in NVLINK_BY_MODEL:
        if product and needle.lower() in product.lower():
            return spec
    return None

_GPU = re.compile(r"^GPU (?P<idx>[0-9]{1,9}): (?P<name>.*?) \(UUID: (?P<uuid>[^)]+)\)")
_LINK_SPEED = re.compile(r"^\s*Link (?P<link>[0-9]{1,9}): (?P<value>.*)$")
_LINK_COUNTER = re.compile(r"^\s*Link (?P<link>[0-9]{1,9}): (?P<counter>[A-Za-z ]+?): (?P<value>[0-9]{1,30})\s*$")


@dataclass
class NvLink:
    """One NVLink of one GPU: its speed (GB/s) or None when inactive."""

    gpu: int
    link: int
    speed_gbs: float | None
    raw: str


def parse_nvlink_status(text: str) -> dict[int, list[NvLink]]:
    """``nvidia-smi nvlink --status`` -> {gpu index: links}; "<inactive>" links have no speed."""
    out: dict[int, list[NvLink]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        g = _GPU.match(line)
        if g:
            gpu = int(g.group("idx"))
            out[gpu] = []
            continue
        m = _LINK_SPEED.match(line)
        if m and gpu is not None:
            value = m.group("value").strip()
            s = re.match(r"([0-9]{1,6}(?:\.[0-9]{1,6})?) GB/s", value)
            out[gpu].append(NvLink(gpu, int(m.group("link")), float(s.group(1)) if s else None, value))
    return out


def parse_nvlink_names(text: str) -> dict[int, str]:
    """``nvidia-smi nvlink --status`` -> {gpu index: product name} from the "GPU n: NAME" lines."""
    return {int(g.group("idx")): g.group("name") for g in map(_GPU.match, text.splitlines()) if g}


def parse_nvlink_errors(text: str) -> dict[str, int]:
    """``nvidia-smi nvlink -e`` -> {"gpu0/link3/CRC Errors": n}."""
    out: dict[str, int] = {}
    gpu: int | None = None
    for line in text.splitlines():
        g = _GPU.match(line)
        if g:
            gpu = int(g.group("idx"))
            continue
        m = _LINK_COUNTER.match(line)
        if m and gpu is not None:
            out[f"gpu{gpu}/link{m.group('link')}/{m.group('counter')}"] = int(m.group("value"))
    return out
