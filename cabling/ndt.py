"""Import NVIDIA UFM "network design template" (NDT) CSV files, the format UFM cable validation uses."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cabling.errors import CablingInputError
from cabling.inference import build_manifest
from cabling.limits import NDT
from cabling.model import Endpoint, Link, Location, Manifest
from cabling.ports import host_port, is_switch_port, switch_port
from cabling.safetext import spreadsheet_cell
from cabling.speeds import normalize_speed
from cabling.textio import read_text

REQUIRED = ("StartDevice", "StartPort", "EndDevice", "EndPort")
_HOST_IB_PORT = re.compile(r"^IB Port \d+$", re.IGNORECASE)


def load_ndt(paths: list[Path] | list[str]) -> Manifest:
    """Read one or more NDT files (switch-to-host and switch-to-switch) into one manifest."""
    links: list[Link] = []
    locations: dict[str, Location] = {}
    origins: list[tuple[str, int]] = []
    seen: set[frozenset[tuple[str, str]]] = set()
    for path in paths:
        p = Path(path)
        raw = read_text(p, "NDT file", cap=NDT, strict=False, encoding="utf-8-sig")
        for link, line in _parse(raw, str(p), locations):
            # Switch-to-switch NDTs often list each cable from both ends; UFM treats that as one.
            key = frozenset((link.a.key, link.b.key))
            if key in seen:
                continue
            seen.add(key)
            links.append(link)
            origins.append((str(p), line))
    manifest = build_manifest(links, locations)
    names = sorted({src for src, _ in origins})
    manifest.set_origin(names[0] if len(names) == 1 else " + ".join(Path(n).name for n in names), {},
                        [line for _, line in origins], [src for src, _ in origins])
    return manifest


def _parse(text: str, source: str, locations: dict[str, Location]) -> list[tuple[Link, int]]:
    # UFM strips CRs before parsing; bare CRs would otherwise split rows in the middle.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    reader = csv.reader(io.StringIO(text))
    header: dict[str, int] | None = None
    u_cols: list[int] = []
    out: list[tuple[Link, int]] = []
    for row in _rows(reader, source):
        line = reader.line_num
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        if header is None:
            header, u_cols = _header(cells, source, line)
            continue
        if cells[0].startswith("#") and not any(cells[1:]):
            continue
        out.append((_row(cells, header, u_cols, source, line, locations), line))
    if header is None:
        raise CablingInputError(
            "empty NDT file: expected a header row naming " + ", ".join(REQUIRED), file=source, line=1
        )
    if not out:
        raise CablingInputError("NDT file has a header but no links", file=source, line=1)
    return out


def _rows(reader: Any, source: str) -> Iterator[list[str]]:
    try:
        yield from reader
    except csv.Error as exc:  # an oversized field
        raise CablingInputError(f"not a readable CSV file: {exc}", file=source, line=reader.line_num) from None


def _header(cells: list[str], source: str, line: int) -> tuple[dict[str, int], list[int]]:
    names: dict[str, int] = {}
    u_cols: list[int] = []
    for i, cell in enumerate(cells):
        name = cell.removeprefix("#").removeprefix("Fields:").strip()
        if name.casefold() == "u height":
            u_cols.append(i)
        names.setdefault(name.casefold(), i)
    missing = [c for c in REQUIRED if c.casefold() not in names]
    if len(missing) == len(REQUIRED):
        raise CablingInputError(
            f"not a UFM NDT file: the first row {','.join(cells)[:60]!r} is not a header naming "
            + ", ".join(REQUIRED),
            file=source, line=line,
            hint="an NDT starts with '#StartDevice,StartPort,EndDevice,EndPort,LinkType'",
        )
    if missing:
        raise CablingInputError(
            f"NDT header lacks column(s) {', '.join(missing)}", file=source, line=line,
            hint="an NDT header is '#StartDevice,StartPort,EndDevice,EndPort,LinkType'",
        )
    return names, u_cols


def _cell(cells: list[str], header: dict[str, int], name: str) -> str:
    i = header.get(name.casefold())
    return cells[i] if i is not None and i < len(cells) else ""


def _port(device: str, text: str, column: str, source: str, line: int) -> str:
    sw = switch_port(text)
    if sw is not None:
        return sw
    if _HOST_IB_PORT.match(text) or text.casefold().startswith(device.casefold() + " "):
        return host_port(device, text)
    raise CablingInputError(
        f"cannot read {column} {text!r} of device {device!r}: expected 'Port <n>' (switch), "
        "'Blade <b>_Port <asic>/<port>' (director) or '<host> <hca>' (host)",
        file=source, line=line,
    )


def _u(text: str) -> int | None:
    m = re.fullmatch(r"U?(\d{1,9})", text.strip(), re.IGNORECASE)
    return int(m.group(1)) if m else None


def _row(
    cells: list[str], header: dict[str, int], u_cols: list[int], source: str, line: int,
    locations: dict[str, Location],
) -> Link:
    a_dev, b_dev = _cell(cells, header, "StartDevice"), _cell(cells, header, "EndDevice")
    if not a_dev or not b_dev:
        raise CablingInputError("StartDevice and EndDevice must not be empty", file=source, line=line)
    a_port = _port(a_dev, _cell(cells, header, "StartPort"), "StartPort", source, line)
    b_port = _port(b_dev, _cell(cells, header, "EndPort"), "EndPort", source, line)
    for dev, loc_col, u_idx in ((a_dev, "StartDeviceLocation", 0), (b_dev, "EndDeviceLocation", 1)):
        rack = _cell(cells, header, loc_col)
        u = _u(cells[u_cols[u_idx]]) if u_idx < len(u_cols) and u_cols[u_idx] < len(cells) else None
        if rack and dev.casefold() not in locations:
            locations[dev.casefold()] = Location(rack=rack, u=u)
    speed_text = _cell(cells, header, "Speed")
    length_text = _cell(cells, header, "Cable Length")
    try:
        speed = normalize_speed(speed_text) if speed_text else None
        length = float(length_text) if length_text else None
        if length is not None and not (math.isfinite(length) and length >= 0):
            raise ValueError(f"Cable Length {length_text!r} is not a length in metres")
        return Link(a=Endpoint(device=a_dev, port=a_port), b=Endpoint(device=b_dev, port=b_port),
                    speed=speed, length_m=length)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CablingInputError(f"[{'.'.join(map(str, err['loc']))}] {err['msg']}", file=source, line=line) from None
    except ValueError as exc:
        raise CablingInputError(str(exc), file=source, line=line) from None


def export_ndt(manifest: Manifest) -> str:
    """The manifest as one UFM NDT file, for UFM's own cable validation (host ends first)."""
    devices = manifest.device_map()

    def is_switch(ep: Endpoint) -> bool:
        dev = devices.get(ep.device.casefold())
        return dev.kind == "switch" if dev is not None else is_switch_port(ep.port)

    def port_text(ep: Endpoint) -> str:
        if not is_switch(ep):
            return f"{ep.device} {ep.port}"
        m = re.fullmatch(r"L(\d+)/U(\d+)/(\d+)", ep.port)
        if m:
            return f"Blade {m.group(1)}_Port {m.group(2)}/{m.group(3)}"
        return f"Port {ep.port}"

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["#StartDevice", "StartPort", "EndDevice", "EndPort", "LinkType"])
    for lk in manifest.links:
        a, b = (lk.b, lk.a) if is_switch(lk.a) and not is_switch(lk.b) else (lk.a, lk.b)
        w.writerow([spreadsheet_cell(c) for c in (a.device, port_text(a), b.device, port_text(b), "Data")])
    return buf.getvalue()
