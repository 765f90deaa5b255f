"""Parsers of ``nvidia-smi nvlink --status`` and ``nvidia-smi nvlink -e`` (error counters)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_GPU = re.compile(r"^GPU (?P<idx>\d{1,9}): (?P<name>.*?) \(UUID: (?P<uuid>[^)]+)\)")
_LINK_SPEED = re.compile(r"^\s*Link (?P<link>\d{1,9}): (?P<value>.*)$")
_LINK_COUNTER = re.compile(r"^\s*Link (?P<link>\d{1,9}): (?P<counter>[A-Za-z ]+?): (?P<value>\d{1,30})\s*$")


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
            s = re.match(r"(\d{1,6}(?:\.\d{1,6})?) GB/s", value)
            out[gpu].append(NvLink(gpu, int(m.group("link")), float(s.group(1)) if s else None, value))
    return out


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
