"""The resolved site: racks, hosts with their profile, BMC and planned addresses."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netaddr import IPAddress, IPNetwork

from provisioner.exceptions import InputError
from provisioner.inventory.spec import (
    CredentialSpec,
    DiskSpec,
    FirmwareRequirement,
    NicRule,
    RootDiskHint,
    Settings,
)
from provisioner.wording import suggest

__all__ = [
    "BMCRef",
    "BiosSetting",
    "Host",
    "HostProfile",
    "Network",
    "NicRule",
    "Rack",
    "RootDiskHint",
    "Site",
]


@dataclass(frozen=True)
class Network:
    """A planned network of the site."""

    name: str
    cidr: IPNetwork
    gateway: IPAddress | None
    reserved: tuple[str, ...]
    dns: tuple[str, ...]
    vlan: int | None
    mtu: int | None
    rack_stride: int
    planned: bool


@dataclass(frozen=True)
class BiosSetting:
    """One entry of a BIOS baseline as the site file has it: the value YAML read, the plain
    scalar as written where YAML typed it (``On`` is a boolean to YAML 1.1 and a word to a
    BIOS enumeration), and where it is written."""

    value: bool | int | str
    written: str | None = None
    file: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        """``site.yml:12`` (or nothing, for an entry not read from a file)."""
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class HostProfile:
    """What a kind of host contains and how it is provisioned."""

    name: str
    gpus: int
    gpu_model: str | None
    nvswitch: bool
    ib_hcas: int
    ib_rate_gbps: int | None
    units: int
    provisioning_nic: NicRule
    disks: DiskSpec | None
    root_disk: RootDiskHint | None
    vars: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    bios: dict[str, BiosSetting] = field(default_factory=dict, hash=False, compare=False)
    firmware: tuple[FirmwareRequirement, ...] = ()


@dataclass(frozen=True)
class BMCRef:
    """How to reach a host's BMC. ``credentials`` is the name of a reference, never a secret."""

    address: str
    port: int | None
    vendor: str
    credentials: str
    verify_tls: bool
    ca_bundle: Path | None
    system: str | None = None  # the ComputerSystem Id where one BMC serves several hosts

    @property
    def url(self) -> str:
        """Base URL of the Redfish service."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"https://{host}:{self.port}" if self.port else f"https://{host}"


@dataclass(frozen=True)
class Rack:
    """A rack and where it stands."""

    name: str
    index: int
    units: int
    location: dict[str, str | int] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Host:
    """One host, with everything resolved."""

    name: str
    rack: str
    u: int
    profile: HostProfile
    bmc: BMCRef
    provisioning_mac: str | None
    root_disk: RootDiskHint | None
    addresses: dict[str, IPAddress] = field(hash=False, compare=False)
    vars: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    line: int | None = None  # where the host is declared in the site file
    bios: dict[str, BiosSetting] = field(default_factory=dict, hash=False, compare=False)
    firmware: tuple[FirmwareRequirement, ...] = field(default=(), hash=False, compare=False)


@dataclass
class Site:
    """A loaded, validated site."""

    name: str
    path: Path
    settings: Settings
    networks: dict[str, Network]
    credentials: dict[str, CredentialSpec]
    profiles: dict[str, HostProfile]
    racks: list[Rack]
    hosts: list[Host]
    vars: dict[str, Any] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        """The site's directory (relative paths in the site file are relative to it)."""
        return self.path.parent

    def resolve_path(self, value: str | Path) -> Path:
        """A path from the site file, relative to the site's directory, ``~`` expanded."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.dir / p)

    def host(self, name: str) -> Host:
        """The host called ``name``; InputError if there is none."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise InputError(
            f"no host {name!r} in site {self.name!r}",
            hint=self._host_hint(name),
        )

    def _host_hint(self, name: str) -> str:
        """A did-you-mean for a mistyped host name, else where the host list is."""
        listing = f"`provision inventory show --site {self.name}` lists the hosts"
        guess = suggest(name, (h.name for h in self.hosts))
        return f"did you mean {guess!r}? ({listing})" if guess else listing

    def select(self, names: Sequence[str] | None = None, rack: str | None = None) -> list[Host]:
        """Hosts matching names or globs (all when none), optionally within one rack."""
        hosts = self.hosts
        if rack is not None:
            if rack not in {r.name for r in self.racks}:
                raise InputError(
                    f"no rack {rack!r} in site {self.name!r}",
                    hint=(
                        f"did you mean {guess!r}? "
                        if (guess := suggest(rack, (r.name for r in self.racks)))
                        else ""
                    )
                    + "racks: "
                    + ", ".join(r.name for r in self.racks),
                )
            hosts = [h for h in hosts if h.rack == rack]
        if not names:
            return list(hosts)
        chosen: dict[str, Host] = {}
        for pattern in names:
            matched = [h for h in hosts if fnmatch.fnmatchcase(h.name, pattern)]
            if not matched:
                raise InputError(
                    f"no host matches {pattern!r} in site {self.name!r}"
                    + (f" rack {rack!r}" if rack else ""),
                    hint=self._host_hint(pattern),
                )
            for h in matched:
                chosen[h.name] = h
        # keep inventory order: it is the physical order, and what users expect to read
        return [h for h in hosts if h.name in chosen]
