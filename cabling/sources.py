"""Open manifests by file type, and gather discovery from the sources a command names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cabling.csvio import import_csv, is_ndt_csv
from cabling.discovery.iblinkinfo import parse_iblinkinfo
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.discovery.ibstat import load_ibstat
from cabling.discovery.lldp import load_lldp_dir
from cabling.discovery.model import DiscoveredFabric
from cabling.discovery.nodemap import load_node_name_map
from cabling.errors import CablingInputError
from cabling.formats import DISCOVERY_FORMATS, check_discovery_format, check_manifest_format
from cabling.limits import FABRIC_DUMP
from cabling.manifest import load_manifest
from cabling.model import Manifest
from cabling.ndt import load_ndt
from cabling.textio import read_text


def open_manifest(paths: list[Path]) -> Manifest:
    """A manifest from YAML/JSON, our CSV cable list, or UFM NDT files (several NDTs combine)."""
    if not paths:
        raise CablingInputError("no manifest given")
    first = paths[0]
    if not first.exists():
        raise CablingInputError("manifest not found", file=str(first))
    suffix = first.suffix.lower()
    head = _head(first)
    check_manifest_format(first, head)
    if suffix == ".ndt" or (suffix == ".csv" and is_ndt_csv(head)):
        return load_ndt(list(paths))
    if len(paths) > 1:
        raise CablingInputError("only UFM NDT files can be combined; give one YAML or CSV manifest")
    if suffix == ".csv":
        return import_csv(first)
    return load_manifest(first)


@dataclass
class DiscoveryOptions:
    """Where discovery comes from (a command may name several; they are merged)."""

    ibnetdiscover: Path | None = None
    iblinkinfo: list[Path] = field(default_factory=list)
    ufm_url: str | None = None
    ufm_dir: Path | None = None
    ufm_user: str | None = None
    ufm_insecure: bool = False
    lldp: Path | None = None
    node_name_maps: list[Path] = field(default_factory=list)
    ibstat: Path | None = None

    def load(self, note: Callable[[str], None] | None = None) -> tuple[DiscoveredFabric, dict[str, str]]:
        """The merged discovered fabric and the GUID -> name map from the maps and ibstat files;
        ``note`` hears warnings (a GUID a map names twice)."""
        fabrics: list[DiscoveredFabric] = []
        if self.ibnetdiscover:
            fabrics.append(_discovered(parse_ibnetdiscover, self.ibnetdiscover, "ibnetdiscover output",
                                       "--ibnetdiscover"))
        for f in self.iblinkinfo:
            fabrics.append(_discovered(parse_iblinkinfo, f, "iblinkinfo output", "--iblinkinfo"))
        if self.ufm_dir or self.ufm_url:
            # requests and tenacity load slowly; only UFM sources need them.
            from cabling.discovery.ufm import UfmClient, load_ufm_dir

            if self.ufm_dir:
                fabrics.append(load_ufm_dir(self.ufm_dir))
            if self.ufm_url:
                fabrics.append(UfmClient.from_env(self.ufm_url, self.ufm_user, not self.ufm_insecure).fabric())
        if self.lldp:
            fabrics.append(load_lldp_dir(self.lldp))
        if not fabrics:
            raise CablingInputError(
                "no discovery source given",
                hint="use --ibnetdiscover FILE, --iblinkinfo FILE, --ufm URL, --ufm-dir DIR or --lldp DIR",
            )
        fab = fabrics[0]
        for other in fabrics[1:]:
            fab.merge(other)
        if note is not None:
            for text in fab.warnings:
                note(f"warning: {text}")
        names: dict[str, str] = {}
        for m in self.node_name_maps:
            warnings: list[str] = []
            names.update(load_node_name_map(m, warnings))
            for text in warnings:
                if note is not None:
                    note(f"warning: {text}")
        if self.ibstat:
            names.update(ibstat_names(self.ibstat, fab))
        return fab, names


def _discovered(parse: Callable[[str, str], DiscoveredFabric], path: Path, what: str,
                option: str) -> DiscoveredFabric:
    """Read a discovery file once (it may be a pipe: ``--ibnetdiscover <(ibnetdiscover)``), refuse
    a known foreign format, parse; a file that is not that format also hears which formats are read."""
    text = read_text(path, what, cap=FABRIC_DUMP, strict=False)
    check_discovery_format(path, text[:4096], option)
    try:
        return parse(text, str(path))
    except CablingInputError as exc:
        if "this is not" in exc.message or exc.line == 1:
            exc.hint = f"{exc.hint + '; ' if exc.hint else ''}supported: {'; '.join(DISCOVERY_FORMATS)}"
        raise


def _head(path: Path) -> str:
    """The first 4 KiB of a file as text (to recognise its format); empty if unreadable."""
    try:
        with path.open("rb") as fh:
            return fh.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return ""  # the loader reports the error with its own words


def ibstat_names(folder: Path, fab: DiscoveredFabric) -> dict[str, str]:
    """GUID -> ``"<host> <hca>"`` from ``<host>[.txt]`` ibstat files; also records ports that are down."""
    if not folder.is_dir():
        raise CablingInputError("ibstat folder not found", file=str(folder),
                                hint="collect with: ibstat > DIR/$(hostname).txt on every host")
    out: dict[str, str] = {}
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        host = f.name.removesuffix(".txt")
        for port in load_ibstat(f):
            if port.link_layer and port.link_layer.lower() != "infiniband":
                continue
            for g in (port.node_guid, port.port_guid):
                if g:
                    out[g.rjust(16, "0")] = f"{host} {port.hca}"
            if port.state.lower() == "down" and port.node_guid:
                fab.down_ports[(port.node_guid.rjust(16, "0"), port.port)] = port.physical_state or "Down"
    return out
