"""The lab's address and naming plan: every name, address and path the lab uses, in one place.

The plan is a pure value computed from a few knobs (netns name, slot, host/disk counts), so that
`lab down` can find everything a crashed `lab up` left behind by naming convention alone.
Slot 0 is the contract address plan (docs/lab.md); other slots shift every lab network to
free ranges so that parallel test runs can each own a lab on one machine.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from netaddr import IPAddress, IPNetwork

from provisioner.exceptions import InputError

Firmware = Literal["bios", "uefi"]
FIRMWARES: tuple[Firmware, ...] = ("bios", "uefi")

DEFAULT_NETNS = "provlab"
STATE_ROOT = Path("/var/lib/provisioner-lab")
REPO_ROOT = Path(__file__).resolve().parent.parent.parent

# Names inside the namespace are fixed (they cannot clash with other labs' namespaces).
PROVISIONING_BRIDGE = "provbr0"
DATA_BRIDGE = "provbr1"
BMC_LINK = "provbmc0"
NETNS_UPLINK = "provlab-n"

MAX_HOSTS = 99  # BMC i sits at .(10+i) and the MAC's last byte is the host number
MAX_DISKS = 8
MAX_SLOT = 14
_NETNS_RE = re.compile(r"^[a-z][a-z0-9-]{0,10}$")
# uuid5 namespace for the lab's libvirt domains: stable across runs so the BMC config
# (which sushy keys by system UUID) can be written before the domain exists.
_LAB_UUID_NS = uuid.UUID("6c1a2f0e-4b7d-5c55-9a0e-7f3b9d2e1a01")


def lab_netns() -> str:
    """The lab namespace name: $PROVISIONER_LAB_NETNS or ``provlab``."""
    return os.environ.get("PROVISIONER_LAB_NETNS", "").strip() or DEFAULT_NETNS


def validate_netns(name: str) -> str:
    """Check a lab namespace name fits the interface-name budget (15 characters)."""
    if not _NETNS_RE.match(name):
        raise InputError(
            f"lab namespace name {name!r} is invalid",
            hint="use 1-11 characters a-z, 0-9 and '-', starting with a letter "
            "(set PROVISIONER_LAB_NETNS)",
        )
    return name


def lab_slot() -> int:
    """The lab address slot: $PROVISIONER_LAB_SLOT or 0 (the contract addresses)."""
    raw = os.environ.get("PROVISIONER_LAB_SLOT", "").strip() or "0"
    try:
        slot = int(raw)
    except ValueError:
        slot = -1
    if not 0 <= slot <= MAX_SLOT:
        raise InputError(
            f"PROVISIONER_LAB_SLOT={raw!r} is invalid",
            hint=f"use an integer 0..{MAX_SLOT}; 0 is the standard lab address plan",
        )
    return slot


def lab_state_dir(netns: str) -> Path:
    """Where the lab keeps its disks, keys, logs and manifest."""
    env = os.environ.get("PROVISIONER_LAB_STATE_DIR", "").strip()
    return Path(env) if env else STATE_ROOT / netns


def lab_inventory_dir() -> Path:
    """The inventory folder that receives ``lab/site.yml`` ($PROVISIONER_INVENTORY or repo)."""
    env = os.environ.get("PROVISIONER_INVENTORY", "").strip()
    return Path(env) if env else REPO_ROOT / "inventory"


@dataclass(frozen=True)
class LabHost:
    """One emulated server: its VM, NICs, disks and BMC."""

    index: int  # 1-based
    name: str  # inventory host name
    domain: str  # libvirt domain name
    uuid: str
    provisioning_mac: str
    data_mac: str
    bmc_address: IPAddress
    bmc_port: int
    bmc_user: str
    credentials: str  # reference name in the site file
    disk_serials: tuple[str, ...]
    root_disk_serial: str
    prov_veth_host: str  # root-namespace end (macvtap lower device)
    prov_veth_ns: str  # namespace end, enslaved to provbr0
    data_veth_host: str
    data_veth_ns: str

    @property
    def tag(self) -> str:
        return f"{self.index:02d}"


@dataclass(frozen=True)
class LabPlan:
    """Everything the lab creates, derived from its knobs."""

    netns: str = DEFAULT_NETNS
    slot: int = 0
    hosts: int = 2
    disks: int = 3
    firmware: Firmware = "bios"
    memory_mib: int = 1024
    state_dir: Path = field(default_factory=lambda: STATE_ROOT / DEFAULT_NETNS)
    inventory_dir: Path = field(default_factory=lab_inventory_dir)
    libvirt_uri: str = "qemu:///system"

    def __post_init__(self) -> None:
        validate_netns(self.netns)
        if not 0 <= self.slot <= MAX_SLOT:
            raise InputError(f"lab slot {self.slot} is out of range 0..{MAX_SLOT}")
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise InputError(f"--hosts {self.hosts} is out of range", hint=f"use 1..{MAX_HOSTS}")
        if not 1 <= self.disks <= MAX_DISKS:
            raise InputError(f"--disks {self.disks} is out of range", hint=f"use 1..{MAX_DISKS}")
        if self.firmware not in FIRMWARES:
            raise InputError(
                f"--firmware {self.firmware!r} is not supported", hint="use bios or uefi"
            )
        if not 256 <= self.memory_mib <= 8192:
            raise InputError(
                f"--memory {self.memory_mib} MiB is out of range", hint="use 256..8192"
            )

    @classmethod
    def from_env(cls, **knobs: object) -> LabPlan:
        """A plan for the lab named by the environment, with the given knobs."""
        netns = validate_netns(lab_netns())
        return cls(
            netns=netns,
            slot=lab_slot(),
            state_dir=lab_state_dir(netns),
            inventory_dir=lab_inventory_dir(),
            **knobs,  # type: ignore[arg-type]
        )

    # --- networks -------------------------------------------------------------------------
    def _octet(self, offset: int) -> int:
        return 16 * self.slot + offset

    @property
    def provisioning_net(self) -> IPNetwork:
        return IPNetwork(f"198.18.{self._octet(0)}.0/24")

    @property
    def data_net(self) -> IPNetwork:
        return IPNetwork(f"198.18.{self._octet(1)}.0/24")

    @property
    def bmc_net(self) -> IPNetwork:
        return IPNetwork(f"198.19.{self._octet(0)}.0/24")

    @property
    def uplink_net(self) -> IPNetwork:
        # Slot 0 keeps the contract's 198.18.254.0/24; other slots use their 16th /24.
        third = 254 if self.slot == 0 else self._octet(14)
        return IPNetwork(f"198.18.{third}.0/24")

    @property
    def server_address(self) -> IPAddress:
        """The router / next-server address on provbr0."""
        return self.provisioning_net.network + 1

    @property
    def data_address(self) -> IPAddress:
        return self.data_net.network + 1

    @property
    def bmc_gateway(self) -> IPAddress:
        return self.bmc_net.network + 1

    @property
    def host_uplink_address(self) -> IPAddress:
        """The root-namespace end of the veth: where the deploy HTTP server listens."""
        return self.uplink_net.network + 1

    @property
    def netns_uplink_address(self) -> IPAddress:
        return self.uplink_net.network + 2

    @property
    def routed_nets(self) -> tuple[IPNetwork, ...]:
        """The lab networks the root namespace reaches through the veth."""
        return (self.provisioning_net, self.data_net, self.bmc_net)

    @property
    def reserved_range(self) -> str:
        net = self.provisioning_net.network
        return f"{net + 1}-{net + 99}"

    @property
    def host_uplink(self) -> str:
        """Root-namespace end of the lab veth (``provlab-h`` for the default lab)."""
        return f"{self.netns}-h"

    @property
    def macvtap_probe(self) -> str:
        """A macvtap made and deleted by `lab up` to check the kernel supports them."""
        return f"{self.netns}-m"

    @property
    def mac_prefix(self) -> str:
        """The provisioning NICs' MAC prefix (the profile's NIC rule)."""
        return f"52:54:00:18:{2 * self.slot:02x}"

    @property
    def data_mac_prefix(self) -> str:
        return f"52:54:00:18:{2 * self.slot + 1:02x}"

    # --- names and paths ------------------------------------------------------------------
    @property
    def domain_prefix(self) -> str:
        return f"{self.netns}-host"

    @property
    def pool_name(self) -> str:
        return f"{self.netns}-disks"

    @property
    def disk_dir(self) -> Path:
        return self.state_dir / "disks"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def ssh_dir(self) -> Path:
        return self.state_dir / "ssh"

    @property
    def manifest_path(self) -> Path:
        return self.state_dir / "manifest.json"

    @property
    def site_dir(self) -> Path:
        return self.inventory_dir / "lab"

    @property
    def site_path(self) -> Path:
        return self.site_dir / "site.yml"

    @property
    def ca_bundle_path(self) -> Path:
        return self.site_dir / "ca.pem"

    @property
    def root_disk_index(self) -> int:
        """1-based index of the intended root disk: never the first one enumerated."""
        return 2 if self.disks >= 2 else 1

    def host_dir(self, host: LabHost) -> Path:
        return self.state_dir / host.name

    def console_log(self, host: LabHost) -> Path:
        return self.host_dir(host) / "console.log"

    def bmc_dir(self, host: LabHost) -> Path:
        return self.state_dir / f"bmc-{host.tag}"

    def password_file(self, host: LabHost) -> Path:
        return self.state_dir / f"bmc-{host.tag}.password"

    def disk_path(self, host: LabHost, k: int) -> Path:
        return self.disk_dir / self.volume_name(host, k)

    def volume_name(self, host: LabHost, k: int) -> str:
        return f"{host.name}-disk{k}.qcow2"

    def disk_size_gib(self, k: int) -> int:
        """The root disk is larger than the others, so size rules and serial rules agree."""
        return 16 if k == self.root_disk_index else 8

    def host(self, index: int) -> LabHost:
        """The plan of host ``index`` (1-based)."""
        if not 1 <= index <= MAX_HOSTS:
            raise InputError(f"lab host index {index} is out of range 1..{MAX_HOSTS}")
        tag = f"{index:02d}"
        name = f"lab-host{tag}"
        domain = f"{self.domain_prefix}{tag}"
        serials = tuple(f"PLAB-HOST{tag}-DISK{k}" for k in range(1, self.disks + 1))
        return LabHost(
            index=index,
            name=name,
            domain=domain,
            uuid=str(uuid.uuid5(_LAB_UUID_NS, f"{self.netns}/{domain}")),
            provisioning_mac=f"{self.mac_prefix}:{index:02x}",
            data_mac=f"{self.data_mac_prefix}:{index:02x}",
            bmc_address=self.bmc_net.network + 10 + index,
            bmc_port=443,
            bmc_user="admin",
            credentials=f"lab-bmc-{tag}",
            disk_serials=serials,
            root_disk_serial=serials[self.root_disk_index - 1],
            prov_veth_host=f"{self.netns}{tag}p",
            prov_veth_ns=f"vm{tag}p",
            data_veth_host=f"{self.netns}{tag}d",
            data_veth_ns=f"vm{tag}d",
        )

    @property
    def lab_hosts(self) -> list[LabHost]:
        return [self.host(i) for i in range(1, self.hosts + 1)]

    def owns_link(self, name: str) -> bool:
        """Whether a root-namespace link name belongs to this lab (for sweeping)."""
        return name in (self.host_uplink, self.macvtap_probe) or bool(
            re.fullmatch(rf"{re.escape(self.netns)}\d\d[pd]", name)
        )

    def owns_domain(self, name: str) -> bool:
        """Whether a libvirt domain name belongs to this lab (for sweeping)."""
        return bool(re.fullmatch(rf"{re.escape(self.domain_prefix)}\d\d", name))
