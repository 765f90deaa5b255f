"""The wiring manifest: devices (hosts with HCAs, switches with a radix), links, and fabric intent."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_serializer,
    model_validator,
)

from cabling.safetext import UNPRINTABLE
from cabling.speeds import normalize_speed, normalize_width

DeviceKind = Literal["host", "switch"]
Role = Literal["leaf", "spine", "core"]
ROLE_TIER: dict[str, int] = {"host": 0, "leaf": 1, "spine": 2, "core": 3}


def no_bool(value: Any) -> Any:
    """A count must be a number: YAML's ``true`` would otherwise count as 1."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is not a number")
    return value


class Location(BaseModel):
    """Where a device sits; plans derive switch names from it."""

    model_config = ConfigDict(extra="forbid")

    site: str | None = None
    row: str | None = None
    rack: str | None = None
    u: int | None = Field(default=None, description="lowest rack unit the device occupies")


# A spreadsheet evaluates a cell starting with one of these (CSV/formula injection): no device is
# named so, and refusing them keeps cable lists opened in Excel or LibreOffice inert.
FORMULA_START = ("=", "+", "-", "@")
# Host names have at most 253 characters and node descriptions 64 bytes: longer is no name.
MAX_NAME = 256


def check_name(text: str, what: str, *, device: bool) -> str:
    """``text`` if it can name a device (``device``) or a port; else ValueError saying why."""
    if len(text) > MAX_NAME:
        raise ValueError(f"{what} {text[:32]!r}... is {len(text)} characters long; names have at most {MAX_NAME}")
    bad = UNPRINTABLE.search(text)
    if bad is not None:
        raise ValueError(
            f"{what} {text!r} holds the control character U+{ord(bad.group()):04X}; names are printable text"
        )
    if device and text.startswith(FORMULA_START):
        raise ValueError(
            f"{what} {text!r} starts with {text[0]!r}, which a spreadsheet reads as a formula; rename the device"
        )
    return text


class Endpoint(BaseModel):
    """One end of a cable: a device and its port (switch port number, HCA name, or director port)."""

    model_config = ConfigDict(frozen=True)

    device: str
    port: str

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        # "gpu042:mlx5_3" is the compact YAML form; the port follows the last colon.
        if isinstance(value, str):
            dev, sep, port = value.rpartition(":")
            if not sep or not dev or not port:
                raise ValueError(f"endpoint {value!r} must be 'device:port', e.g. 'r03-l1:17'")
            dev = check_name(dev.strip(), "device name", device=True)
            return {"device": dev, "port": check_name(_port1(port.strip()), "port", device=False)}
        if isinstance(value, dict):
            if isinstance(value.get("device"), str):
                value = {**value, "device": check_name(value["device"], "device name", device=True)}
            if isinstance(value.get("port"), int | str):
                return {**value, "port": check_name(_port1(str(value["port"])), "port", device=False)}
        return value

    @model_serializer
    def _to_text(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def key(self) -> tuple[str, str]:
        """Case-insensitive identity: vendor tools upper-case names that hosts report lower-case."""
        return (self.device.casefold(), self.port.casefold())

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"


def _port1(port: str) -> str:
    """``mlx5_3/1`` is ``mlx5_3``: port 1 of an HCA is the HCA (director ports keep their slashes)."""
    if port.endswith("/1") and port.count("/") == 1:
        return port[:-2]
    return port


class PortRef:
    """A discovered port in manifest naming; a light twin of :class:`Endpoint` for 10^4-link fabrics."""

    __slots__ = ("device", "key", "port")

    def __init__(self, device: str, port: str) -> None:
        self.device = device
        self.port = port
        self.key = (device.casefold(), port.casefold())

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"

    def __repr__(self) -> str:
        return f"PortRef({self.device!r}, {self.port!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PortRef | Endpoint) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


AnyPort = Endpoint | PortRef


class Device(BaseModel):
    """A host (with HCAs) or a switch (with a port count), optionally with GUIDs and a location."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: DeviceKind
    role: Role | None = Field(default=None, description="switch tier: leaf, spine or core")
    model: str | None = None
    # The largest director switches have a few thousand ports; a trillion is a typo.
    ports: int | None = Field(default=None, ge=1, le=4096, description="switch radix (port count)")
    hcas: list[str] = Field(default_factory=list, description="host HCA names; index = rail")
    rail: int | None = Field(default=None, ge=0, le=255, description="the rail a leaf serves")
    group: str | None = Field(default=None, description="pod / scalable unit the switch belongs to")
    speed: str | None = Field(default=None, description="fastest speed the device's ports run")
    guid: str | None = Field(default=None, description="node or system GUID (switches)")
    hca_guids: dict[str, str] = Field(default_factory=dict, description="HCA name -> node GUID")
    location: Location | None = None

    @field_validator("speed", mode="before")
    @classmethod
    def _speed(cls, v: Any) -> str | None:
        return normalize_speed(v)

    _counts = field_validator("ports", "rail", mode="before")(lambda cls, v: no_bool(v))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v != v.strip():
            raise ValueError(f"device name {v!r} starts or ends with white space; remove it")
        return check_name(v, "device name", device=True)

    @field_validator("hcas")
    @classmethod
    def _hcas(cls, v: list[str]) -> list[str]:
        for hca in v:
            check_name(hca, "HCA name", device=False)
        return v

    @field_validator("guid", mode="before")
    @classmethod
    def _guid(cls, v: Any) -> str | None:
        return normalize_guid(v) if v is not None else None

    @field_validator("hca_guids", mode="before")
    @classmethod
    def _hca_guids(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): normalize_guid(g) for k, g in v.items()}
        return v

    @property
    def tier(self) -> int:
        """0 for hosts, 1 leaf, 2 spine, 3 core; unknown switch roles count as tier 1."""
        return ROLE_TIER[self.role or ("host" if self.kind == "host" else "leaf")]


class Link(BaseModel):
    """A planned cable between two endpoints, with what it should train at."""

    model_config = ConfigDict(extra="forbid")

    a: Endpoint
    b: Endpoint
    cable: str | None = Field(default=None, description="cable label / serial")
    type: str | None = Field(default=None, description="e.g. DAC, ACC, AOC, optical")
    length_m: float | None = Field(default=None, ge=0, le=10_000, allow_inf_nan=False)
    speed: str | None = None
    width: str | None = None

    @field_validator("speed", mode="before")
    @classmethod
    def _speed(cls, v: Any) -> str | None:
        return normalize_speed(v)

    @field_validator("width", mode="before")
    @classmethod
    def _width(cls, v: Any) -> str | None:
        return normalize_width(v)

    def __str__(self) -> str:
        return f"{self.a} <-> {self.b}"


class Fabric(BaseModel):
    """The intent the lint rules check the links against."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    tiers: int | None = Field(default=None, ge=1, le=3)
    rails: int | None = Field(default=None, ge=1, le=256, description="HCAs per host, one rail each")
    blocking: str | None = Field(default=None, description="leaf down:up ratio, e.g. '1:1' or '2:1'")
    speed: str | None = Field(default=None, description="default expected speed of every link")
    width: str | None = Field(default="4x", description="default expected width of every link")

    @field_validator("speed", mode="before")
    @classmethod
    def _speed(cls, v: Any) -> str | None:
        return normalize_speed(v)

    @field_validator("width", mode="before")
    @classmethod
    def _width(cls, v: Any) -> str | None:
        return normalize_width(v)

    _counts = field_validator("tiers", "rails", mode="before")(lambda cls, v: no_bool(v))

    @field_validator("blocking")
    @classmethod
    def _blocking(cls, v: str | None) -> str | None:
        if v is not None:
            parse_ratio(v)
        return v


class Manifest(BaseModel):
    """A whole wiring plan (or an as-built record) of one fabric."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    fabric: Fabric = Field(default_factory=Fabric)

    _version = field_validator("version", mode="before")(lambda cls, v: no_bool(v))
    devices: list[Device] = Field(default_factory=list)
    links: list[Link] = Field(default_factory=list)

    # Where each device and link came from, for messages that point at a file line.
    _source: str | None = PrivateAttr(default=None)
    _device_lines: dict[str, int] = PrivateAttr(default_factory=dict)
    _link_lines: list[int | None] = PrivateAttr(default_factory=list)
    _link_sources: list[str] = PrivateAttr(default_factory=list)

    @property
    def source(self) -> str:
        """The file this manifest was read from, or ``manifest``."""
        return self._source or "manifest"

    def device_map(self) -> dict[str, Device]:
        """Devices by case-folded name."""
        return {d.name.casefold(): d for d in self.devices}

    def link_line(self, index: int) -> int | None:
        """The file line link ``index`` was read from, if known."""
        return self._link_lines[index] if index < len(self._link_lines) else None

    def where_link(self, index: int) -> str:
        """``file:line`` of link ``index`` (or ``links[index]`` when not loaded from a file)."""
        line = self._link_lines[index] if index < len(self._link_lines) else None
        source = self._link_sources[index] if index < len(self._link_sources) else self._source
        if source and line:
            return f"{source}:{line}"
        return f"links[{index}]"

    def device_line(self, name: str) -> int | None:
        """The file line device ``name`` was read from, if known."""
        return self._device_lines.get(name.casefold())

    def where_device(self, name: str) -> str:
        """``file:line`` of a device, or its name when not loaded from a file."""
        line = self._device_lines.get(name.casefold())
        if self._source and line:
            return f"{self._source}:{line}"
        return f"device {name}"

    def set_origin(self, source: str, device_lines: dict[str, int], link_lines: list[int | None],
                   link_sources: list[str] | None = None) -> None:
        """Remember the file (or, per link, files) and lines this manifest was read from."""
        self._source = source
        self._device_lines = device_lines
        self._link_lines = link_lines
        self._link_sources = link_sources or []

    def expected_speed(self, link: Link) -> str | None:
        """The speed a link should train at: its own, else the fabric default."""
        return link.speed or self.fabric.speed

    def expected_width(self, link: Link) -> str | None:
        """The width a link should train at: its own, else the fabric default."""
        return link.width or self.fabric.width


def normalize_guid(text: str | int) -> str:
    """``0x0002C903...``, ``S-0002c9...`` and ``2c903...`` all become 16 lower-case hex digits.

    An integer is the GUID's value: YAML reads an unquoted ``0x0002c90300000a01`` as a number, and
    JSON writers may give one; it must fit in 64 bits."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a GUID; write it as quoted text, e.g. \"0x0002c903000e0b72\"")
    if isinstance(text, int):
        if 0 <= text < 1 << 64:
            return f"{text:016x}"
        raise ValueError(
            f"the number {text} does not fit in a 64-bit GUID; write the GUID as quoted text, "
            "e.g. \"0x0002c903000e0b72\""
        )
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a GUID; write it as quoted text, e.g. \"0x0002c903000e0b72\"")
    t = text.strip().lower()
    for prefix in ("s-", "h-", "r-", "0x"):
        t = t.removeprefix(prefix)
    if not t or len(t) > 16 or any(c not in "0123456789abcdef" for c in t):
        raise ValueError(f"{text!r} is not a GUID (up to 16 hex digits, e.g. 0x0002c903000e0b72)")
    return t.rjust(16, "0")


def parse_ratio(text: str) -> tuple[int, int]:
    """``"2:1"`` -> (2, 1); raises ValueError for anything else."""
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"blocking ratio {text!r} must be 'down:up' with positive integers, e.g. '1:1'")
    return int(parts[0]), int(parts[1])
