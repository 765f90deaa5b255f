"""The small interfaces the workflow uses to drive a host's BMC, whatever its vendor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


class PowerState(StrEnum):
    """Redfish PowerState values."""

    ON = "On"
    OFF = "Off"
    POWERING_ON = "PoweringOn"
    POWERING_OFF = "PoweringOff"
    PAUSED = "Paused"


class PowerAction(StrEnum):
    """What the user asks for; implementations map these to the ResetTypes a BMC allows."""

    ON = "on"
    OFF = "off"  # immediate (ForceOff)
    SHUTDOWN = "shutdown"  # graceful, then wait
    RESTART = "restart"  # force restart
    CYCLE = "cycle"  # power cycle: off (if on) then on


class BootTarget(StrEnum):
    """Redfish BootSourceOverrideTarget values the workflow uses."""

    PXE = "Pxe"
    HTTP = "UefiHttp"
    DISK = "Hdd"
    CD = "Cd"


# Where a port sits, as far as the BMC says (NicPort.location).
LOCATION_EMBEDDED = "embedded"  # on the motherboard (LOM)
LOCATION_OCP = "ocp"  # OCP/mezzanine slot: the server's "LOM" on most current designs
LOCATION_SLOT = "slot"  # an add-in PCIe card
LOCATION_USB = "usb"  # a USB network device (BMC host interface, dongle)
ONBOARD_LOCATIONS = frozenset({LOCATION_EMBEDDED, LOCATION_OCP})


@dataclass(frozen=True)
class NicPort:
    """One network port as seen by the BMC, with the facts the NIC rules use."""

    id: str
    mac: str  # lower-case, colon separated
    name: str | None = None
    link_up: bool | None = None  # None: the BMC does not say
    speed_mbps: int | None = None
    source: str = ""  # the Redfish URI it was read from
    onboard: bool | None = None
    location: str | None = None  # one of the LOCATION_* values
    location_from: str | None = None  # which Redfish property (and value) said so
    boot_options: tuple[str, ...] = ()  # firmware network boot entries naming this MAC
    pcie_slot: str | None = None  # the slot's service label, e.g. "PCIe 27"
    vendor: str | None = None  # adapter manufacturer and model
    excluded: str | None = None  # why this port can never network-boot the host

    @property
    def link(self) -> str:
        """``up``, ``down`` or ``unknown`` (the BMC reports no link state)."""
        return "unknown" if self.link_up is None else "up" if self.link_up else "down"


# How the BMC's boot code learns which port to aim a network boot at (iDRAC PxeDev1Interface,
# iLO UefiTargetBootSourceOverride): the caller's choice among the ports the BMC reported,
# with its warnings. The choice is site policy (workflow/nic_choice.py), never the BMC's.
BootPortChooser = Callable[[Sequence[NicPort]], tuple[NicPort, list[str]]]


@dataclass(frozen=True)
class Drive:
    """One storage device as seen by the BMC."""

    id: str
    serial: str | None = None
    model: str | None = None
    size_bytes: int | None = None
    media: str | None = None  # HDD, SSD
    protocol: str | None = None  # NVMe, SATA, SAS
    wwn: str | None = None


@dataclass
class HostFacts:
    """What discovery learned of a host through its BMC."""

    manufacturer: str | None = None
    model: str | None = None
    serial: str | None = None
    uuid: str | None = None
    power_state: str | None = None
    bios_version: str | None = None
    bmc_firmware: str | None = None
    bmc_datetime: datetime | None = None
    clock_skew_s: float | None = None  # BMC clock minus local clock
    nics: list[NicPort] = field(default_factory=list)
    drives: list[Drive] = field(default_factory=list)
    firmware: dict[str, str] = field(default_factory=dict)
    provisioning_mac: str | None = None
    boot_mode: str | None = None  # UEFI or Legacy
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class BMC(Protocol):
    """A host's management controller, as the workflow sees it."""

    def power_state(self) -> PowerState:
        """Return the current power state."""
        ...

    def power(self, action: PowerAction) -> None:
        """Perform a power action, falling back where the BMC does not allow a ResetType."""
        ...

    def wait_power(self, state: PowerState, timeout_s: float) -> None:
        """Block until the host reaches ``state``; raise on timeout."""
        ...

    def set_boot(self, target: BootTarget, *, persistent: bool = False) -> None:
        """Set a one-time (or persistent) boot override and verify it took effect."""
        ...

    def insert_media(self, image_url: str) -> None:
        """Insert a virtual CD/DVD image."""
        ...

    def eject_media(self) -> None:
        """Eject any inserted virtual media."""
        ...

    def discover(self) -> HostFacts:
        """Read system, NICs, drives, manager clock and firmware."""
        ...

    def close(self) -> None:
        """Log out (a BMC has few session slots)."""
        ...
