"""--deep measurements: GPU matmul throughput, NVLink copy bandwidth, ib_write_bw between hosts.

Slow parts are judged against the host's own median (a GPU or NVLink pair far below its
siblings is broken, whatever the model), and InfiniBand against the port's rated speed.
"""

from __future__ import annotations

import re
import shlex
import statistics

from provisioner.health.ib import IB_ERROR_COUNTERS, counter_deltas, parse_counters

_NUM = r"[0-9]{1,12}(?:\.[0-9]{1,12})?"  # bounded: int() refuses 4,300 digits, "1.2.3" is no float
_MATMUL = re.compile(rf"^gpu=(?P<gpu>[0-9]{{1,4}}) tflops=(?P<tflops>{_NUM})\s*$")
_MATRIX_TITLE = re.compile(r"bandwidth \(GB/s\)")
_BW_LINE = re.compile(
    rf"^\s*(?P<bytes>[0-9]+)\s+(?P<iters>[0-9]+)\s+(?P<peak>{_NUM})\s+(?P<avg>{_NUM})\s+(?P<rate>{_NUM})\s*$"
)


def parse_matmul(text: str) -> dict[int, float]:
    """The collector's matmul lines "gpu=0 tflops=612.3" -> {gpu index: TFLOPS}."""
    out: dict[int, float] = {}
    for line in text.splitlines():
        m = _MATMUL.match(line)
        if m:
            out[int(m.group("gpu"))] = float(m.group("tflops"))
    return out


def parse_nvbandwidth(text: str) -> dict[tuple[int, int], float]:
    """The first GB/s matrix of ``nvbandwidth`` -> {(row gpu, column gpu): GB/s} (N/A skipped)."""
    lines = text.splitlines()
    out: dict[tuple[int, int], float] = {}
    for i, line in enumerate(lines):
        if not _MATRIX_TITLE.search(line):
            continue
        header = lines[i + 1].split() if i + 1 < len(lines) else []
        if not header or not all(_index(h) for h in header):
            continue
        cols = [int(h) for h in header]
        for row in lines[i + 2 :]:
            cells = row.split()
            if not cells or not _index(cells[0]):
                break
            for col, cell in zip(cols, cells[1:], strict=False):
                if re.fullmatch(_NUM, cell):  # "N/A" and damaged cells are left out
                    out[(int(cells[0]), col)] = float(cell)
        break
    return out


def _index(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 4


def slow_outliers(values: dict[str, float], min_fraction: float) -> tuple[float, dict[str, float]]:
    """The median and the entries below ``min_fraction`` of it."""
    if not values:
        return 0.0, {}
    median = statistics.median(values.values())
    return median, {k: v for k, v in values.items() if v < min_fraction * median}


def parse_ib_write_bw(text: str) -> tuple[float, float] | None:
    """Peak and average Gb/s from ``ib_write_bw --report_gbits`` client output (None if absent)."""
    for line in text.splitlines():
        m = _BW_LINE.match(line)
        if m:
            return float(m.group("peak")), float(m.group("avg"))
    return None


def pair_up(names: list[str]) -> list[tuple[str, str]]:
    """Hosts in pairs (a, b), (c, d), ...; an odd host out is paired with the first one."""
    pairs = [(names[i], names[i + 1]) for i in range(0, len(names) - 1, 2)]
    if len(names) % 2 == 1 and len(names) > 1:
        pairs.append((names[-1], names[0]))
    return pairs


def server_command(device: str, port: int, duration_s: int) -> str:
    """ib_write_bw server on one device; it exits after one client run (or 60 s of waiting)."""
    return (f"timeout {duration_s + 60} ib_write_bw -d {shlex.quote(device)} -F --report_gbits "
            f"-D {duration_s} -p {port}")


def client_command(device: str, port: int, duration_s: int, server: str) -> str:
    """ib_write_bw client towards ``server`` (retried briefly while the server starts)."""
    cmd = (f"ib_write_bw -d {shlex.quote(device)} -F --report_gbits -D {duration_s} -p {port} "
           f"{shlex.quote(server)}")
    return f"for i in 1 2 3 4 5; do {cmd} && exit 0; sleep 2; done; exit 1"


COUNTERS_SCRIPT = (
    "for d in /sys/class/infiniband/*/ports/*/counters; do [ -d \"$d\" ] || continue; "
    "port=$(echo \"$d\" | awk -F/ '{print $5\"/\"$7}'); "
    f"for c in {' '.join(IB_ERROR_COUNTERS)}; do [ -r \"$d/$c\" ] && "
    "echo \"$port $c $(cat \"$d/$c\")\"; done; done"
)


def counter_rise(before: str, after: str) -> dict[str, dict[str, int]]:
    """Counters that rose between two runs of COUNTERS_SCRIPT."""
    return counter_deltas(parse_counters(before), parse_counters(after))

