"""The schema of a site file (inventory/<site>/site.yml), as pydantic models.

These models describe what a user writes. :mod:`provisioner.inventory.model` holds the resolved
site (templates expanded, defaults applied, addresses planned) that the rest of the code uses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from provisioner.macaddr import canonical_mac
from provisioner.secrets import SecretRef
from provisioner.settings.embedded import EmbeddedSettings
from provisioner.settings.ironic import IronicSettings
from provisioner.settings.maas import MAASSettings

MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
MAC_PREFIX_RE = re.compile(r"^([0-9a-f]{2}:){0,5}[0-9a-f]{2}$")
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

Vendor = Literal["generic", "dell", "hpe", "supermicro", "lenovo", "nvidia"]


def normalise_mac(value: str) -> str:
    """A MAC as provisioner.macaddr writes it (from ``-``, Cisco ``.`` or bare-hex forms); a
    prefix ("52-54-00") or junk the same way, lower-case and colon-separated, for the
    validators to judge."""
    full = canonical_mac(value)
    if full is not None:
        return full
    v = value.strip().lower().replace("-", ":")
    if "." in v:  # Cisco style aabb.ccdd
        raw = v.replace(".", "")
        v = ":".join(raw[i : i + 2] for i in range(0, len(raw), 2))
    return v


class Strict(BaseModel):
    """Unknown keys are errors: a typo in a site file must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CredentialSpec(Strict):
    """A named credentials reference: user name plus where the password lives."""

    username: str
    password: SecretRef


class NetworkSpec(Strict):
    """A network of the site, planned by netaddr."""

    cidr: str
    gateway: str | None = None
    reserved: list[str] = Field(default_factory=list)  # "a.b.c.d", "a.b.c.d-a.b.c.e" or a CIDR
    dns: list[str] = Field(default_factory=list)
    vlan: int | None = None
    mtu: int | None = None
    # Addresses per rack in the plan: host address = pool[(rack.index-1)*rack_stride + (u-1)].
    # Fixed per network so that adding a host or a rack never renumbers anyone.
    rack_stride: int = Field(default=64, ge=1)
    planned: bool = True  # False: addresses only where pinned (e.g. a BMC network run by DHCP)


class NicRule(Strict):
    """How to pick the provisioning NIC among the ports the BMC reports."""

    port_id: str | None = None
    name: str | None = None
    mac_prefix: str | None = None
    rule: Literal["first-onboard-up", "first-up"] | None = None  # workflow.nic_choice.KNOWN_RULES

    @model_validator(mode="after")
    def _one_rule(self) -> NicRule:
        given = [k for k in ("port_id", "name", "mac_prefix", "rule") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of port_id, name, mac_prefix or rule")
        if self.mac_prefix and not MAC_PREFIX_RE.match(normalise_mac(self.mac_prefix)):
            raise ValueError(f"mac_prefix {self.mac_prefix!r} is not like 'b8:3f:d2'")
        return self


class RootDiskHint(Strict):
    """Which disk receives the OS. Several fields narrow the match; it must match exactly one."""

    serial: str | None = None
    wwn: str | None = None
    by_path: str | None = None
    model: str | None = None
    size_gb_min: float | None = None
    size_gb_max: float | None = None

    @model_validator(mode="after")
    def _something(self) -> RootDiskHint:
        if not any(v is not None for v in self.model_dump().values()):
            raise ValueError("give at least one of serial, wwn, by_path, model, size_gb_min/max")
        if (
            self.size_gb_min is not None
            and self.size_gb_max is not None
            and self.size_gb_min > self.size_gb_max
        ):
            raise ValueError("size_gb_min is larger than size_gb_max")
        return self


class DiskSpec(Strict):
    """Disks a host of this profile is expected to have."""

    count: int | None = Field(default=None, ge=0)
    data_model: str | None = None


def _bios_scalar(value: Any) -> Any:
    """One error that says what a BIOS value may be (not one per member of the union)."""
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, list | dict):
        what = "a list" if isinstance(value, list) else "a mapping"
        raise ValueError(f"a BIOS value is one word, whole number or true/false, not {what}")
    what = "empty" if value is None else f"a {type(value).__name__}"
    raise ValueError(f"a BIOS value is a word, a whole number or true/false, not {what}: "
                     "quote it to keep it as text")


# Redfish attribute values are enumerations, strings, integers or booleans.
BiosValue = Annotated[bool | int | str, BeforeValidator(_bios_scalar)]
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class FirmwareImage(Strict):
    """Where the image that brings a component to its baseline lives, and its checksum."""

    url: str
    sha256: str
    # its size: the fetch stops past it (default cap: 8 GiB)
    size_bytes: int | None = Field(default=None, gt=0)

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not SHA256_RE.match(v.strip().lower()):
            raise ValueError(f"sha256 {v!r} is not 64 hexadecimal digits")
        return v.strip().lower()


class FirmwareRequirement(Strict):
    """A firmware component a host must run: which one, which version(s), the image for it.

    ``component`` is a glob matched, case-insensitively, against the Id and the Name of the
    BMC's FirmwareInventory members (e.g. ``BMC``, ``*BIOS*``, ``NIC.Slot.5-*``); every member
    it matches must run an allowed version. ``versions`` may hold globs (``28.39.*``).
    """

    component: str = Field(min_length=1)
    version: str | None = None
    versions: list[str] | None = None
    image: FirmwareImage | None = None
    required: bool = True  # a component the BMC does not list is drift

    @model_validator(mode="after")
    def _one_version(self) -> FirmwareRequirement:
        if (self.version is None) == (self.versions is None):
            raise ValueError("give exactly one of version or versions")
        if self.versions is not None and not self.versions:
            raise ValueError("versions is empty: list the allowed versions")
        return self

    @property
    def allowed(self) -> list[str]:
        """The allowed versions (globs), whichever key gave them."""
        return [self.version] if self.version is not None else list(self.versions or [])


def merge_firmware(
    base: Sequence[FirmwareRequirement], own: Sequence[FirmwareRequirement]
) -> tuple[FirmwareRequirement, ...]:
    """A profile's firmware baseline with a host's entries replacing those of the same component."""
    mine = {r.component.lower() for r in own}
    return (*(r for r in base if r.component.lower() not in mine), *own)


class ProfileSpec(Strict):
    """A kind of host: what it contains and how it is provisioned."""

    gpus: int = Field(default=0, ge=0)
    gpu_model: str | None = None
    nvswitch: bool = False
    ib_hcas: int = Field(default=0, ge=0)
    ib_rate_gbps: int | None = None
    units: int = Field(default=1, ge=1, le=16)  # rack units the chassis occupies
    provisioning_nic: NicRule
    disks: DiskSpec | None = None
    root_disk: RootDiskHint | None = None
    bios: dict[str, BiosValue] = Field(default_factory=dict)  # BIOS attribute baseline
    firmware: list[FirmwareRequirement] = Field(default_factory=list)  # firmware baseline
    vars: dict[str, Any] = Field(default_factory=dict)


class BMCSpec(Strict):
    """A host's BMC. ``credentials`` names an entry of the site's ``credentials`` map."""

    address: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    vendor: Vendor | None = None
    credentials: str | None = None
    verify_tls: bool | None = None
    ca_bundle: str | None = None
    # Where one BMC serves several nodes (a blade's node controller, a twin chassis): the Id of
    # this host's ComputerSystem, e.g. "Node1". Without it the first host System is used.
    system: str | None = Field(default=None, min_length=1, max_length=128,
                               pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class HostSpec(Strict):
    """One host at a U position of a rack."""

    u: int = Field(ge=1)
    name: str | None = None
    profile: str | None = None
    bmc: BMCSpec | None = None
    provisioning_mac: str | None = None
    root_disk: RootDiskHint | None = None
    # Per-host baseline overrides: attributes replace the profile's one by one, a firmware
    # entry replaces the profile's entry for the same component.
    bios: dict[str, BiosValue] = Field(default_factory=dict)
    firmware: list[FirmwareRequirement] = Field(default_factory=list)
    addresses: dict[str, str] = Field(default_factory=dict)  # pinned, per network
    vars: dict[str, Any] = Field(default_factory=dict)

    @field_validator("provisioning_mac")
    @classmethod
    def _mac(cls, v: str | None) -> str | None:
        if v is None:
            return v
        mac = normalise_mac(v)
        if not MAC_RE.match(mac):
            raise ValueError(f"{v!r} is not a MAC address like 'b8:3f:d2:00:00:01'")
        return mac


class RackDefaults(Strict):
    """Values every host of a rack inherits unless it sets its own."""

    profile: str | None = None
    bmc: BMCSpec | None = None


class RackSpec(Strict):
    """A rack: its stable index (used by the address plan), location and hosts."""

    name: str
    index: int = Field(ge=1)
    location: dict[str, str | int] = Field(default_factory=dict)
    units: int = Field(default=42, ge=1, le=60)
    host_name_template: str | None = None
    defaults: RackDefaults | None = None
    hosts: list[HostSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"rack name {v!r}: use lower-case letters, digits and '-'")
        return v


class RedfishSettings(Strict):
    """How to talk to BMCs."""

    verify_tls: bool = True
    ca_bundle: str | None = None
    # Per request. AMI-based BMCs (DGX H100) answer some resources in over 10 s; docs/redfish.md
    # "Slow BMCs" derives these defaults.
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    retries: int = Field(default=3, ge=0, le=10)
    max_parallel: int = Field(default=512, ge=1)  # one wave for a 511-host cluster
    # Requests in flight to one BMC: BMC web servers serve a handful at once, and a BMC that
    # answers 503 to concurrency is read with fewer. Total: max_parallel x connections at most.
    connections: int = Field(default=4, ge=1, le=16)
    discovery_deadline_s: float = Field(default=600.0, gt=0)  # per host, all requests
    # Per host, all of its BMC traffic in power, boot, bios and firmware verbs (their own
    # waits, a reset or a task, are added): discovery reads the most, so its bound holds.
    host_deadline_s: float = Field(default=600.0, gt=0)


class ImageSettings(Strict):
    """The OS image written by the image deploy method."""

    url: str | None = None
    sha256: str | None = None
    format: Literal["raw", "qcow2"] = "raw"
    size_bytes: int | None = None


class FirmwareServerSettings(Strict):
    """Where `provision firmware update` serves verified images to the BMCs from."""

    url: str  # as the BMCs reach this machine, e.g. http://10.0.0.5:8089
    listen: str = "0.0.0.0"

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/:]+(:\d{1,5})?/?$", v):
            raise ValueError(f"{v!r} is not like 'http://10.0.0.5:8089' (scheme, host, port)")
        return v.rstrip("/")


class Settings(Strict):
    """Site-wide settings."""

    deploy_backend: str = "embedded"
    deploy_method: Literal["image", "autoinstall"] = "image"
    ntp_servers: list[str] = Field(default_factory=list)
    apt_proxy: str | None = None
    uplink_gbps: float = Field(default=10.0, gt=0)
    max_parallel: int | None = Field(default=None, ge=1)
    deploy_retries: int = Field(default=1, ge=0)
    deploy_timeout_s: float = Field(default=1800.0, gt=0)
    max_clock_skew_s: float = Field(default=60.0, gt=0)
    ssh_user: str = "provision"
    ssh_authorized_keys: list[str] = Field(default_factory=list)
    ssh_private_key: str | None = None
    golden_after: int = Field(default=3, ge=1)
    redfish: RedfishSettings = Field(default_factory=RedfishSettings)
    image: ImageSettings | None = None
    # Each deploy backend's block, typed by the model its backend owns (provisioner/settings/,
    # a layer below the inventory so that the inventory never imports deploy/); absent: None.
    embedded: EmbeddedSettings | None = None
    maas: MAASSettings | None = None
    ironic: IronicSettings | None = None
    health: dict[str, Any] = Field(default_factory=dict)
    expected_firmware: dict[str, Any] = Field(default_factory=dict)
    firmware_server: FirmwareServerSettings | None = None

    @model_validator(mode="after")
    def _ironic_block(self) -> Settings:
        # the engine is elsewhere: without its address nothing could run, so say it at load
        if self.deploy_backend == "ironic" and self.ironic is None:
            raise ValueError("deploy_backend ironic needs settings.ironic (at least its url; "
                             "see docs/ironic.md)")
        return self


class SiteSpec(Strict):
    """A whole site file."""

    site: str
    description: str | None = None
    settings: Settings = Field(default_factory=Settings)
    networks: dict[str, NetworkSpec] = Field(default_factory=dict)
    credentials: dict[str, CredentialSpec] = Field(default_factory=dict)
    profiles: dict[str, ProfileSpec] = Field(default_factory=dict)
    racks: list[RackSpec] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)  # site-wide Ansible variables
