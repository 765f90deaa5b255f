"""Parse ``lldpctl -f json`` (``lldpcli show neighbors -f json``) collected from hosts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cabling.discovery.model import DiscoveredFabric, DLink, DNode, NodeKind
from cabling.errors import CablingInputError
from cabling.limits import LLDP
from cabling.textio import parse_json, read_text


def load_lldp_dir(path: str | Path) -> DiscoveredFabric:
    """Read every ``<host>.json`` in a folder (one lldpctl output per host, named after it)."""
    p = Path(path)
    if p.is_file():
        return parse_lldp(read_text(p, "lldpctl output", cap=LLDP, strict=False), p.stem, str(p))
    if not p.is_dir():
        raise CablingInputError("LLDP folder not found", file=str(p),
                                hint="collect with: lldpctl -f json > DIR/$(hostname).json on every host")
    fab = DiscoveredFabric(source=str(p))
    files = sorted(p.glob("*.json"))
    if not files:
        raise CablingInputError("no *.json files in the LLDP folder", file=str(p),
                                hint="collect with: lldpctl -f json > DIR/$(hostname).json on every host")
    for f in files:
        fab.merge(parse_lldp(read_text(f, "lldpctl output", cap=LLDP, strict=False), f.stem, str(f)))
    fab.source = str(p)
    return fab


def parse_lldp(text: str, host: str, source: str = "<lldp>") -> DiscoveredFabric:
    """Parse one host's lldpctl JSON; ``host`` names the local device (lldpctl does not)."""
    data = parse_json(text, source, "lldpctl output")
    lldp = data.get("lldp") if isinstance(data, dict) else None
    if isinstance(lldp, list):  # lldpd "json0" format wraps everything in lists
        lldp = lldp[0] if lldp else {}
    if not isinstance(lldp, dict):
        raise CablingInputError("no top-level 'lldp' object: this is not 'lldpctl -f json' output",
                                file=source, line=1)
    fab = DiscoveredFabric(source=source)
    hid = f"lldp:{host.casefold()}"
    fab.nodes[hid] = DNode(guid=hid, kind="ca", desc=host, name=host)
    heard: dict[str, list[tuple[str, str]]] = {}
    kinds: list[NodeKind] = []
    for ifname, entry in _interfaces(lldp.get("interface"), source):
        chassis_name, chassis_desc = _chassis(entry.get("chassis"), source, ifname)
        caps = _capabilities(entry.get("chassis"))
        port = entry.get("port") or {}
        if isinstance(port, list):
            port = port[0] if port else {}
        pid = _value(port.get("id")) if isinstance(port, dict) else ""
        if isinstance(port, dict) and _id_type(port.get("id")) == "mac" and _value(port.get("descr")):
            pid = _value(port.get("descr"))  # hosts often send their MAC as port id and ifname as description
        if not chassis_name or not pid:
            raise CablingInputError(f"neighbour on {ifname} has no chassis name or port id", file=source)
        kind = neighbour_kind(caps, chassis_desc, pid)
        kinds.append(kind)
        chassis_name, pid = mac_name(chassis_name), mac_name(pid)
        sid = f"lldp:{chassis_name.casefold()}"
        fab.nodes.setdefault(sid, DNode(guid=sid, kind=kind, desc=chassis_desc or chassis_name,
                                        name=chassis_name))
        heard.setdefault(ifname, []).append((sid, pid))
    for ifname, peers in heard.items():
        distinct = list(dict.fromkeys(peers))
        if len(distinct) > 1:
            # One cable has one far end: two neighbours on one interface are a hub, a tap or a
            # media converter in between, and neither is the cable the plan means.
            names = ", ".join(f"{fab.nodes[sid].name} {pid}" for sid, pid in distinct)
            fab.warnings.append(f"{source}: {host} {ifname} hears {len(distinct)} LLDP neighbours ({names}): "
                                "a hub or tap in between? its cable is left out")
            continue
        sid, pid = distinct[0]
        fab.links.append(DLink(hid, ifname, sid, pid))
    # Collected on a switch: its own ports are named like a switch's, or every neighbour is a host
    # (unless there is only one, a host too: two hosts cabled back to back).
    if any(_SWITCH_PORT.match(i) for i in heard) or (kinds and "switch" not in kinds and len(heard) > 1):
        fab.nodes[hid].kind = "switch"
    return fab


# Network operating systems, as they name themselves in the LLDP system description.
_SWITCH_OS = re.compile(
    r"Cumulus Linux|SONiC|\bOnyx\b|MLNX-OS|Mellanox|NVIDIA SN\d|Cisco|NX-OS|IOS-XE|IOS XR|\bEOS\b|Arista|"
    r"Junos|Juniper|Comware|H3C|Huawei|\bVRP\b|Dell (?:EMC )?(?:Networking )?OS|\bOS10\b|FTOS|FASTPATH|"
    r"Extreme|\bEXOS\b|ArubaOS|ProCurve|Brocade|FortiSwitch|Ruijie|\bRGOS\b|ZTE|Edgecore|Celestica|"
    r"Broadcom|\bPicOS\b|Pica8",
    re.IGNORECASE,
)
# Switch front-panel port names (Cumulus swp1, SONiC Ethernet120, NX-OS/EOS Eth1/8/3, Junos
# et-0/0/1, Cisco HundredGigE1/0/1...); hosts name theirs eth0, ens1np0, enp129s0f0, eno1.
_SWITCH_PORT = re.compile(
    r"^(?:swp\d|Ethernet\d|Eth\d+/|(?:et|xe|ge|mge)-\d|(?:Ten|TwentyFive|Forty|Hundred|FourHundred)?GigE|"
    r"(?:Ten|TwentyFive|Forty|Hundred|FourHundred)?GigabitEthernet|Te\d|Hu\d|Fo\d|Gi\d|Port-?channel)",
    re.IGNORECASE,
)
# Host interface names (eth2, ens1np0, enp129s0f0, eno1, ib0, bond0).
_HOST_PORT = re.compile(r"^(?:eth\d|en[opsx]\d|enp\d|ib\d|ibp\d|bond\d|mlx5_\d)", re.IGNORECASE)
_HOST_OS = re.compile(r"Ubuntu|Red Hat|RHEL|CentOS|Rocky|AlmaLinux|Debian GNU|SUSE|Windows|ESXi|VMware|"
                      r"GNU/Linux|Linux \d", re.IGNORECASE)


def neighbour_kind(caps: set[str] | None, descr: str, port: str) -> NodeKind:
    """Whether an LLDP neighbour is a switch or a host.

    Capabilities alone mislead: lldpd on a Linux host advertises Bridge and Router once IP
    forwarding or a bridge is on (every Kubernetes GPU node). So, in order: a network OS in the
    system description (Cumulus, SONiC, Onyx, NX-OS, EOS, Junos, Comware...) or a switch port name
    (``swp1``, ``Ethernet120``, ``Eth1/8/3``) is a switch; a host OS in the description (Ubuntu,
    Red Hat, ``GNU/Linux``...) or a host interface name as port (``eth2``, ``ens1np0``) is a host
    whatever it advertises; then Bridge/Router without
    Station is a switch; a neighbour that says nothing is taken as the usual case, a switch."""
    if _SWITCH_OS.search(descr) or _SWITCH_PORT.match(port):
        return "switch"
    if _HOST_OS.search(descr) or _HOST_PORT.match(port):
        return "ca"
    if caps is None:
        return "switch"
    if "Station" in caps or not caps & {"Bridge", "Router"}:
        return "ca"
    return "switch"


_MAC = re.compile(r"^[0-9a-fA-F]{2}(?:([:.-]?)[0-9a-fA-F]{2}){5}$|^[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2}$")


def mac_name(text: str) -> str:
    """A chassis or port known only by its MAC gets a name without colons: ``mac-4494fc9d550a``.

    ``44:94:fc:9d:55:0a:g17`` cannot be split into device and port; ``mac-4494fc9d550a:g17`` can.
    """
    if _MAC.match(text.strip()):
        return "mac-" + re.sub(r"[:.-]", "", text.strip()).lower()
    return text


def _capabilities(chassis: Any) -> set[str] | None:
    """Enabled capabilities a neighbour advertises (Bridge, Router, Station...), None if it sends none."""
    found: set[str] | None = None
    bodies = chassis if isinstance(chassis, list) else [chassis]
    for body in bodies:
        if not isinstance(body, dict):
            continue
        inner = [body] if "id" in body or "name" in body else [v for v in body.values() if isinstance(v, dict)]
        for b in inner:
            caps = b.get("capability")
            if caps is None:
                continue
            found = found or set()
            for cap in caps if isinstance(caps, list) else [caps]:
                if isinstance(cap, dict) and cap.get("enabled"):
                    found.add(str(cap.get("type")))
    return found


def _interfaces(obj: Any, source: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if obj is None:
        return out
    items = obj if isinstance(obj, list) else [obj]
    for item in items:
        if not isinstance(item, dict):
            raise CablingInputError("'interface' entries must be objects", file=source)
        if "name" in item and isinstance(item.get("name"), str):  # json0 format
            out.append((item["name"], item))
            continue
        for name, entry in item.items():
            if isinstance(entry, dict):
                out.append((name, entry))
    return out


def _chassis(obj: Any, source: str, ifname: str) -> tuple[str, str]:
    if isinstance(obj, list):
        obj = obj[0] if obj else {}
    if not isinstance(obj, dict):
        raise CablingInputError(f"neighbour on {ifname} has no chassis", file=source)
    if "id" in obj or "name" in obj:  # json0: {"id": {...}, "name": [{"value": ...}]}
        name = _value(obj.get("name")) or _value(obj.get("id"))
        return name, _value(obj.get("descr"))
    for name, body in obj.items():
        descr = body.get("descr", "") if isinstance(body, dict) else ""
        return name, descr if isinstance(descr, str) else ""
    return "", ""


def _id_type(obj: Any) -> str:
    if isinstance(obj, list):
        obj = obj[0] if obj else None
    return str(obj.get("type", "")) if isinstance(obj, dict) else ""


def _value(obj: Any) -> str:
    if isinstance(obj, list):
        obj = obj[0] if obj else None
    if isinstance(obj, dict):
        obj = obj.get("value")
    return obj if isinstance(obj, str) else ""
