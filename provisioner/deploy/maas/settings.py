"""The ``settings.maas`` block of a site file, validated by the MAAS backend itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from provisioner.deploy.maas.apikey import MAASApiKey, parse_api_key
from provisioner.exceptions import InventoryError
from provisioner.inventory.credentials import resolve_secret
from provisioner.inventory.spec import SecretRef

if TYPE_CHECKING:
    from provisioner.inventory.model import Site


class MAASSettings(BaseModel):
    """How to reach the MAAS region and what to ask of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str  # e.g. http://maas.example:5240/MAAS
    api_key: SecretRef  # never the key itself: {env: ...} / {file: ...} / {vault: ..., key: ...}
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

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not a URL like http://maas.example:5240/MAAS")
        return v.rstrip("/")


def maas_settings(site: Site) -> MAASSettings:
    """Validate the site's ``settings.maas``; errors name the file, line and key."""
    raw = site.settings.maas
    try:
        return MAASSettings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc: tuple[str | int, ...] = ("settings", "maas", *first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            msg = f"missing required key {first['loc'][-1]!r}"
        elif first["type"] == "extra_forbidden":
            msg = f"unknown key {first['loc'][-1]!r}"
        elif first["loc"] and first["loc"][0] == "api_key":
            msg = "api_key must be a reference like {env: MAAS_API_KEY}, never the key itself"
        line = None
        try:
            from provisioner.inventory.yamlsrc import load_yaml

            _, lines = load_yaml(site.path)
            line = lines.line(loc)
        except InventoryError:
            pass  # the site was loaded from elsewhere; the key alone still locates it
        key = ".".join(str(p) for p in loc)
        raise InventoryError(
            msg, file=str(site.path), line=line, key=key, hint="see docs/maas.md"
        ) from None


def resolve_api_key(site: Site, settings: MAASSettings) -> MAASApiKey:
    """Read the API key through the site's reference (env, file or vault) and split it."""
    where = f"settings.maas.api_key in {site.path}"
    return parse_api_key(resolve_secret(site, settings.api_key, where), source=where)
