"""The interface every deploy backend implements, and the registry that picks one by name."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

from provisioner.settings import DEFAULT_HOST_LINK_GBPS

if TYPE_CHECKING:
    from provisioner.bmc.base import BMC
    from provisioner.inventory.model import Host, Site

DeployMethod = Literal["image", "autoinstall"]

# Called by a backend as a host moves through its phases, e.g. ("gpu-r01-u02", "pxe", "booting
# deploy ramdisk"); the workflow turns these into progress lines, timings and state events.
ProgressFn = Callable[[str, str, str], None]

HEADROOM = 0.8  # share of the uplink the image streams may fill


def image_streams(uplink_gbps: float, host_link_gbps: float, headroom: float = HEADROOM) -> int:
    """How many host links fill ``headroom`` of the uplink (at least 1): the image streams a
    deploy server admits at once, and the workflow's wave when a backend does not gate them."""
    return max(1, math.floor(uplink_gbps * headroom / host_link_gbps))


@dataclass(frozen=True)
class StreamStats:
    """What a deploy server's image-stream gate has seen (the workflow sizes hosts in flight)."""

    limit: int
    active: int
    waiting: int  # tickets queued
    held: int  # requests waiting inside the server
    admitted: int  # streams handed out so far
    mean_wait_s: float  # ticket queued -> admitted, over all admissions
    mean_stream_s: float  # admitted -> released, over finished streams (0: none yet)
    peers: int = 0  # hosts serving the image to others now (peer serving)
    peer_streams: int = 0  # downloads from those peers now
    peer_admitted: int = 0  # downloads handed to peers so far


@dataclass
class DeployRequest:
    """Everything a backend needs to install one host.

    ``mac`` is the port the host network-boots from (the site file's provisioning_mac, else
    the profile's NIC rule over what discovery read). What discovery learned beyond it is
    typed here for backends with their own controller: ``macs`` every Ethernet MAC of the
    host (MAAS matches machines by any of them), ``system_path`` the host's Redfish
    ComputerSystem (an Ironic node's ``redfish_system_id``; MAAS's ``node_id`` is its last
    segment, ``system_id``), ``bmc_vendor`` the vendor the BMC reported ("dell", "hpe",
    ..., "generic"). All stay empty when the run did not read the BMC.
    """

    host: Host
    mac: str  # provisioning MAC
    method: DeployMethod = "image"
    bmc: BMC | None = None  # the embedded backend drives power/boot itself; MAAS drives its own
    attempt: int = 1
    timeout_s: float = 1800.0
    macs: tuple[str, ...] = ()
    system_path: str | None = None
    bmc_vendor: str | None = None
    user_data: str | None = None  # cloud-init user data instead of the site's own

    @property
    def system_id(self) -> str | None:
        """The Id of the host's ComputerSystem (``Systems/<Id>``), when discovery read it."""
        if not self.system_path:
            return None
        return self.system_path.rstrip("/").rsplit("/", 1)[-1] or None


@dataclass
class DeployOutcome:
    """How one host's deploy ended."""

    host: str
    ok: bool
    reason: str = ""
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    log: str = ""


class DeployBackend(ABC):
    """Installs an OS on hosts. Thread-safe: ``deploy`` is called from several workers at once."""

    name: ClassVar[str]
    # True when deploy() drives the host's BMC itself (needs request.bmc, hence discovery);
    # False when the backend's own controller powers hosts (MAAS uses its Redfish driver).
    drives_power: ClassVar[bool] = True
    # True when the backend runs its own services on this machine that two runs cannot both
    # start (the embedded HTTP port, dnsmasq and its reservations): runs of one site then take
    # turns with it (state/locks.py); False when a controller elsewhere deploys (MAAS).
    one_per_site: ClassVar[bool] = False

    def image_streams(self, site: Site) -> int | None:
        """Image streams this backend's server admits at once; None when it does not gate them."""
        return None

    def host_link_gbps(self, site: Site) -> float:
        """The hosts' provisioning link speed in this backend's settings (the waves' unit)."""
        return DEFAULT_HOST_LINK_GBPS

    def stream_stats(self) -> StreamStats | None:
        """The image-stream gate's figures so far; None without a gate (or before prepare)."""
        return None

    def serves_peers(self, site: Site) -> bool:
        """Whether hosts serve the image to each other (the image then bounds no wave)."""
        return False

    @abstractmethod
    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        """Start services and allow exactly these hosts to boot (unknown MACs get nothing)."""

    @abstractmethod
    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        """Install one host and return when it runs its new OS from disk, or failed."""

    @abstractmethod
    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        """Make a deployed host ready for a re-install (MAAS: release). Never erases data disks."""

    @abstractmethod
    def close(self) -> None:
        """Stop what ``prepare`` started."""


_REGISTRY: dict[str, type[DeployBackend]] = {}


def register_backend(cls: type[DeployBackend]) -> type[DeployBackend]:
    """Class decorator: make a backend selectable by its ``name`` in the site file."""
    _REGISTRY[cls.name] = cls
    return cls


def backend_class(name: str) -> type[DeployBackend]:
    """Return the backend class registered under ``name``."""
    # Import the built-in backends lazily so that their heavy dependencies load only when used.
    import importlib

    for mod in ("provisioner.deploy.embedded", "provisioner.deploy.maas",
                "provisioner.deploy.ironic"):
        try:
            importlib.import_module(mod)
        except ImportError as exc:  # pragma: no cover - only when a backend package is broken
            raise RuntimeError(f"deploy backend module {mod} failed to import: {exc}") from exc
    if name not in _REGISTRY:
        from provisioner.exceptions import InputError

        raise InputError(
            f"unknown deploy backend {name!r}",
            hint=f"set settings.deploy_backend to one of: {', '.join(sorted(_REGISTRY))}",
        )
    return _REGISTRY[name]
