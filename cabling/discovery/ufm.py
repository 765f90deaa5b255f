"""NVIDIA UFM REST API: parse its systems, ports and links, and fetch them from a live UFM."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import requests
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from cabling.discovery.model import ACTIVE, DiscoveredFabric, DLink, DNode
from cabling.errors import CablingInputError, DiscoveryUnavailable
from cabling.limits import UFM
from cabling.speeds import normalize_speed, normalize_width
from cabling.textio import parse_json, read_text

RESOURCES = ("systems", "ports", "links")


class Password:
    """A UFM password that never prints itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The password, for the HTTP auth header only."""
        return self._value

    def __repr__(self) -> str:
        return "Password('***')"

    __str__ = __repr__


def parse_ufm(systems: list[dict[str, Any]], ports: list[dict[str, Any]], links: list[dict[str, Any]],
              source: str = "ufm", files: tuple[str, str, str] | None = None) -> DiscoveredFabric:
    """Build the discovered fabric from UFM's ``/resources/{systems,ports,links}`` JSON lists.

    ``files`` names where each list came from (``systems.json``...), for errors that point at the
    value: ``ufm/ports.json: [3].active_speed: ...``. A link listed twice (overlapping REST pages)
    or from both ends counts once; a port in two different links is an error naming both."""
    where = dict(zip(RESOURCES, files or (source,) * 3, strict=True))
    if not systems and not ports and not links and all(isinstance(x, list) for x in (systems, ports, links)):
        raise CablingInputError(
            "nothing was read: systems, ports and links are all empty lists", file=source,
            hint="save GET /ufmRest/resources/{systems,ports,links} again from a UFM that manages the fabric",
        )
    fab = DiscoveredFabric(source=source)
    port_info: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    for i, p in enumerate(_list(ports, "ports", where["ports"])):
        guid = _g(_req(p, "guid", "ports", i, where["ports"]), where["ports"], f"ports[{i}].guid")
        num = _port_number(_req(p, "number", "ports", i, where["ports"]), where["ports"], f"ports[{i}].number",
                           allow_zero=True)
        port_info[(guid, str(num))] = (i, p)
        system = p.get("system_name") or ""
        if not p.get("peer_guid") and p.get("physical_state") not in (None, "Link Up", "LinkUp"):
            fab.down_ports[(guid, num)] = str(p.get("physical_state"))
        node = fab.nodes.get(guid)
        if node is None and system:
            kind = "switch" if "switch" in str(p.get("description", "")).lower() else "ca"
            desc = p.get("node_description") or system
            if kind == "switch":
                desc = str(desc).rsplit(":", 1)[0]
            fab.nodes[guid] = DNode(guid=guid, kind=kind, desc=str(desc),  # type: ignore[arg-type]
                                    name=system if kind == "switch" else None)
    for i, s in enumerate(_list(systems, "systems", where["systems"])):
        guid = _g(_req(s, "guid", "systems", i, where["systems"]), where["systems"], f"systems[{i}].guid")
        kind = "switch" if str(s.get("type", "")).lower() == "switch" else "ca"
        if guid not in fab.nodes:
            fab.nodes[guid] = DNode(guid=guid, kind=kind, desc=str(s.get("description") or s.get("system_name")),  # type: ignore[arg-type]
                                    name=str(s.get("system_name")) if kind == "switch" else None)
    lfile = where["links"]
    seen: dict[frozenset[tuple[str, int]], int] = {}
    port_link: dict[tuple[str, int], int] = {}
    for i, lk in enumerate(_list(links, "links", lfile)):
        ends: list[tuple[str, int]] = []
        for side in ("source", "destination"):
            guid = _g(_req(lk, f"{side}_guid", "links", i, lfile), lfile, f"links[{i}].{side}_guid")
            port = _port_number(_req(lk, f"{side}_port", "links", i, lfile), lfile, f"links[{i}].{side}_port")
            desc = str(lk.get(f"{side}_port_node_description", ""))
            if guid not in fab.nodes:
                is_switch = desc.endswith(f":{port}")
                fab.nodes[guid] = DNode(guid=guid, kind="switch" if is_switch else "ca",
                                        desc=desc.rsplit(":", 1)[0] if is_switch else desc,
                                        name=desc.rsplit(":", 1)[0] if is_switch else None)
            ends.append((guid, port))
        if ends[0] == ends[1]:
            raise CablingInputError(
                f"links[{i}] links GUID 0x{ends[0][0]} port {ends[0][1]} to itself", file=lfile,
                hint="a port cannot be cabled to itself: save links.json again from UFM",
            )
        key = frozenset(ends)
        if key in seen:
            continue  # the same cable again (a repeated record, or seen from its other end)
        for end in ends:
            other = port_link.get(end)
            if other is not None:
                raise CablingInputError(
                    f"links[{i}] and links[{other}] both cable GUID 0x{end[0]} port {end[1]} "
                    f"({_desc(fab, end[0])}), to different peers: one port holds one cable",
                    file=lfile, hint="save links.json again from UFM (a port in two links is not a fabric UFM "
                    "reports); if it repeats, compare the port's peer in UFM's port view",
                )
        seen[key] = i
        for end in ends:
            port_link[end] = i
        j, info = port_info.get((ends[0][0], str(ends[0][1]))) or (None, {})
        try:
            width = normalize_width(lk.get("width"))
        except ValueError as exc:
            raise CablingInputError(f"links[{i}].width: {exc}", file=lfile) from None
        try:
            width = width or normalize_width(info.get("active_width"))
            speed = normalize_speed(info.get("active_speed")) if info.get("active_speed") else None
        except ValueError as exc:
            field = "active_width" if "width" in str(exc) else "active_speed"
            raise CablingInputError(f"ports[{j}].{field}: {exc}", file=where["ports"]) from None
        state = str(info.get("logical_state", "Active")).lower()
        fab.links.append(DLink(ends[0][0], ends[0][1], ends[1][0], ends[1][1], width, speed,
                               ACTIVE if state == "active" else state, i + 1))
    return fab


def _desc(fab: DiscoveredFabric, guid: str) -> str:
    node = fab.nodes.get(guid)
    return repr(node.desc) if node is not None else "unknown node"


def load_ufm_dir(path: str | Path) -> DiscoveredFabric:
    """Read ``systems.json``, ``ports.json`` and ``links.json`` saved from UFM's REST API."""
    p = Path(path)
    data = []
    for name in RESOURCES:
        f = p / f"{name}.json"
        if not f.is_file():
            raise CablingInputError(f"missing {name}.json", file=str(p),
                                    hint="save GET /ufmRest/resources/{systems,ports,links} as JSON files")
        data.append(parse_json(read_text(f, f"UFM {name}", cap=UFM, strict=False), str(f), f"UFM {name}"))
    files = tuple(str(p / f"{name}.json") for name in RESOURCES)
    return parse_ufm(data[0], data[1], data[2], str(p), files)  # type: ignore[arg-type]


class UfmClient:
    """A small client of a live UFM's REST API (basic auth, or a token via ``UFM_TOKEN``)."""

    def __init__(self, url: str, user: str = "admin", password: Password | None = None,
                 token: Password | None = None, verify_tls: bool = True, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.verify = verify_tls
        if token is not None:
            self.prefix = "/ufmRestV3"
            self.session.headers["Authorization"] = f"Basic {token.reveal()}"
        else:
            self.prefix = "/ufmRest"
            if password is not None:
                self.session.auth = (user, password.reveal())

    @classmethod
    def from_env(cls, url: str, user: str | None = None, verify_tls: bool = True) -> UfmClient:
        """Credentials from ``UFM_USER`` / ``UFM_PASSWORD`` or ``UFM_TOKEN`` (never from arguments)."""
        token = os.environ.get("UFM_TOKEN")
        password = os.environ.get("UFM_PASSWORD")
        return cls(url, user or os.environ.get("UFM_USER", "admin"),
                   Password(password) if password else None, Password(token) if token else None, verify_tls)

    def __repr__(self) -> str:
        return f"UfmClient({self.url!r})"

    @retry(retry=retry_if_exception_type(requests.ConnectionError), stop=stop_after_attempt(3),
           wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
    def _get_once(self, resource: str) -> requests.Response:
        return self.session.get(f"{self.url}{self.prefix}/resources/{resource}", timeout=self.timeout, stream=True)

    def get(self, resource: str) -> list[dict[str, Any]]:
        """GET one resource list; errors say what to check."""
        try:
            resp = self._get_once(resource)
        except requests.RequestException as exc:
            raise DiscoveryUnavailable(f"cannot reach UFM at {self.url}: {type(exc).__name__}",
                                       hint="check the URL and that UFM is running") from None
        if resp.status_code in (401, 403):
            raise DiscoveryUnavailable(f"UFM at {self.url} refused the credentials (HTTP {resp.status_code})",
                                       hint="set UFM_USER and UFM_PASSWORD (or UFM_TOKEN)")
        if resp.status_code != 200:
            raise DiscoveryUnavailable(f"UFM {resource} request failed: HTTP {resp.status_code}")
        # Read no more than the largest real answer: a wrong URL or a hostile server streaming an
        # endless body must not fill this process's memory.
        with resp:
            body = resp.raw.read(UFM.limit + 1, decode_content=True)
        if len(body) > UFM.limit:
            raise DiscoveryUnavailable(f"UFM {resource} answer is larger than {UFM.describe()}",
                                       hint="check the URL points at UFM")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise DiscoveryUnavailable(f"UFM {resource} answer is not JSON") from None
        if not isinstance(data, list):
            raise DiscoveryUnavailable(f"UFM {resource} answer is not a list")
        return data

    def fabric(self) -> DiscoveredFabric:
        """Fetch systems, ports and links, and parse them."""
        return parse_ufm(self.get("systems"), self.get("ports"), self.get("links"), source=self.url)


_GUID = re.compile(r"(?:0x)?[0-9a-f]{1,16}")


def _port_number(value: object, file: str, path: str, *, allow_zero: bool = False) -> int:
    """A UFM port number (``"17"`` or ``17``); anything else is an error naming file and JSON path."""
    text = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if text.isdecimal() and text.isascii() and len(text) < 6 and (int(text) > 0 or allow_zero):
        return int(text)
    raise CablingInputError(f"{path}: {value!r} is not a port number", file=file,
                            hint="UFM numbers ports from 1; save the file again from UFM")


def _g(guid: object, file: str, path: str) -> str:
    """A GUID as 16 lower-case hex digits; a number or other text is an error naming file and path."""
    if isinstance(guid, str):
        text = guid.strip().lower()
        if _GUID.fullmatch(text):
            return text.removeprefix("0x").rjust(16, "0")
    what = "a JSON number" if isinstance(guid, int | float) and not isinstance(guid, bool) else repr(guid)
    raise CablingInputError(f"{path}: {what} is not a GUID", file=file,
                            hint='UFM writes GUIDs as text of up to 16 hex digits ("0002c903000e0b72")')


def _list(obj: object, name: str, source: str) -> list[dict[str, Any]]:
    if not isinstance(obj, list) or not all(isinstance(x, dict) for x in obj):
        raise CablingInputError(f"UFM {name} must be a JSON list of objects", file=source)
    return obj


def _req(obj: dict[str, Any], key: str, name: str, i: int, source: str) -> Any:
    if key not in obj or obj[key] in (None, ""):
        raise CablingInputError(f"UFM {name}[{i}] has no {key!r}", file=source)
    return obj[key]
