"""Host topology manifest: what every host of a profile must look like, captured from a golden host.

Stored per profile in the site (``<site dir>/.provisioner/topology/<profile>.yml``, reviewed in
git: Ansible reads every other folder of the site directory as inventory and fails on it) and
compared with each host's collected sections: one :class:`Deviation` per difference, each with
the remedy a technician can act on (reseat, repair, re-flash, BIOS setting).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.exceptions import InventoryError
from provisioner.health.collector import Section
from provisioner.health.ib import parse_ibstat
from provisioner.health.model import RemedyKind
from provisioner.health.nvlink import nvlink_spec, parse_nvlink_status
from provisioner.health.nvsmi import parse_nvsmi
from provisioner.health.pcie import PciDevice, Topology, parse_lspci, parse_pci_sysfs
from provisioner.health.topo import RELATION_RANK, parse_list, parse_topo
from provisioner.inventory.yamlsrc import safe_load_bounded

Relation = Literal["PIX", "PXB", "PHB", "NODE", "SYS"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NvlinkExpect(_Strict):
    links: int = Field(ge=0)
    speed_gbs: float | None = Field(default=None, gt=0)


class NicExpect(_Strict):
    relation: Relation
    devices: list[str] = Field(default_factory=list)


class GpuExpect(_Strict):
    """One GPU slot (by nvidia-smi index, i.e. PCI order)."""

    index: int = Field(ge=0)
    bus_id: str | None = None
    model: str | None = None
    nvlink: NvlinkExpect | None = None
    nearest_nic: NicExpect | None = None
    numa: int | list[int] | None = None  # NUMA Affinity: a node, or several ("6-7")
    gpu_numa: int | list[int] | None = None  # GPU NUMA ID (Grace hosts: the GPU's memory node)
    cpus: str | None = None  # CPU Affinity as nvidia-smi prints it ("0-47,96-143")


class PcieExpect(_Strict):
    """A GPU, NIC or a switch port above them: trained width, capable speed, ACS."""

    role: Literal["gpu", "nic", "bridge"]
    width: int | None = None
    speed_gts: float | None = None  # the lesser of both ends' capability (idle GPUs downclock)
    acs: bool | None = None  # True = ACS redirect enabled (only judged on bridges)


class NicFacts(_Strict):
    pci: str | None = None
    numa: int | None = None
    firmware: str | None = None
    link_layer: str | None = None  # InfiniBand or Ethernet (RoCE)
    ca_type: str | None = None


class TopologyManifest(_Strict):
    """What every host of one profile must have."""

    profile: str
    captured_from: str | None = None
    captured_at: str | None = None
    driver: str | None = None
    gpus: list[GpuExpect] = Field(default_factory=list)
    pcie: dict[str, PcieExpect] = Field(default_factory=dict)  # by PCI address
    nics: dict[str, NicFacts] = Field(default_factory=dict)  # by RDMA device (mlx5_0)


@dataclass(frozen=True)
class Deviation:
    """One difference between a host and its profile's manifest."""

    what: str  # "gpu.missing", "nvlink.links", "nvlink.speed", "nic.relation", ...
    part: str
    expected: Any
    observed: Any
    remedy: RemedyKind
    action: str

    def line(self) -> str:
        """One evidence line: what, where, expected vs observed, and what to do."""
        return (f"{self.what}: {self.part}: expected {self.expected}, found {self.observed}"
                f" -> {self.action}")


# Ansible never parses a dot-folder of an inventory directory, whatever its ansible.cfg says.
ARTEFACTS = ".provisioner"


def manifest_dir(site_dir: Path) -> Path:
    """The folder of a site's topology manifests."""
    return site_dir / ARTEFACTS / "topology"


def manifest_path(site_dir: Path, profile: str) -> Path:
    """Where a profile's manifest lives in the site."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", profile):
        raise InventoryError(f"profile name {profile!r} cannot name a topology manifest file",
                             key="profiles", hint="use letters, digits, '.', '_' and '-'")
    return manifest_dir(site_dir) / f"{profile}.yml"


def refuse_legacy_folder(site_dir: Path) -> None:
    """An earlier release wrote manifests to ``<site dir>/topology/``, where Ansible parses
    them as inventory and fails every ``site.yml`` run: say how to move them."""
    legacy = site_dir / "topology"
    if legacy.is_dir():
        raise InventoryError(
            "topology manifests in this folder break Ansible (it reads every folder of the "
            "site directory as inventory)", file=str(legacy),
            hint=f"git mv {legacy} {manifest_dir(site_dir)}")


def load_manifest(path: Path) -> TopologyManifest:
    """Read and validate a manifest; InventoryError names the file and key."""
    try:
        doc = safe_load_bounded(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"cannot read topology manifest: {exc}", file=str(path)) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # an alias bomb, nesting too deep, a tagged value out of range
        raise InventoryError(f"not a usable manifest: {str(exc)[:120]}", file=str(path),
                             hint="write it as plain mappings and lists") from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InventoryError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                             line=line + 1 if line is not None else None) from None
    try:
        return TopologyManifest.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InventoryError(first["msg"], file=str(path),
                             key=".".join(str(p) for p in first["loc"]),
                             hint="re-capture it: provision health HOST --capture-topology") from None


def dump_manifest(manifest: TopologyManifest) -> str:
    """The manifest as YAML for review in git."""
    return yaml.safe_dump(manifest.model_dump(exclude_none=True), sort_keys=False, width=100)


def _text(sections: Mapping[str, Section], name: str) -> str:
    s = sections.get(name)
    return s.text if s is not None and s.ok else ""


def _pcie(devices: list[PciDevice]) -> dict[str, PcieExpect]:
    topo = Topology(devices)
    out: dict[str, PcieExpect] = {}
    for dev in devices:
        if not (dev.is_gpu or dev.is_hca):
            continue
        for i, node in enumerate(topo.path(dev)):
            if node.addr in out:
                continue
            parent = topo.parent(node)
            caps = [c for c in (node.cap.speed, parent.cap.speed if parent else None) if c]
            role: Literal["gpu", "nic", "bridge"] = (
                ("gpu" if node.is_gpu else "nic") if i == 0 else "bridge")
            acs = bool(node.acs_enabled) if role == "bridge" and node.acs_ctl is not None else None
            out[node.addr] = PcieExpect(role=role, width=node.sta.width,
                                        speed_gts=min(caps) if caps else None, acs=acs)
    return out


def _compact(nodes: tuple[int, ...] | None) -> int | list[int] | None:
    """One node as a number, several as a list (how a reviewer reads it in the YAML)."""
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else list(nodes)


def _nodes(value: int | list[int] | None) -> frozenset[int] | None:
    if value is None:
        return None
    return frozenset([value] if isinstance(value, int) else value)


def _numa(name: str, want: GpuExpect, got: GpuExpect) -> list[Deviation]:
    """NUMA placement of one GPU against the golden host: its NUMA affinity (a node or a range),
    its own memory node on Grace hosts, and the CPUs it is affine to."""
    out = []
    fix = ("check the BIOS NUMA settings (NPS/SNC, SMT) against the golden host, then the "
           "riser/slot the GPU's switch hangs off")
    for what, label, w, g in (("gpu.numa", "NUMA node", _nodes(want.numa), _nodes(got.numa)),
                              ("gpu.numa_id", "GPU NUMA ID", _nodes(want.gpu_numa), _nodes(got.gpu_numa))):
        if w is not None and g is not None and w != g:
            out.append(Deviation(what, name, f"{label} {_show(w)}", f"{label} {_show(g)}",
                                 RemedyKind.REPAIR, fix))
    wc, gc = parse_list(want.cpus), parse_list(got.cpus)
    if wc is not None and gc is not None and wc != gc:
        out.append(Deviation("gpu.cpu_affinity", name, f"CPUs {want.cpus}", f"CPUs {got.cpus}",
                             RemedyKind.REPAIR, fix))
    return out


def _show(nodes: frozenset[int]) -> str:
    return ",".join(map(str, sorted(nodes)))


def capture(sections: Mapping[str, Section], *, profile: str, host: str) -> TopologyManifest:
    """A manifest from one golden host's collected sections (``nvsmi``, ``topo``, ``lspci``...)."""
    nvsmi = parse_nvsmi(_text(sections, "nvsmi")) if _text(sections, "nvsmi").strip() else None
    links = parse_nvlink_status(_text(sections, "nvlink_status"))
    topo = parse_topo(_text(sections, "topo")) if _text(sections, "topo").strip() else None
    gpus: list[GpuExpect] = []
    # nvidia-smi -q, topo -m and nvlink --status all number GPUs in PCI order.
    count = max(len(nvsmi.gpus) if nvsmi else 0, len(topo.gpus) if topo else 0,
                max(links, default=-1) + 1)
    for i in range(count):
        g = nvsmi.gpus[i] if nvsmi and i < len(nvsmi.gpus) else None
        nv = None
        if i in links:
            up = [ln.speed_gbs for ln in links[i] if ln.speed_gbs]
            nv = NvlinkExpect(links=len(up), speed_gbs=min(up) if up else None)
        nic = None
        placed: dict[str, Any] = {}
        if topo and f"GPU{i}" in topo.gpus:
            rel, devs = topo.nearest_nics(f"GPU{i}")
            if rel is not None:
                nic = NicExpect(relation="SYS" if rel == "SOC" else rel, devices=devs)  # type: ignore[arg-type]
            placed = {"numa": _compact(topo.numa_affinity.get(f"GPU{i}")),
                      "gpu_numa": _compact(topo.gpu_numa_id.get(f"GPU{i}")),
                      "cpus": topo.cpu_affinity.get(f"GPU{i}")}
        gpus.append(GpuExpect(index=i, bus_id=g.bus_id if g else None,
                              model=g.product if g else None, nvlink=nv, nearest_nic=nic, **placed))
    pci_numa, rdma = parse_pci_sysfs(_text(sections, "pci_sysfs"))
    nics = {p.ca: NicFacts(pci=rdma.get(p.ca), numa=pci_numa.get(rdma.get(p.ca, "")),
                           firmware=p.firmware, link_layer=p.link_layer, ca_type=p.ca_type)
            for p in parse_ibstat(_text(sections, "ibstat"))}
    return TopologyManifest(
        profile=profile, captured_from=host,
        captured_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        driver=nvsmi.driver_version if nvsmi else None, gpus=gpus,
        pcie=_pcie(parse_lspci(_text(sections, "lspci"))), nics=nics,
    )


def unreadable(manifest: TopologyManifest, sections: Mapping[str, Section]) -> list[str]:
    """Sections the manifest needs that this host's run did not deliver (tool missing or failed):
    their part of the comparison is skipped rather than reported as missing hardware."""
    needed = []
    if manifest.gpus:
        needed += ["nvsmi", "topo"] + (["nvlink_status"] if any(g.nvlink for g in manifest.gpus) else [])
    if manifest.pcie:
        needed.append("lspci")
    if manifest.nics:
        needed.append("ibstat")
    return [n for n in needed if not _text(sections, n).strip()]


def compare(manifest: TopologyManifest, sections: Mapping[str, Section], host: str) -> list[Deviation]:
    """Every way ``host`` differs from ``manifest`` (empty: the host matches its profile)."""
    seen = capture(sections, profile=manifest.profile, host=host)
    out: list[Deviation] = []
    unread = set(unreadable(manifest, sections))
    if {"nvsmi", "topo", "nvlink_status"} <= unread:
        manifest = manifest.model_copy(update={"gpus": []})  # no GPU data: gpu.count says why
    if "lspci" in unread:
        manifest = manifest.model_copy(update={"pcie": {}})
    if "ibstat" in unread:
        manifest = manifest.model_copy(update={"nics": {}})
    by_bus = {g.bus_id: g for g in seen.gpus if g.bus_id}
    by_index = {g.index: g for g in seen.gpus}
    renumbered = _renumbered(manifest, seen)
    if renumbered is not None:
        out.append(renumbered)
        by_bus = {}  # the addresses moved: compare GPUs by index and skip the PCIe addresses
        manifest = manifest.model_copy(update={"pcie": {}})
    for want in manifest.gpus:
        # By PCI address where both know it: a lost GPU renumbers the ones after it.
        got = by_bus.get(want.bus_id) if want.bus_id and by_bus else by_index.get(want.index)
        name = f"GPU{want.index}" + (f" (PCI {want.bus_id})" if want.bus_id else "")
        if got is None:
            out.append(Deviation("gpu.missing", name, want.model or "present", "absent",
                                 RemedyKind.REPAIR, "reseat or replace the GPU; check the baseboard"))
            continue
        if want.model and got.model and want.model != got.model:
            out.append(Deviation("gpu.model", name, want.model, got.model, RemedyKind.REPAIR,
                                 "wrong GPU model in this slot: replace it"))
        out.extend(_nvlink(name, want, got))
        out.extend(_nic(name, want, got))
        out.extend(_numa(name, want, got))
    out.extend(_pcie_dev(manifest.pcie, seen.pcie))
    out.extend(_nic_facts(manifest.nics, seen.nics))
    return out


def _nvlink(name: str, want: GpuExpect, got: GpuExpect) -> list[Deviation]:
    if want.nvlink is None or want.nvlink.links == 0:
        return []
    if got.nvlink is None or got.nvlink.links == 0:
        return [Deviation("nvlink.none", name, f"{want.nvlink.links} links", "no active NVLink",
                          RemedyKind.RESET_GPU, "reset the GPU and restart fabric manager; "
                          "repair the baseboard if the links stay down")]
    out = []
    if got.nvlink.links < want.nvlink.links:
        out.append(Deviation("nvlink.links", name, f"{want.nvlink.links} links",
                             f"{got.nvlink.links} links", RemedyKind.RESET_GPU,
                             "reset the GPU; repair the baseboard if links stay down"))
    ws, gs = want.nvlink.speed_gbs, got.nvlink.speed_gbs
    if ws and gs and gs < ws * 0.95:
        out.append(Deviation("nvlink.speed", name, f"{ws:g} GB/s per link", f"{gs:g} GB/s",
                             RemedyKind.RESET_GPU, "reset the GPU; repair if the link trains slow again"))
    return out


def _nic(name: str, want: GpuExpect, got: GpuExpect) -> list[Deviation]:
    w, g = want.nearest_nic, got.nearest_nic
    if w is None:
        return []
    if g is None:
        return [Deviation("nic.missing", name, f"{w.relation} to {', '.join(w.devices)}",
                          "no NIC", RemedyKind.REPAIR, "reseat the NIC; check it is detected (lspci)")]
    out = []
    if RELATION_RANK[g.relation] > RELATION_RANK[w.relation]:
        out.append(Deviation("nic.relation", name, f"{w.relation} to {', '.join(w.devices)}",
                             f"{g.relation} to {', '.join(g.devices)}", RemedyKind.REPAIR,
                             "the NIC sits in the wrong slot or across the CPU socket: move it to "
                             "the GPU's PCIe switch (compare with the golden host)"))
    elif sorted(w.devices) != sorted(g.devices):
        out.append(Deviation("nic.devices", name, ", ".join(w.devices), ", ".join(g.devices),
                             RemedyKind.REPAIR, "NICs swapped or renamed: check slots and "
                             "udev naming against the golden host"))
    return out


def _renumbered(manifest: TopologyManifest, seen: TopologyManifest) -> Deviation | None:
    """The same devices at other PCI addresses (a BIOS update or setting, an added card
    renumbering the buses): one deviation instead of every address reported missing."""
    if not manifest.pcie or not seen.pcie:
        return None
    gone = [a for a in manifest.pcie if a not in seen.pcie]
    roles_want = Counter(p.role for p in manifest.pcie.values())
    roles_seen = Counter(p.role for p in seen.pcie.values())
    if len(gone) * 2 <= len(manifest.pcie) or roles_want != roles_seen:
        return None
    return Deviation("pcie.renumbered", "PCI bus numbering",
                     f"{len(manifest.pcie)} devices at the golden host's addresses",
                     f"{len(gone)} of them at other addresses", RemedyKind.REPAIR,
                     "compare the BIOS version and PCIe settings with the golden host; if the "
                     "change is intended, re-capture the manifest")


def _pcie_dev(want: dict[str, PcieExpect], got: dict[str, PcieExpect]) -> list[Deviation]:
    out = []
    for addr, w in want.items():
        g = got.get(addr)
        part = f"{w.role} at PCI {addr}"
        if g is None:
            out.append(Deviation("pcie.missing", part, "present", "absent", RemedyKind.REPAIR,
                                 "reseat the card / check the switch; the device is not on the bus"))
            continue
        if w.width and g.width and g.width < w.width:
            out.append(Deviation("pcie.width", part, f"x{w.width}", f"x{g.width}", RemedyKind.REPAIR,
                                 "reseat the card or cable (a lane is down)"))
        if w.speed_gts and g.speed_gts and g.speed_gts < w.speed_gts:
            out.append(Deviation("pcie.speed", part, f"{w.speed_gts:g} GT/s capable",
                                 f"{g.speed_gts:g} GT/s", RemedyKind.REPAIR,
                                 "check the BIOS PCIe link speed setting, then re-flash the switch "
                                 "firmware to the golden host's version"))
        if w.acs is not None and g.acs is not None and w.acs != g.acs:
            out.append(Deviation("pcie.acs", part, "ACS on" if w.acs else "ACS off",
                                 "ACS on" if g.acs else "ACS off", RemedyKind.REBOOT,
                                 "set ACS in the BIOS (or the switch setpci) as on the golden host"))
    return out


def _nic_facts(want: dict[str, NicFacts], got: dict[str, NicFacts]) -> list[Deviation]:
    out = []
    for dev, w in want.items():
        g = got.get(dev)
        if g is None:
            if got:  # ibstat ran and the device is not there
                out.append(Deviation("nic.absent", dev, "present", "absent", RemedyKind.REPAIR,
                                     "reseat or replace the NIC"))
            continue
        if w.firmware and g.firmware and w.firmware != g.firmware:
            out.append(Deviation("nic.firmware", dev, w.firmware, g.firmware, RemedyKind.REIMAGE,
                                 "re-flash the NIC firmware (mlxfwmanager) to the golden version"))
        if w.numa is not None and g.numa is not None and w.numa != g.numa:
            out.append(Deviation("nic.numa", dev, f"NUMA node {w.numa}", f"NUMA node {g.numa}",
                                 RemedyKind.REPAIR, "the NIC is in a slot of the other CPU socket: "
                                 "move it to the slot the golden host uses"))
        if w.link_layer and g.link_layer and w.link_layer != g.link_layer:
            out.append(Deviation("nic.mode", dev, w.link_layer, g.link_layer, RemedyKind.REIMAGE,
                                 "set LINK_TYPE_P1 with mlxconfig as on the golden host, then reboot"))
    return out


def golden_doubts(manifest: TopologyManifest) -> list[str]:
    """What looks wrong on the golden host itself: every host will be held to it, so a GPU with
    fewer links than its peers or than its model has, a slow link, a NIC across the socket or
    ACS on above a GPU is worth a second look before the manifest is committed."""
    out: list[str] = []
    counts = Counter(g.nvlink.links for g in manifest.gpus if g.nvlink)
    usual = counts.most_common(1)[0][0] if counts else None
    speeds = Counter(g.nvlink.speed_gbs for g in manifest.gpus if g.nvlink and g.nvlink.speed_gbs)
    usual_speed = speeds.most_common(1)[0][0] if speeds else None
    for g in manifest.gpus:
        spec = nvlink_spec(g.model)
        links = g.nvlink.links if g.nvlink else 0
        if spec and links != spec.links:
            out.append(f"GPU{g.index}: {links} NVLinks, a {g.model} has {spec.links}")
        elif usual is not None and links != usual:
            out.append(f"GPU{g.index}: {links} NVLinks, the other GPUs have {usual}")
        speed = spec.speed_gbs if spec else usual_speed
        if speed and g.nvlink and g.nvlink.speed_gbs and g.nvlink.speed_gbs < speed * 0.95:
            out.append(f"GPU{g.index}: a link at {g.nvlink.speed_gbs:g} GB/s (expected {speed:g})")
        if g.nearest_nic and g.nearest_nic.relation == "SYS":
            out.append(f"GPU{g.index}: its nearest NIC is across the CPU socket (SYS)")
    out += [f"ACS on at bridge {a}" for a, p in manifest.pcie.items() if p.role == "bridge" and p.acs]
    return out
