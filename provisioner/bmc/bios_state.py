"""A host's BIOS as its BMC reports it: current and pending values, where they are written,
what its attribute registry says, and what the BMC said when it last applied settings.
Values only: reading them is the Bios capability's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner.bmc.bios_registry import Registry


@dataclass
class BiosState:
    """A host's BIOS as its BMC reports it."""

    path: str
    attributes: dict[str, Any]
    pending: dict[str, Any] = field(default_factory=dict)  # applied at the next reset
    settings_path: str | None = None
    apply_times: tuple[str, ...] = ()
    registry: Registry | None = None  # None: the BMC publishes none we could read
    warnings: list[str] = field(default_factory=list)
    # @Redfish.Settings: when the BMC last applied pending settings, and what it said then.
    settings_time: str | None = None
    settings_messages: tuple[dict[str, Any], ...] = ()

    def known(self, name: str) -> bool:
        """Whether the firmware knows the attribute (registry first, else current values)."""
        if self.registry is not None:
            return name in self.registry or name in self.attributes
        return name in self.attributes

    def names(self) -> list[str]:
        """Every attribute name the firmware offers."""
        return sorted({*self.attributes, *(self.registry.attributes if self.registry else {})})


def settings_outcome(settings: dict[str, Any]) -> tuple[str | None, tuple[dict[str, Any], ...]]:
    """``@Redfish.Settings``' Time (when the BMC last applied pending settings) and the
    Messages it left then."""
    time = settings.get("Time")
    messages = tuple(m for m in settings.get("Messages") or [] if isinstance(m, dict))
    return (time if isinstance(time, str) and time else None), messages
