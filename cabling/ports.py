"""Port-name conventions shared by importers and discovery: switch, director and host ports."""

from __future__ import annotations

import re

# Numbers are bounded: int() refuses 4,300+ digit strings, and no port number is that long.
_SWITCH_PORT = re.compile(r"^(?:port\s*)?(\d{1,9})$", re.IGNORECASE)
# UFM NDT writes director ports as "Blade 16_Port 2/20" (blade L16, ASIC U2, port 20).
_NDT_BLADE = re.compile(r"^blade\s*(\d{1,9})_port\s*(\d{1,9})/(\d{1,9})$", re.IGNORECASE)
_DIRECTOR = re.compile(r"^L(\d{1,9})/U(\d{1,9})/(\d{1,9})$", re.IGNORECASE)


def director_port(blade: int, asic: int, port: int) -> str:
    """Canonical director port name: ``L16/U2/20`` (leaf blade 16, ASIC 2, port 20)."""
    return f"L{blade}/U{asic}/{port}"


def switch_port(text: str) -> str | None:
    """``"Port 17"``, ``"17"`` -> ``"17"``; ``"Blade 16_Port 2/20"`` -> ``"L16/U2/20"``; else None."""
    t = text.strip()
    m = _SWITCH_PORT.match(t)
    if m:
        return str(int(m.group(1)))
    m = _NDT_BLADE.match(t)
    if m:
        return director_port(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    m = _DIRECTOR.match(t)
    if m:
        return director_port(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return None


def is_switch_port(port: str) -> bool:
    """Whether a canonical port name looks like a switch (or director) port."""
    return switch_port(port) == port


def port_number(port: str) -> int | None:
    """The front-panel number of a plain switch port (``"17"`` -> 17), else None."""
    return int(port) if port.isascii() and port.isdigit() and len(port) < 10 else None


def host_port(device: str, text: str) -> str:
    """Strip a leading device name: NDT writes host ports as ``"<host> <hca>"``."""
    t = " ".join(text.split())
    if t.casefold().startswith(device.casefold() + " "):
        return t[len(device) + 1 :]
    return t


def hca_of(port: str) -> str:
    """HCA name of a host port: ``mlx5_3`` and ``mlx5_3/1`` -> ``mlx5_3``."""
    return port.split("/", 1)[0]


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key that orders ``gpu2`` before ``gpu10`` and ``port 9`` before ``port 17``."""
    # Digit runs compare by value without int(): a 4,300-digit run is past int()'s limit.
    parts = re.split(r"(\d+)", text)  # odd positions are the digit runs
    return tuple((len(t.lstrip("0")), t.lstrip("0")) if i % 2 else t for i, t in enumerate(parts))
