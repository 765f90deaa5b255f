"""What a MAAS run would change, host by host: the dry-run the CLI prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.table import Table


@dataclass
class HostPlan:
    """The actions the backend would take for one host, in order."""

    host: str
    mac: str
    system_id: str | None  # None: not in MAAS yet
    maas_status: str  # MAAS's status_name, or "absent"
    actions: list[str] = field(default_factory=list)
    blocked: str | None = None  # why the backend would refuse to touch this host

    @property
    def changes(self) -> bool:
        """Whether anything would change for this host."""
        return bool(self.actions) and self.blocked is None


@dataclass
class MAASPlan:
    """A dry run against one MAAS region: nothing was changed to compute it."""

    url: str
    hosts: list[HostPlan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # region-wide: a run would stop early

    def host(self, name: str) -> HostPlan:
        """The plan of one host (KeyError if it is not in the plan)."""
        for h in self.hosts:
            if h.host == name:
                return h
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``--json`` output)."""
        return {
            "backend": "maas",
            "url": self.url,
            "problems": self.problems,
            "hosts": [
                {
                    "host": h.host,
                    "mac": h.mac,
                    "system_id": h.system_id,
                    "maas_status": h.maas_status,
                    "actions": h.actions,
                    "blocked": h.blocked,
                }
                for h in self.hosts
            ],
        }

    def render(self) -> str:
        """Plain text, one block per host."""
        out = [f"MAAS {self.url}: dry run, nothing changed"]
        out.extend(f"PROBLEM: {p}" for p in self.problems)
        for h in self.hosts:
            sid = h.system_id or "new"
            out.append(f"{h.host} [{h.mac}] MAAS {sid} ({h.maas_status})")
            if h.blocked:
                out.append(f"  - refuse: {h.blocked}")
            elif not h.actions:
                out.append("  - no change")
            out.extend(f"  - {a}" for a in (h.actions if not h.blocked else []))
        return "\n".join(out)

    def __rich__(self) -> Table:
        table = Table(
            title=f"MAAS {self.url}: dry run, nothing changed",
            caption="\n".join(f"PROBLEM: {p}" for p in self.problems) or None,
        )
        for col in ("host", "MAC", "system_id", "MAAS status", "would do"):
            table.add_column(col)
        for h in self.hosts:
            todo = f"refuse: {h.blocked}" if h.blocked else ("\n".join(h.actions) or "no change")
            table.add_row(h.host, h.mac, h.system_id or "new", h.maas_status, todo)
        return table
