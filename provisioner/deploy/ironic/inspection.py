"""Compare what Ironic's inspection found with what we know of the host (the provisioning MAC
our BMC discovery chose, the profile's disks and root-disk hint) and say where they differ."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioner.deploy.ironic.hints import matching_disks

if TYPE_CHECKING:
    from provisioner.inventory.model import Host


@dataclass
class InspectionReport:
    """Differences between Ironic's inventory and ours: ``blocking`` ones fail the deploy."""

    macs: list[str] = field(default_factory=list)
    disks: int = 0
    memory_mib: int | None = None
    cpus: int | None = None
    notes: list[str] = field(default_factory=list)  # differences worth a look
    blocking: list[str] = field(default_factory=list)  # the deploy would go wrong

    def summary(self) -> str:
        found = (f"{len(self.macs)} NIC(s), {self.disks} disk(s)"
                 + (f", {self.memory_mib} MiB" if self.memory_mib else "")
                 + (f", {self.cpus} CPU(s)" if self.cpus else ""))
        diffs = self.blocking + self.notes
        return f"Ironic found {found}" + (f"; differs: {'; '.join(diffs)}" if diffs else
                                           "; matches our discovery")


def _macs(inventory: Mapping[str, Any]) -> list[str]:
    macs = []
    for iface in inventory.get("interfaces") or []:
        if isinstance(iface, Mapping) and iface.get("mac_address"):
            macs.append(str(iface["mac_address"]).lower())
    return sorted(set(macs))


def compare(host: Host, mac: str, data: Mapping[str, Any]) -> InspectionReport:
    """Ironic's ``GET /v1/nodes/{id}/inventory`` answer against the host and its MAC."""
    inventory = data.get("inventory") if isinstance(data.get("inventory"), Mapping) else data
    assert isinstance(inventory, Mapping)
    if not inventory:
        return InspectionReport(notes=["Ironic stored no inventory (its inspect interface "
                                       "keeps none): nothing to compare"])
    disks = [d for d in inventory.get("disks") or [] if isinstance(d, Mapping)]
    report = InspectionReport(macs=_macs(inventory), disks=len(disks))
    memory = inventory.get("memory")
    if isinstance(memory, Mapping) and isinstance(memory.get("physical_mb"), int):
        report.memory_mib = memory["physical_mb"]
    cpu = inventory.get("cpu")
    if isinstance(cpu, Mapping) and isinstance(cpu.get("count"), int):
        report.cpus = cpu["count"]
    if mac and report.macs and mac.lower() not in report.macs:
        report.blocking.append(
            f"the provisioning MAC {mac} is not among the NICs Ironic found "
            f"({', '.join(report.macs)})")
    expected = host.profile.disks.count if host.profile.disks else None
    if expected is not None and disks and len(disks) != expected:
        report.notes.append(f"{len(disks)} disk(s), the profile expects {expected}")
    hint = host.root_disk or host.profile.root_disk
    if hint is not None and disks:
        chosen = matching_disks(disks, hint)
        listing = ", ".join(
            f"{d.get('name')} serial={d.get('serial') or '?'} "
            f"{float(d.get('size') or 0) / 1e9:.0f} GB" for d in disks)
        if not chosen:
            report.blocking.append(f"no disk matches the root-disk hint (Ironic sees {listing})")
        elif len(chosen) > 1:
            report.blocking.append(
                f"{len(chosen)} disks match the root-disk hint ({', '.join(chosen)}): narrow it "
                "with a serial or wwn")
    return report
