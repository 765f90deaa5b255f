"""InfiniBand link speed and width names, and their ordering (to spot links trained too low)."""

from __future__ import annotations

import re

# Per-lane signalling names in generation order; FDR10 sits between QDR and FDR.
SPEEDS: tuple[str, ...] = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
_RANK = {s: i for i, s in enumerate(SPEEDS)}

# Per-lane Gb/s as iblinkinfo prints them.
_LANE_GBPS = {
    "2.5": "SDR",
    "5.0": "DDR",
    "10.0": "QDR",
    "10.3125": "FDR10",
    "14.0625": "FDR",
    "25.78125": "EDR",
    "53.125": "HDR",
    "106.25": "NDR",
    "212.5": "XDR",
}
# Whole-port rates in Gb/s for a 4x port (ibstat "Rate:", NDT "Speed" in Mb/s / 1000).
_PORT_RATE = {10: "SDR", 20: "DDR", 40: "QDR", 56: "FDR", 100: "EDR", 200: "HDR", 400: "NDR", 800: "XDR"}

# The widths InfiniBand defines (PortInfo LinkWidthActive): nothing else trains.
WIDTHS: tuple[str, ...] = ("1x", "2x", "4x", "8x", "12x")
_LANES = {w: int(w[:-1]) for w in WIDTHS}

_IBNET_RE = re.compile(r"^(1|2|4|8|12)x(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)$", re.IGNORECASE)
# rdma-core prints "???" for an extended speed its build does not know (older infiniband-diags on
# an HDR/NDR link) and "??" for an unknown width; the other half is still the port's own reading.
_IBNET_PARTIAL = re.compile(r"^(?:(1|2|4|8|12)x|\?\?)(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)$",
                            re.IGNORECASE)


def _bad_speed(value: object) -> ValueError:
    return ValueError(f"unknown link speed {_shown(value)}; use one of {', '.join(SPEEDS)}")


def _bad_width(value: object) -> ValueError:
    return ValueError(f"unknown link width {_shown(value)}; use {', '.join(WIDTHS[:-1])} or {WIDTHS[-1]}")


def _shown(value: object) -> str:
    """A value as an error message quotes it: a 5,000-digit width is cut, not echoed."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"(a number of {value.bit_length()} bits)"  # str() of past 4,300 digits raises
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:32]}... ({len(str(value))} characters)"


def normalize_speed(value: str | int | None) -> str | None:
    """Return the canonical speed name (``"HDR"``) for a name, a 4x rate in Gb/s or Mb/s, or None."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and value.bit_length() > 64:
        raise _bad_speed(value)
    text = str(value).strip().upper()
    if text in _RANK:
        return text
    if text.endswith("G"):
        text = text[:-1]
    if text.isdigit() and len(text) <= 7:
        num = int(text)
        if num >= 10000:  # NDT spreadsheets give Mb/s
            num //= 1000
        if num in _PORT_RATE:
            return _PORT_RATE[num]
    raise _bad_speed(value)


def normalize_width(value: str | int | None) -> str | None:
    """Return the canonical width (``"4x"``) for ``4``, ``"4X"``, ``"IB_4X"``, or None."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and value.bit_length() > 64:
        raise _bad_width(value)
    text = str(value).strip().lower().removeprefix("ib_")
    if text.isdigit():
        text += "x"
    if text in _LANES:
        return text
    raise _bad_width(value)


def speed_rank(speed: str) -> int:
    """Order of a canonical speed (higher is faster)."""
    return _RANK[speed]


def width_lanes(width: str) -> int:
    """Lane count of a canonical width (ValueError for anything else)."""
    lanes = _LANES.get(width)
    if lanes is None:
        raise _bad_width(width)
    return lanes


def parse_ibnet_rate(text: str) -> tuple[str | None, str | None] | None:
    """Split ibnetdiscover's ``4xHDR`` into (``"4x"``, ``"HDR"``); ``2x???`` gives (``"2x"``, None)
    and ``??HDR`` (None, ``"HDR"``); None if it is not a rate at all."""
    m = _IBNET_RE.match(text.strip()) or _IBNET_PARTIAL.match(text.strip())
    if not m:
        return None
    width = f"{m.group(1)}x" if m.group(1) else None
    speed = None if m.group(2).startswith("?") else m.group(2).upper()
    return (width, speed) if width or speed else None


def speed_from_lane_gbps(gbps: str) -> str | None:
    """Map iblinkinfo's per-lane ``53.125`` (or a rounded ``53.13``) to ``HDR``; None if unknown."""
    exact = _LANE_GBPS.get(gbps)
    if exact is not None:
        return exact
    try:
        value = float(gbps)
    except ValueError:
        return None
    # Some builds round the rate; take the nearest known lane rate within 2 %.
    best = min(_LANE_GBPS, key=lambda k: abs(float(k) - value))
    return _LANE_GBPS[best] if abs(float(best) - value) <= 0.02 * float(best) else None
