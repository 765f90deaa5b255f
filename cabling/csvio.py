"""CSV cable lists for spreadsheets and cable vendors: one row per cable, both ends with location."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from pydantic import ValidationError

from cabling.errors import CablingInputError
from cabling.inference import build_manifest
from cabling.limits import CABLE_LIST
from cabling.model import Endpoint, Link, Location, Manifest
from cabling.safetext import FORMULA_START, from_spreadsheet_cell
from cabling.textio import read_text

COLUMNS = ("cable", "a_device", "a_port", "a_rack", "a_u", "b_device", "b_port", "b_rack", "b_u",
           "type", "length_m", "speed", "width")
REQUIRED = ("a_device", "a_port", "b_device", "b_port")


def is_ndt_csv(text: str) -> bool:
    """Whether CSV text is a UFM NDT (its header names StartDevice) rather than our cable list."""
    head = text[:2000].casefold()
    return "startdevice" in head and "a_device" not in head


def export_csv(manifest: Manifest) -> str:
    """The manifest's links as a cable list (devices' racks and units repeated on each row)."""
    devices = manifest.device_map()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    # Cells a spreadsheet would evaluate (a cable label '=1+1', a rack '-2') get a leading "'";
    # device names cannot start so (cabling.model.check_name).
    for lk in manifest.links:
        row: list[object] = [lk.cable or ""]
        for ep in (lk.a, lk.b):
            loc = devices[ep.device.casefold()].location if ep.device.casefold() in devices else None
            row += [ep.device, ep.port, (loc.rack or "") if loc else "", (loc.u or "") if loc else ""]
        row += [lk.type or "", "" if lk.length_m is None else lk.length_m,
                manifest.expected_speed(lk) or "", manifest.expected_width(lk) or ""]
        w.writerow([("'" + c) if type(c) is str and c.startswith(FORMULA_START) else c for c in row])
    return buf.getvalue()


def import_csv(path: str | Path, base: Manifest | None = None) -> Manifest:
    """Read a cable list; devices come from ``base`` (a YAML manifest) or are inferred from ports."""
    p = Path(path)
    return parse_csv(read_text(p, "CSV cable list", cap=CABLE_LIST, encoding="utf-8-sig"), str(p), base)


def _length(text: str) -> float | None:
    if not text:
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"length_m {text!r} is not a length in metres")
    return value


def parse_csv(text: str, source: str = "<csv>", base: Manifest | None = None) -> Manifest:
    """Parse a cable list; a bad row is an error naming its line and column."""
    # strict: a quote left open (a cell pasted with a stray '"') is an error, not a record that
    # swallows the rest of the file.
    reader = csv.DictReader(io.StringIO(text), strict=True)
    start = [1]
    try:
        return _parse_rows(reader, source, base, start)
    except csv.Error as exc:  # an oversized field, a NUL byte, an unclosed quote
        if "unexpected end of data" in str(exc) or "EOF inside string" in str(exc):
            raise CablingInputError(
                "a quoted cell is never closed: the quote runs to the end of the file", file=source,
                line=start[0], hint='close the quote, or double a quote inside a quoted cell ("")',
            ) from None
        raise CablingInputError(f"not a readable CSV file: {exc}", file=source, line=start[0]) from None


def _header(reader: csv.DictReader[str], source: str) -> list[str]:
    """The header, names compared in lower case; a missing column says why (delimiter, no header)."""
    raw = reader.fieldnames or []
    fields = [f.strip().lower() for f in raw]
    reader.fieldnames = fields
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        hint = f"the header is: {','.join(COLUMNS)} (only {', '.join(REQUIRED)} are required)"
        for sep in (";", "\t", "|"):
            if len(fields) == 1 and all(c in fields[0].split(sep) for c in REQUIRED):
                hint = (f"the cells are separated by {sep!r}, not commas: save the sheet as comma-separated "
                        "CSV (or replace the separator)")
        raise CablingInputError(f"CSV header lacks column(s) {', '.join(missing)}", file=source, line=1,
                                hint=hint)
    return fields


def _parse_rows(reader: csv.DictReader[str], source: str, base: Manifest | None, start: list[int]) -> Manifest:
    fields = _header(reader, source)
    links: list[Link] = []
    lines: list[int | None] = []
    locations: dict[str, Location] = {}
    start[0] = reader.line_num + 1
    for row in reader:
        # A record with a quoted line break spans lines: errors name the line it starts on.
        line = start[0]
        start[0] = reader.line_num + 1
        extra = [c for c in row.pop(None, []) if c.strip()]
        if extra:
            raise CablingInputError(
                f"row has {len(extra)} more cell(s) than the header names ({extra[0][:30]!r}...)",
                file=source, line=line, hint="add the column to the header or remove the extra cells",
            )
        row = {(k or "").strip(): from_spreadsheet_cell((v or "").strip()) for k, v in row.items()}
        if not any(row.values()):
            continue
        for col in REQUIRED:
            if not row.get(col):
                raise CablingInputError(
                    f"{col} (column {fields.index(col) + 1}) is empty", file=source, line=line,
                    hint=f"every cable row needs {', '.join(REQUIRED)}; fill it in or delete the row",
                )
        try:
            for side in ("a", "b"):
                dev, rack, u = row[f"{side}_device"], row.get(f"{side}_rack", ""), row.get(f"{side}_u", "")
                if rack and dev.casefold() not in locations:
                    locations[dev.casefold()] = Location(rack=rack, u=int(u) if u else None)
            links.append(Link(
                a=Endpoint(device=row["a_device"], port=row["a_port"]),
                b=Endpoint(device=row["b_device"], port=row["b_port"]),
                cable=row.get("cable") or None, type=row.get("type") or None,
                length_m=_length(row.get("length_m", "")),
                speed=row.get("speed") or None, width=row.get("width") or None,
            ))
        except ValidationError as exc:
            err = exc.errors()[0]
            col = ".".join(str(x) for x in err["loc"]) or "row"
            raise CablingInputError(f"[{col}] {err['msg']}", file=source, line=line) from None
        except ValueError as exc:
            raise CablingInputError(f"bad value: {exc}", file=source, line=line) from None
        lines.append(line)
    if not links:
        raise CablingInputError("the cable list has a header but no cable rows", file=source,
                                hint="add one row per cable under the header")
    manifest = build_manifest(links, locations, list(base.devices) if base else None)
    if base is not None:
        manifest.fabric = base.fabric
    manifest.set_origin(source, {}, lines)
    return manifest
