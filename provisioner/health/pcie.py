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
_SLOT_NO = re.compile(r"^Slot #(?P<slot>[0-9]{1,6})\b")
_SLOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
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
    physical_slot: str | None = None  # "Physical Slot: 28" (the slot this function sits in)
    slot_below: str | None = None  # a port's SltCap "Slot #28": the slot of the device below it
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


def _detail(cur: PciDevice, stripped: str) -> None:
    """Read one indented lspci line into ``cur`` (only the few kinds the checks use)."""
    head = stripped[:4]
    if head not in _WANTED:
        return
    if stripped.startswith("LnkCap:"):
        cur.cap, _ = _link(stripped)
    elif stripped.startswith("LnkSta:"):
        cur.sta, cur.sta_downgraded = _link(stripped)
    elif stripped.startswith("Bus: primary="):
        b = _BUS.search(stripped)
        if b:
            cur.secondary_bus, cur.subordinate_bus = int(b.group("s"), 16), int(b.group("u"), 16)
    elif stripped.startswith("ACSCtl:"):
        cur.acs_ctl = {t[:-1]: t.endswith("+") for t in stripped.split()[1:] if t[-1:] in "+-"}
    elif stripped.startswith("Capabilities:") and "Express (v" in stripped:
        p = _PORT.search(stripped)
        if p:
            cur.port_type = p.group("port").strip()
    elif stripped.startswith("[SN] Serial number:"):
        cur.serial = stripped.split(":", 1)[1].strip()
    elif stripped.startswith("Physical Slot:"):
        name = stripped.split(":", 1)[1].strip()
        cur.physical_slot = name if _SLOT_NAME.match(name) else None
    elif (slot := _SLOT_NO.match(stripped)) is not None:
        cur.slot_below = slot.group("slot")


# The first four characters of the lines _detail reads: the others are skipped at once.
_WANTED = frozenset({"LnkC", "LnkS", "Bus:", "ACSC", "Capa", "[SN]", "Phys", "Slot"})


def parse_lspci(text: str) -> list[PciDevice]:
    """All functions in ``lspci -vvv`` (optionally ``-nn``/``-D``) output."""
    devices: list[PciDevice] = []
    cur: PciDevice | None = None
    for line in text.splitlines():
        # Only a device's first line starts in column 0 (most of the ~13,000 lines of an HGX
        # board are indented capability lines: no header match to try on them).
        m = _HEADER.match(line) if line[:1] not in ("\t", " ", "") else None
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
        if cur is None:
            continue
        stripped = line.strip()
        if stripped:
            cur.lines.append(line)
            _detail(cur, stripped)
    return devices


def pci_slots(devices: list[PciDevice], sysfs: str = "") -> dict[str, str]:
    """PCI address -> PCIe slot, for every function in a slot.

    From the kernel's slot table (the collector's ``slot NAME dddd:bb:dd`` lines from
    /sys/bus/pci/slots: a slot whose address is the function's own bus and device), else
    lspci's "Physical Slot", else the slot the port above it announces (SltCap "Slot #N"):
    behind PCIe switches (HGX baseboards) the slot number sits on the switch port."""
    table: dict[str, str] = {}
    for line in sysfs.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "slot" and _SLOT_NAME.match(parts[1]):
            table[parts[2].lower()] = parts[1]
    topo = Topology(devices)
    out: dict[str, str] = {}
    for dev in devices:
        parent = topo.parent(dev)
        slot = (table.get(dev.addr.rsplit(".", 1)[0]) or dev.physical_slot
                or (parent.slot_below if parent is not None and parent.is_port_below else None))
        if slot:
            out[dev.addr] = slot
    return out


class Topology:
    """Parent links between functions, from bridges' secondary/subordinate bus ranges."""

    def __init__(self, devices: list[PciDevice]) -> None:
        self.devices = devices
        self._by_addr = {d.addr: d for d in devices}
        # (domain, secondary bus) -> the first bridge opening that bus: one lookup per device
        # instead of a scan of all (an HGX host lists 500+ functions).
        self._bridge: dict[tuple[str, int], PciDevice] = {}
        for d in devices:
            if d.secondary_bus is not None:
                self._bridge.setdefault((d.addr.split(":")[0], d.secondary_bus), d)

    def parent(self, dev: PciDevice) -> PciDevice | None:
        """The bridge whose secondary bus is this device's bus (same PCI domain)."""
        found = self._bridge.get((dev.addr.split(":")[0], dev.bus))
        return found if found is not dev else None

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
