"""The verdicts of a baseline check: one item per entry on one host, and the host's report."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """How one baseline item compares with the host."""

    OK = "ok"
    DRIFT = "drift"  # the host runs another value/version
    PENDING = "pending"  # set, applied at the next reset
    NOT_APPLIED = "not-applied"  # staged, and the BIOS did not take it at the reset since
    FOREIGN = "foreign-pending"  # pending, staged by someone else: the next reset applies it
    MISSING = "missing"  # the component is not listed by the BMC
    UNKNOWN = "unknown"  # the firmware has no such attribute
    INVALID = "invalid"  # the wanted value is not one the firmware accepts
    READ_ONLY = "read-only"  # the attribute cannot be set over Redfish
    CONFLICT = "conflict"  # entries (or the firmware's own rules) want it two ways
    UNMAPPED = "unmapped"  # an intent with no mapping for this host's vendor


# Entries that cannot be applied as written: refused before anything is sent to the BMC.
REFUSED = frozenset({Status.UNKNOWN, Status.INVALID, Status.READ_ONLY, Status.CONFLICT,
                     Status.UNMAPPED})


@dataclass(frozen=True)
class Item:
    """One baseline entry on one host: what it has, what it should have."""

    kind: str  # "bios" or "firmware"
    name: str  # the BIOS attribute, or the firmware component
    have: str
    want: str
    status: Status
    hint: str = ""
    value: Any = field(default=None, compare=False)  # the typed value a BIOS entry sends
    entry: str = ""  # the baseline key it comes from (an intent, a glob), if not ``name``
    label: str = ""  # a name that stays the same across updates (metrics), if not ``name``

    @property
    def compliant(self) -> bool:
        """Whether the host meets this entry now."""
        return self.status is Status.OK

    @property
    def shown(self) -> str:
        """How a table names it: the intent and the attribute it sets."""
        return f"{self.entry}: {self.name}" if self.entry and self.entry != self.name \
            else self.name


@dataclass
class HostCompliance:
    """A host's baseline report, or why it could not be read."""

    host: str
    items: list[Item] = field(default_factory=list)
    reason: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def read(self) -> bool:
        """Whether the BMC was read."""
        return self.reason is None

    @property
    def compliant(self) -> bool:
        """Read, and every entry met."""
        return self.read and all(i.compliant for i in self.items)

    @property
    def drifted(self) -> list[Item]:
        """The entries not met."""
        return [i for i in self.items if not i.compliant]
