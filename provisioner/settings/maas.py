"""``settings.maas``: the MAAS deploy backend's settings (owned by deploy/maas/).

The model lives below the inventory so that the site schema can type the block without the
inventory importing deploy/; the backend's behaviour around it is deploy/maas/settings.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from provisioner.secrets import SecretRef
from provisioner.settings import DEFAULT_HOST_LINK_GBPS


class MAASSettings(BaseModel):
    """How to reach the MAAS region and what to ask of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str  # e.g. http://maas.example:5240/MAAS
    api_key: SecretRef  # never the key itself: {env: ...} / {file: ...} / {vault: ..., key: ...}
    # the hosts' provisioning link speed: the workflow sizes waves with it (backend.host_link_gbps)
    host_link_gbps: float = Field(default=DEFAULT_HOST_LINK_GBPS, gt=0)
    osystem: str = "ubuntu"
    distro_series: str = "jammy"
    kernel: str | None = None  # hwe_kernel, e.g. hwe-22.04 or ga-22.04
    architecture: str = "amd64/generic"
    domain: str | None = None
    storage_layout: Literal["flat", "lvm", "bcache", "blank"] = "flat"
    # How a re-image wipes disks when the user asks for an erase (MAAS erases every disk).
    erase_mode: Literal["quick", "secure", "full"] = "quick"
    # Commissioning tests MAAS runs (`none` skips them: quicker; MAAS's default runs smartctl etc.).
    commissioning_testing_scripts: str | None = None
    tag_prefix: str = ""
    # Pin the inventory's planned provisioning address as a static IP on the boot interface,
    # so that MAAS's DNS, the address plan and the workflow's SSH wait agree.
    static_ip: bool = True
    # After commissioning, compare the NVIDIA GPUs MAAS found with the profile's `gpus` and
    # fail the host before deploying it when some are missing (fallen off the bus, unseated).
    check_gpus: bool = True
    poll_interval_s: float = Field(default=10.0, gt=0)
    commission_timeout_s: float = Field(default=1800.0, gt=0)
    deploy_timeout_s: float | None = Field(default=None, gt=0)  # default: the site's deploy timeout
    release_timeout_s: float = Field(default=3600.0, gt=0)
    http_timeout_s: float = Field(default=30.0, gt=0)
    retries: int = Field(default=3, ge=1)
    verify_tls: bool = True
    ca_bundle: str | None = None
    # The one HTTP proxy between this machine and the region, when there is one: the
    # environment's HTTP(S)_PROXY is never used (it would see the API key's signature).
    proxy: str | None = None

    @field_validator("api_key", mode="before")
    @classmethod
    def _api_key_is_a_reference(cls, v: object) -> object:
        if not isinstance(v, dict | SecretRef):  # the message must not repeat the key
            raise ValueError("api_key must be a reference like {env: MAAS_API_KEY}, never the key itself")
        return v

    @field_validator("proxy")
    @classmethod
    def _proxy(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not a proxy URL like http://proxy.example:3128")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not a URL like http://maas.example:5240/MAAS")
        return v.rstrip("/")
