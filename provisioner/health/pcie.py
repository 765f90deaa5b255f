"""Parsers of ``lspci -vvv`` (links, ACS, topology) and of the kernel's PCIe bandwidth warnings.

Devices are recognised by class and vendor, with or without ``-nn`` ids and ``-D`` domains,
because pci.ids on hosts is often too old to name an H100 ("NVIDIA Corporation Device 2330").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from provisioner.health.nvsmi import normalize_bus_id

_HEADER = re.compile(
    r"^(?P<addr>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?P<cls>[^:]+?)"
    r"(?: \[(?P<clsid>[0-9a-f]{4})\])?: (?P<desc>.*)$"
)
_IDS = re.compile(r"\[(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})\]")
_SPEED = re.compile(r"Speed (?P<speed>[0-9]{1,6}(?:\.[0-9]{1,6})?)GT/s(?: \((?P<sq>ok|downgraded)\))?")
_WIDTH = re.compile(r"Width x(?P<width>[0-9]{1,4})(?: \((?P<wq>ok|downgraded)\))?")
_BUS = re.compile(r"Bus: primary=(?P<p>[0-9a-f]+), secondary=(?P<s>[0-9a-f]+), subordinate=(?P<u>[0-9a-f]+)")
_PORT = re.compile(r"Express \(v[0-9]\) (?P<port>[A-Za-z ]+?)(?: \(|,|$)")
# PCIe transfer rate (GT/s) -> generation
SPEED_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

NVIDIA, MELLANOX = "10de", "15b3"


@dataclass
class Link:
    """A link's speed (GT/s) and width (lanes)."""

    speed: float | None = None
    width: int | None = None


@dataclass
class PciDevice:
    """One function from ``lspci -vvv``."""

    addr: str
    cls: str
    desc: str
    vendor: str | None = None
    device: str | None = None
    port_type: str | None = None  # "Endpoint", "Root Port", "Downstream Port", "Upstream Port"
    cap: Link = field(default_factory=Link)
    sta: Link = field(default_factory=Link)
    sta_downgraded: list[str] = field(default_factory=list)  # "speed"/"width" flagged by lspci
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    acs_ctl: dict[str, bool] | None = None
    serial: str | None = None  # VPD "[SN] Serial number" (HCAs)
    lines: list[str] = field(default_factory=list, repr=False)

    @property
    def bus(self) -> int:
        """Bus number of the address."""
        return int(self.addr.split(":")[1], 16)

    @property
    def is_gpu(self) -> bool:
        """An NVIDIA 3D/VGA controller (NVSwitches are class "Bridge" and are not GPUs)."""
        nvidia = self.vendor == NVIDIA or "NVIDIA" in self.desc
        return nvidia and self.cls in ("3D controller", "VGA compatible controller")

    @property
    def is_hca(self) -> bool:
        """A Mellanox/NVIDIA ConnectX function (InfiniBand or Ethernet class)."""
        mlx = self.vendor == MELLANOX or "Mellanox" in self.desc
        return mlx and self.cls in ("Infiniband controller", "Ethernet controller", "Network controller")

    @property
    def is_port_below(self) -> bool:
        """Root and downstream ports: their LnkSta describes the link to the device below them."""
        return self.port_type in ("Root Port", "Downstream Port")

    @property
    def acs_enabled(self) -> list[str]:
        """The ACS redirect/validation controls switched on (any one hurts GPU peer-to-peer)."""
        if not self.acs_ctl:
            return []
        return [k for k in ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd") if self.acs_ctl.get(k)]


def _link(text: str) -> tuple[Link, list[str]]:
    link, downgraded = Link(), []
    s = _SPEED.search(text)
    if s:
        link.speed = float(s.group("speed"))
        if s.group("sq") == "downgraded":
            downgraded.append("speed")
    w = _WIDTH.search(text)
    if w:
        link.width = int(w.group("width"))
        if w.group("wq") == "downgraded":
            downgraded.append("width")
    return link, downgraded


def parse_lspci(text: str) -> list[PciDevice]:
    """All functions in ``lspci -vvv`` (optionally ``-nn``/``-D``) output."""
    devices: list[PciDevice] = []
    cur: PciDevice | None = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            ids = _IDS.search(m.group("desc"))
            cur = PciDevice(
                addr=normalize_bus_id(m.group("addr")),
                cls=m.group("cls").strip(),
                desc=m.group("desc"),
                vendor=ids.group("vendor") if ids else None,
                device=ids.group("device") if ids else None,
            )
            cur.lines.append(line)
            devices.append(cur)
            continue
        if cur is None or not line.strip():
            continue
        cur.lines.append(line)
        stripped = line.strip()
        if stripped.startswith("LnkCap:"):
            cur.cap, _ = _link(stripped)
        elif stripped.startswith("LnkSta:"):
            cur.sta, cur.sta_downgraded = _link(stripped)
        elif stripped.startswith("Bus: primary="):
            b = _BUS.search(stripped)
            if b:
                cur.secondary_bus, cur.subordinate_bus = int(b.group("s"), 16), int(b.group("u"), 16)
        elif stripped.startswith("ACSCtl:"):
            cur.acs_ctl = {
                t[:-1]: t.endswith("+") for t in stripped.split()[1:] if t[-1:] in "+-"
            }
        elif "Express (v" in stripped and stripped.startswith("Capabilities:"):
            p = _PORT.search(stripped)
            if p:
                cur.port_type = p.group("port").strip()
        elif stripped.startswith("[SN] Serial number:"):
            cur.serial = stripped.split(":", 1)[1].strip()
    return devices


class Topology:
    """Parent links between functions, from bridges' secondary/subordinate bus ranges."""

    def __init__(self, devices: list[PciDevice]) -> None:
        self.devices = devices
        self._by_addr = {d.addr: d for d in devices}

    def parent(self, dev: PciDevice) -> PciDevice | None:
        """The bridge whose secondary bus is this device's bus (same PCI domain)."""
        domain = dev.addr.split(":")[0]
        for d in self.devices:
            if d.secondary_bus == dev.bus and d.addr.split(":")[0] == domain and d is not dev:
                return d
        return None

    def path(self, dev: PciDevice) -> list[PciDevice]:
        """The device and every bridge above it, up to the root port."""
        out = [dev]
        seen = {dev.addr}
        cur = self.parent(dev)
        while cur is not None and cur.addr not in seen:
            out.append(cur)
            seen.add(cur.addr)
            cur = self.parent(cur)
        return out


@dataclass(frozen=True)
class LinkFinding:
    """A link running below what both its ends can do."""

    addr: str
    what: str  # "width" or "speed"
    current: float
    expected: float
    device: PciDevice


def judge_link(dev: PciDevice, parent: PciDevice | None) -> list[LinkFinding]:
    """Compare the link above ``dev`` with the best both ends support (not lspci's own flag,
    which also fires when a Gen5 port simply has a Gen4 device behind it).

    Only endpoints and upstream ports are judged: a root/downstream port's LnkSta is the link
    below it, which is judged from the device on the other end."""
    out: list[LinkFinding] = []
    if dev.is_port_below:
        return out
    width_cap = [c for c in (dev.cap.width, parent.cap.width if parent else None) if c]
    speed_cap = [c for c in (dev.cap.speed, parent.cap.speed if parent else None) if c]
    if dev.sta.width and width_cap and dev.sta.width < min(width_cap):
        out.append(LinkFinding(dev.addr, "width", dev.sta.width, min(width_cap), dev))
    if dev.sta.speed and speed_cap and dev.sta.speed < min(speed_cap):
        out.append(LinkFinding(dev.addr, "speed", dev.sta.speed, min(speed_cap), dev))
    return out


# "pci 0000:18:00.0: 8.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x4 link at
#  0000:17:00.0 (capable of 31.504 Gb/s with 8.0 GT/s PCIe x4 link)"
_BW = re.compile(
    r"(?P<dev>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): (?P<avail>[0-9]{1,6}(?:\.[0-9]{1,6})?) Gb/s available PCIe "
    r"bandwidth, limited by (?P<speed>[0-9]{1,6}(?:\.[0-9]{1,6})?) GT/s PCIe x(?P<width>[0-9]{1,4}) link at "
    r"(?P<at>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) \(capable of (?P<cap>[0-9]{1,6}(?:\.[0-9]{1,6})?) Gb/s with "
    r"(?P<cspeed>[0-9]{1,6}(?:\.[0-9]{1,6})?) GT/s PCIe x(?P<cwidth>[0-9]{1,4}) link\)"
)


@dataclass(frozen=True)
class BandwidthWarning:
    """The kernel's boot-time note that a device's link is narrower/slower than it can do."""

    device: str
    at: str
    width: int
    capable_width: int
    speed: float
    capable_speed: float
    line: str


def parse_bandwidth_warnings(lines: Iterable[str]) -> list[BandwidthWarning]:
    """Kernel-log "available PCIe bandwidth, limited by ... (capable of ...)" lines."""
    out = []
    for line in lines:
        m = _BW.search(line)
        if m:
            out.append(
                BandwidthWarning(
                    device=normalize_bus_id(m.group("dev")), at=normalize_bus_id(m.group("at")),
                    width=int(m.group("width")), capable_width=int(m.group("cwidth")),
                    speed=float(m.group("speed")), capable_speed=float(m.group("cspeed")),
                    line=line.strip(),
                )
            )
    return out


def parse_pci_sysfs(text: str) -> tuple[dict[str, int | None], dict[str, str]]:
    """The collector's ``pci_sysfs`` section -> ({PCI address: NUMA node}, {RDMA device: address})."""
    numa: dict[str, int | None] = {}
    rdma: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "pci":
            fields = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
            node = fields.get("numa", "")
            numa[parts[1].lower()] = int(node) if node.isdigit() else None  # -1: no NUMA info
        elif len(parts) == 3 and parts[0] == "rdma":
            rdma[parts[1]] = parts[2].lower()
    return numa, rdma
