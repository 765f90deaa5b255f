"""``settings.ironic``: the Ironic deploy backend's settings (owned by deploy/ironic/).

The model lives below the inventory so that the site schema can type the block without the
inventory importing deploy/; the backend's behaviour around it is deploy/ironic/settings.py.
docs/ironic.md says what each field maps to in Ironic.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from provisioner.secrets import SecretRef
from provisioner.settings import DEFAULT_HOST_LINK_GBPS

# The API version every request pins (X-OpenStack-Ironic-API-Version): 1.81 (Ironic 2023.1,
# "Antelope") adds the node inventory that inspection is compared with; everything else the
# backend uses is older (conductor groups 1.46, per-node automated_clean 1.47, configdrive as
# a dict 1.56, rebuild with a configdrive 1.35).
MIN_MICROVERSION = (1, 81)
DEFAULT_MICROVERSION = "1.81"
_MICROVERSION = re.compile(r"^1\.(\d{1,3})$")
# Ironic's own limits on a conductor group name (ironic.api.controllers.v1.utils).
_GROUP = re.compile(r"^[A-Za-z0-9_.{}-]{0,255}$")
_GROUP_FIELDS = re.compile(r"{(\w+)}")
GROUP_PLACEHOLDERS = ("rack", "room", "row", "site")
DeployInterface = Literal["direct", "ramdisk", "custom-agent", "fake"]


def _secret_ref(v: object, what: str) -> object:
    if v is not None and not isinstance(v, dict | SecretRef):  # the message must not repeat it
        raise ValueError(f"{what} must be a reference like {{env: VAR}} or {{file: PATH}}, "
                         "never the secret itself")
    return v


class IronicAuth(BaseModel):
    """How requests authenticate: none (noauth), HTTP basic, or a Keystone token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["none", "http_basic", "keystone_token"] = "none"
    username: str | None = None
    password: SecretRef | None = None  # http_basic
    token: SecretRef | None = None  # keystone_token: sent as X-Auth-Token

    @field_validator("password", "token", mode="before")
    @classmethod
    def _reference(cls, v: object) -> object:
        return _secret_ref(v, "an Ironic credential")

    @model_validator(mode="after")
    def _complete(self) -> IronicAuth:
        if self.type == "http_basic" and (not self.username or self.password is None):
            raise ValueError("http_basic needs username and password (a reference)")
        if self.type == "keystone_token" and self.token is None:
            raise ValueError("keystone_token needs token (a reference, e.g. {env: OS_TOKEN})")
        if self.type == "none" and (self.username or self.password or self.token):
            raise ValueError("auth type none takes no username, password or token")
        return self


class IronicImage(BaseModel):
    """What the ``ramdisk`` deploy interface boots (a diskless or live host): kernel + initrd."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kernel_url: str
    ramdisk_url: str
    kernel_append_params: str | None = None


class IronicSettings(BaseModel):
    """How to reach Ironic and what to ask of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str  # the API endpoint, e.g. http://ironic.example:6385
    microversion: str = DEFAULT_MICROVERSION
    auth: IronicAuth = Field(default_factory=IronicAuth)
    # Pins each host's node to the conductors of this group (node.conductor_group). May name
    # the host's rack or its rack location: "{rack}", "{room}", "{row}" or "{site}".
    conductor_group: str | None = None
    driver: str = "redfish"  # the hardware type
    boot_interface: str = "ipxe"
    deploy_interface: DeployInterface = "direct"
    inspect_interface: str = "redfish"  # out-of-band: no boot, no agent
    # Any other interface of the node (power, management, raid, ...): Ironic's default if absent.
    interfaces: dict[str, str] = Field(default_factory=dict)
    resource_class: str | None = None  # default: the host's profile name
    # ironic-python-agent kernel and ramdisk (driver_info deploy_kernel/deploy_ramdisk), URLs
    # the conductor can fetch: the direct deploy boots them to write the image.
    deploy_kernel: str | None = None
    deploy_ramdisk: str | None = None
    # the ramdisk deploy interface's kernel/initrd (instead of settings.image)
    ramdisk: IronicImage | None = None
    # Our cloud-init user-data as a config drive (a partition at the end of the root disk):
    # the image needs cloud-init's ConfigDrive datasource.
    config_drive: bool = True
    # Out-of-band inspection before the first deploy, compared with what the BMC told us.
    inspect: bool = True
    # Where the conductor checks the BMCs' TLS certificates: a CA file on the conductor, or
    # true/false (driver_info redfish_verify_ca); default: the host's own bmc.verify_tls.
    bmc_verify_ca: bool | str | None = None
    host_link_gbps: float = Field(default=DEFAULT_HOST_LINK_GBPS, gt=0)
    poll_interval_s: float = Field(default=10.0, gt=0)
    manage_timeout_s: float = Field(default=300.0, gt=0)
    inspect_timeout_s: float = Field(default=1800.0, gt=0)
    provide_timeout_s: float = Field(default=600.0, gt=0)
    deploy_timeout_s: float | None = Field(default=None, gt=0)  # default: the site's
    undeploy_timeout_s: float = Field(default=1800.0, gt=0)
    http_timeout_s: float = Field(default=30.0, gt=0, le=600)
    retries: int = Field(default=3, ge=1, le=10)
    verify_tls: bool = True
    ca_bundle: str | None = None
    # the one HTTP proxy between this machine and the API; HTTP(S)_PROXY is never read
    proxy: str | None = None

    @field_validator("url", "proxy")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.match(r"^https?://[^/\s]+(/[^\s]*)?$", v):
            raise ValueError(f"{v!r} is not a URL like http://ironic.example:6385")
        return v.rstrip("/")

    @field_validator("microversion")
    @classmethod
    def _microversion(cls, v: str) -> str:
        m = _MICROVERSION.match(v.strip())
        if not m or (1, int(m.group(1))) < MIN_MICROVERSION:
            raise ValueError(f"microversion {v!r}: give 1.N with N >= {MIN_MICROVERSION[1]} "
                             "(the backend reads node inventories, API 1.81)")
        return v.strip()

    @field_validator("conductor_group")
    @classmethod
    def _group(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not _GROUP.match(v):
            raise ValueError(f"conductor_group {v!r}: letters, digits, '_', '.', '-' only")
        unknown = sorted(set(_GROUP_FIELDS.findall(v)) - set(GROUP_PLACEHOLDERS))
        if unknown:
            raise ValueError(f"conductor_group {v!r}: unknown placeholder {{{unknown[0]}}}; "
                             f"use {', '.join('{' + p + '}' for p in GROUP_PLACEHOLDERS)}")
        return v

    @field_validator("interfaces")
    @classmethod
    def _interfaces(cls, v: dict[str, str]) -> dict[str, str]:
        known = {"bios", "console", "firmware", "management", "network", "power", "raid",
                 "rescue", "storage", "vendor"}
        bad = sorted(set(v) - known)
        if bad:
            raise ValueError(f"interfaces: {bad[0]!r} is not an interface set here; use "
                             f"{', '.join(sorted(known))} (boot, deploy and inspect have "
                             "their own keys)")
        return v

    @model_validator(mode="after")
    def _deploy_inputs(self) -> IronicSettings:
        if self.deploy_interface == "ramdisk" and self.ramdisk is None:
            raise ValueError("deploy_interface ramdisk needs ramdisk: {kernel_url, ramdisk_url}")
        if (self.deploy_kernel is None) != (self.deploy_ramdisk is None):
            raise ValueError("give both deploy_kernel and deploy_ramdisk, or neither")
        return self

    @property
    def api_version(self) -> tuple[int, int]:
        major, minor = self.microversion.split(".")
        return int(major), int(minor)
