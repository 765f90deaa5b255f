"""Load a site file, validate it and resolve it into a :class:`~provisioner.inventory.model.Site`.

Every error names the file, the line and the key, and says how to fix it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netaddr import AddrFormatError, IPAddress, IPNetwork, IPSet
from pydantic import ValidationError

from provisioner.bmc.bios_intents import CATALOGUE, check_written, is_intent
from provisioner.exceptions import InventoryError
from provisioner.inventory.addressing import (
    PlanError,
    Pool,
    build_pool,
    slot_of,
    smallest_prefix_for,
)
from provisioner.inventory.filecheck import check_referenced_files
from provisioner.inventory.model import (
    BiosSetting,
    BMCRef,
    Host,
    HostProfile,
    Network,
    Rack,
    Site,
)
from provisioner.inventory.spec import (
    NAME_RE,
    BMCSpec,
    HostSpec,
    RackSpec,
    SiteSpec,
    merge_firmware,
)
from provisioner.inventory.yamlsrc import LineMap, Path_, load_yaml
from provisioner.wording import keys_at, suggest

SITE_FILE_NAMES = ("site.yml", "site.yaml")


def inventory_roots() -> list[Path]:
    """Where site directories are looked up, in order."""
    roots: list[Path] = []
    env = os.environ.get("PROVISIONER_INVENTORY")
    if env:
        roots.append(Path(env))
    roots.append(Path.cwd() / "inventory")
    roots.append(Path(__file__).resolve().parents[2] / "inventory")
    return roots


def find_site_file(site: str | Path, inventory_dir: Path | None = None) -> Path:
    """Resolve a site name, a site directory or a site file to the site file's path."""
    candidate = Path(site).expanduser()
    dirs: list[Path] = []
    if candidate.is_file():
        return candidate
    if candidate.is_dir():
        dirs.append(candidate)
    elif os.sep not in str(site):
        roots = [inventory_dir] if inventory_dir else inventory_roots()
        dirs.extend(root / str(site) for root in roots)
    for d in dirs:
        for fname in SITE_FILE_NAMES:
            if (d / fname).is_file():
                return d / fname
    # the working directory's inventory/ is often the checkout's own: name each place once
    unique = list(dict.fromkeys(str(d.resolve()) for d in dirs))
    looked = ", ".join(unique) or str(candidate)
    hint = "create inventory/<site>/site.yml (see inventory/example/site.yml)"
    if str(site) == "lab":
        hint = "run `provision lab up` to create the virtual lab and its site"
    elif os.sep not in str(site):
        known = known_sites(inventory_dir)
        guess = suggest(str(site), known)
        if guess:
            hint = f"did you mean {guess!r}? (sites: {', '.join(known)})"
        elif known:
            hint = f"sites: {', '.join(known)}; or " + hint
    raise InventoryError(f"site {str(site)!r} not found (looked in {looked})", hint=hint)


def known_sites(inventory_dir: Path | None = None) -> list[str]:
    """The names of the sites found in the inventory directories."""
    names: set[str] = set()
    for root in [inventory_dir] if inventory_dir else inventory_roots():
        if root.is_dir():
            for d in root.iterdir():
                if any((d / f).is_file() for f in SITE_FILE_NAMES):
                    names.add(d.name)
    return sorted(names)


def load_site(
    site: str | Path, *, inventory_dir: Path | None = None, check_files: bool = False
) -> Site:
    """Load and validate a site by name, directory or file.

    ``check_files``: also check that the CA bundles and secret files it names can be read.
    """
    path = find_site_file(site, inventory_dir)
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise lines.error((), "a site file is a mapping with keys site, settings, networks, ...")
    try:
        spec = SiteSpec.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, lines, data) from None
    resolved = _resolve(spec, path, lines)
    if check_files:
        check_referenced_files(data, path.parent, lines)
    return resolved


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """The part of a pydantic error location that is keys and indices of the file's data.

    Pydantic adds steps of its own (``function-after[...]``, union member tags); a user's key may
    contain ``[`` too, so the data itself decides which step is a key. The last step stays even
    when the data lacks it: it is the missing key.
    """
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        in_dict = isinstance(node, dict) and part in node
        if in_dict or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            path.append(part)
            node = node[part]
        elif i == len(loc) - 1 and isinstance(part, str | int) and not str(part).endswith("]"):
            path.append(part)
    return tuple(path)


def _validation_error(exc: ValidationError, lines: LineMap, data: Any = None) -> InventoryError:
    first = exc.errors()[0]
    loc = _data_path(data, tuple(first["loc"]))
    msg = first["msg"].removeprefix("Value error, ")
    hint = None
    if first["type"] == "extra_forbidden" and loc:
        msg = f"unknown key {loc[-1]!r}"
        allowed = keys_at(SiteSpec, loc[:-1])
        guess = suggest(str(loc[-1]), allowed) if allowed else None
        hint = (f"did you mean {guess!r}? " if guess else "") + (
            f"allowed here: {', '.join(allowed)}" if allowed else "check its spelling"
        )
        hint += " (docs/inventory.md)"
    elif first["type"] == "missing" and loc:
        msg = f"missing required key {loc[-1]!r}"
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return lines.error(loc, msg, hint=hint)


def _resolve(spec: SiteSpec, path: Path, lines: LineMap) -> Site:
    site_dir = path.parent
    networks = _networks(spec, lines)
    profiles = {
        name: HostProfile(
            name=name,
            gpus=p.gpus,
            gpu_model=p.gpu_model,
            nvswitch=p.nvswitch,
            ib_hcas=p.ib_hcas,
            ib_rate_gbps=p.ib_rate_gbps,
            units=p.units,
            provisioning_nic=p.provisioning_nic,
            disks=p.disks,
            root_disk=p.root_disk,
            vars=dict(p.vars),
            bios=_bios(p.bios, ("profiles", name, "bios"), lines),
            firmware=tuple(p.firmware),
        )
        for name, p in spec.profiles.items()
    }
    racks = _racks(spec, lines)
    hosts = _hosts(spec, site_dir, lines, profiles, networks)
    return Site(
        name=spec.site,
        path=path,
        settings=spec.settings,
        networks=networks,
        credentials=dict(spec.credentials),
        profiles=profiles,
        racks=racks,
        hosts=hosts,
        vars=dict(spec.vars),
    )


def _bios(values: dict[str, Any], where: Path_, lines: LineMap) -> dict[str, BiosSetting]:
    """A BIOS baseline with each value as written and where; intents (names with a hyphen)
    must be known ones with one of their values."""
    out = {}
    for name, value in values.items():
        path = (*where, name)
        if is_intent(name):
            problem = check_written(name, value)
            if problem:
                guess = suggest(name, list(CATALOGUE))
                raise lines.error(path, problem, hint=(
                    f"did you mean {guess!r}? " if guess and guess != name else "")
                    + f"intents: {', '.join(CATALOGUE)} (docs/firmware.md)")
        out[name] = BiosSetting(value, lines.text(path), str(lines.file), lines.line(path))
    return out


def _networks(spec: SiteSpec, lines: LineMap) -> dict[str, Network]:
    nets: dict[str, Network] = {}
    for name, n in spec.networks.items():
        where = ("networks", name)
        try:
            cidr = IPNetwork(n.cidr)
        except (AddrFormatError, ValueError):
            raise lines.error(
                (*where, "cidr"), f"{n.cidr!r} is not a CIDR", hint="write it like 10.10.0.0/22"
            ) from None
        if cidr.ip != cidr.network:
            raise lines.error(
                (*where, "cidr"),
                f"{n.cidr} has host bits set",
                hint=f"did you mean {cidr.network}/{cidr.prefixlen}?",
            )
        gateway = None
        if n.gateway:
            try:
                gateway = IPAddress(n.gateway)
            except (AddrFormatError, ValueError):
                raise lines.error((*where, "gateway"), f"{n.gateway!r} is not an address") from None
            if gateway not in cidr:
                raise lines.error((*where, "gateway"), f"gateway {gateway} is not inside {cidr}")
        for other in nets.values():
            if IPSet(cidr) & IPSet(other.cidr):
                raise lines.error(
                    (*where, "cidr"),
                    f"network {name!r} ({cidr}) overlaps network {other.name!r} ({other.cidr})",
                    hint="give each network its own non-overlapping CIDR",
                )
        nets[name] = Network(
            name=name,
            cidr=cidr,
            gateway=gateway,
            reserved=tuple(n.reserved),
            dns=tuple(n.dns),
            vlan=n.vlan,
            mtu=n.mtu,
            rack_stride=n.rack_stride,
            planned=n.planned,
        )
    return nets


def _racks(spec: SiteSpec, lines: LineMap) -> list[Rack]:
    racks: list[Rack] = []
    by_name: dict[str, int] = {}
    by_index: dict[int, str] = {}
    for i, r in enumerate(spec.racks):
        if r.name in by_name:
            raise lines.error(
                ("racks", i, "name"),
                f"rack {r.name!r} is declared twice (also racks[{by_name[r.name]}])",
                hint="rack names must be unique",
            )
        if r.index in by_index:
            raise lines.error(
                ("racks", i, "index"),
                f"rack index {r.index} is used by rack {by_index[r.index]!r} too",
                hint="each rack needs its own index: the address plan is keyed on it",
            )
        by_name[r.name] = i
        by_index[r.index] = r.name
        racks.append(Rack(name=r.name, index=r.index, units=r.units, location=dict(r.location)))
    return racks


def _host_name(rack: RackSpec, ri: int, hi: int, u: int, explicit: str | None, lines: LineMap) -> str:
    path: tuple[str | int, ...] = ("racks", ri, "hosts", hi)
    if explicit:
        name = explicit
        path = (*path, "name")
    elif rack.host_name_template:
        fields = {"rack": rack.name, "u": u, "index": rack.index, **rack.location}
        try:
            name = rack.host_name_template.format(**fields)
        except (KeyError, IndexError, ValueError) as exc:
            known = ", ".join(sorted(fields))
            raise lines.error(
                ("racks", ri, "host_name_template"),
                f"template {rack.host_name_template!r} cannot be expanded: {exc}",
                hint=f"fields available: {known} (e.g. 'gpu-{{rack}}-u{{u:02d}}')",
            ) from None
        path = ("racks", ri, "host_name_template")
    else:
        raise lines.error(
            path,
            f"host at U{u} of rack {rack.name!r} has no name",
            hint="give it `name:` or give the rack a `host_name_template`",
        )
    if not NAME_RE.match(name):
        raise lines.error(
            path,
            f"host name {name!r} is not a valid hostname",
            hint="use lower-case letters, digits and '-', at most 63 characters",
        )
    return name


def _merge_bmc(default: BMCSpec | None, own: BMCSpec | None) -> BMCSpec:
    merged: dict[str, Any] = {}
    for part in (default, own):
        if part is not None:
            merged.update({k: v for k, v in part.model_dump().items() if v is not None})
    return BMCSpec(**merged)


@dataclass(frozen=True)
class _Context:
    """What every host of a site is resolved against."""

    spec: SiteSpec
    site_dir: Path
    lines: LineMap
    profiles: dict[str, HostProfile]
    networks: dict[str, Network]
    pools: dict[str, Pool]


@dataclass(frozen=True)
class _Slot:
    """One host entry of the site file: its rack, its own keys and where it is written."""

    ri: int
    rack: RackSpec
    hi: int
    host: HostSpec

    @property
    def path(self) -> Path_:
        return ("racks", self.ri, "hosts", self.hi)


@dataclass
class _Claims:
    """What the hosts resolved so far hold; each belongs to one host of the site only."""

    lines: LineMap
    names: dict[str, Path_] = field(default_factory=dict)
    units: dict[tuple[str, int], str] = field(default_factory=dict)
    bmcs: dict[tuple[str, int | None, str | None], str] = field(default_factory=dict)
    macs: dict[str, str] = field(default_factory=dict)
    addresses: dict[tuple[str, IPAddress], str] = field(default_factory=dict)

    def name(self, name: str, hpath: Path_) -> None:
        if name in self.names:
            first = self.lines.line(self.names[name])
            raise self.lines.error(
                hpath,
                f"duplicate hostname {name!r} (first declared at line {first})",
                hint="hostnames must be unique across the site",
            )
        self.names[name] = hpath

    def rack_units(self, slot: _Slot, name: str, units: int) -> None:
        h, rack = slot.host, slot.rack
        top = h.u + units - 1
        if top > rack.units:
            raise self.lines.error(
                (*slot.path, "u"),
                f"host {name!r} at U{h.u} ({units}U) does not fit rack "
                f"{rack.name!r} of {rack.units}U",
            )
        for unit in range(h.u, top + 1):
            if (rack.name, unit) in self.units:
                raise self.lines.error(
                    (*slot.path, "u"),
                    f"host {name!r} at U{h.u} overlaps host {self.units[(rack.name, unit)]!r} "
                    f"at U{unit} of rack {rack.name!r}",
                    hint="two hosts cannot share a rack unit; check `u` and the profile's units",
                )
            self.units[(rack.name, unit)] = name

    def bmc(self, hpath: Path_, name: str, address: str, port: int | None,
            system: str | None) -> None:
        # One BMC may serve several nodes, each naming its own ComputerSystem.
        key = (address, port, system)
        shared = [k for k in self.bmcs if k[:2] == (address, port)]
        if key in self.bmcs or (shared and (system is None or any(k[2] is None for k in shared))):
            other = self.bmcs.get(key) or self.bmcs[shared[0]]
            raise self.lines.error(
                (*hpath, "bmc", "address"),
                f"BMC address {address}{':' + str(port) if port else ''} of host "
                f"{name!r} is already used by host {other!r}"
                + (f" for system {system!r}" if key in self.bmcs and system else ""),
                hint="every host has its own BMC; where one BMC serves several nodes, give each "
                "host `bmc.system` (the Id of its ComputerSystem, e.g. Node0, Node1)",
            )
        self.bmcs[key] = name

    def mac(self, hpath: Path_, name: str, mac: str | None) -> None:
        if not mac:
            return
        if mac in self.macs:
            raise self.lines.error(
                (*hpath, "provisioning_mac"),
                f"MAC {mac} of host {name!r} is already the provisioning MAC of host "
                f"{self.macs[mac]!r}",
            )
        self.macs[mac] = name

    def host_addresses(
        self, hpath: Path_, name: str, addresses: dict[str, IPAddress], own_bmc: bool
    ) -> None:
        for net_name, ip in addresses.items():
            if net_name == "bmc" and own_bmc:
                continue  # BMC addresses were checked with the BMC
            k = (net_name, ip)
            if k in self.addresses:
                raise self.lines.error(
                    hpath,
                    f"host {name!r} and host {self.addresses[k]!r} both get {ip} on network "
                    f"{net_name!r}",
                    hint="a pinned address collides with a planned one: pin another address "
                    "or add it to the network's reserved ranges",
                )
            self.addresses[k] = name


def _pools(networks: dict[str, Network], lines: LineMap) -> dict[str, Pool]:
    pools = {}
    for name, net in networks.items():
        try:
            pools[name] = build_pool(net.cidr, net.gateway, list(net.reserved))
        except PlanError as exc:
            raise lines.error(("networks", name, "reserved"), str(exc)) from None
    return pools


def _hosts(
    spec: SiteSpec,
    site_dir: Path,
    lines: LineMap,
    profiles: dict[str, HostProfile],
    networks: dict[str, Network],
) -> list[Host]:
    ctx = _Context(spec, site_dir, lines, profiles, networks, _pools(networks, lines))
    claims = _Claims(lines)
    return [
        _host(ctx, claims, _Slot(ri, rack, hi, h))
        for ri, rack in enumerate(spec.racks)
        for hi, h in enumerate(rack.hosts)
    ]


def _host(ctx: _Context, claims: _Claims, slot: _Slot) -> Host:
    """Resolve one host entry; its checks run in this order, so the first problem is reported."""
    h, hpath = slot.host, slot.path
    name = _host_name(slot.rack, slot.ri, slot.hi, h.u, h.name, ctx.lines)
    claims.name(name, hpath)
    profile = _profile(ctx, slot, name)
    claims.rack_units(slot, name, profile.units)
    addresses = _pinned_addresses(ctx, slot)
    addresses.update(_planned_addresses(ctx, slot, name, skip=set(addresses)))
    defaults = slot.rack.defaults
    bmc = _merge_bmc(defaults.bmc if defaults else None, h.bmc)
    bmc_address = _bmc_address(ctx, slot, name, bmc, addresses)
    claims.bmc(hpath, name, bmc_address, bmc.port, bmc.system)
    bmc_ref = _bmc_ref(ctx, slot, name, bmc, bmc_address)
    claims.mac(hpath, name, h.provisioning_mac)
    host = Host(
        name=name,
        rack=slot.rack.name,
        u=h.u,
        profile=profile,
        bmc=bmc_ref,
        provisioning_mac=h.provisioning_mac,
        root_disk=h.root_disk or profile.root_disk,
        addresses=addresses,
        vars=dict(h.vars),
        line=ctx.lines.line(hpath),
        bios={**profile.bios, **_bios(h.bios, (*hpath, "bios"), ctx.lines)},
        firmware=merge_firmware(profile.firmware, h.firmware),
    )
    claims.host_addresses(hpath, name, addresses, own_bmc=bool(bmc.address))
    return host


def _profile(ctx: _Context, slot: _Slot, name: str) -> HostProfile:
    """The host's own profile, else its rack's default one."""
    h, defaults = slot.host, slot.rack.defaults
    profile_name = h.profile or (defaults.profile if defaults else None)
    if profile_name is None:
        raise ctx.lines.error(
            slot.path,
            f"host {name!r} has no profile",
            hint="set `profile:` on the host or in the rack's `defaults`",
        )
    if profile_name not in ctx.profiles:
        known = ", ".join(sorted(ctx.profiles)) or "none defined"
        raise ctx.lines.error(
            (*slot.path, "profile") if h.profile else ("racks", slot.ri, "defaults", "profile"),
            f"unknown profile {profile_name!r} for host {name!r}",
            hint=f"define it under `profiles:` (known: {known})",
        )
    return ctx.profiles[profile_name]


def _pinned_addresses(ctx: _Context, slot: _Slot) -> dict[str, IPAddress]:
    """The addresses the host's `addresses:` pins, each inside its network."""
    addresses: dict[str, IPAddress] = {}
    for net_name, text in slot.host.addresses.items():
        apath = (*slot.path, "addresses", net_name)
        if net_name not in ctx.networks:
            raise ctx.lines.error(apath, f"unknown network {net_name!r}")
        try:
            ip = IPAddress(text)
        except (AddrFormatError, ValueError):
            raise ctx.lines.error(apath, f"{text!r} is not an IP address") from None
        if ip not in ctx.networks[net_name].cidr:
            raise ctx.lines.error(apath, f"{ip} is not inside {ctx.networks[net_name].cidr}")
        addresses[net_name] = ip
    return addresses


def _planned_addresses(
    ctx: _Context, slot: _Slot, name: str, skip: set[str]
) -> dict[str, IPAddress]:
    """The host's address on each planned network it has none pinned on (``skip``)."""
    h = slot.host
    planned: dict[str, IPAddress] = {}
    for net_name, net in ctx.networks.items():
        if net_name in skip or not net.planned:
            continue
        if net_name == "bmc" and h.bmc and h.bmc.address:
            continue  # the BMC's given address is its address on this network
        planned[net_name] = _plan_slot(ctx, slot, name, net)
    return planned


def _plan_slot(ctx: _Context, slot: _Slot, name: str, net: Network) -> IPAddress:
    """The address of the host's slot (rack index, U) in a planned network."""
    h, rack = slot.host, slot.rack
    try:
        n = slot_of(rack.index, h.u, net.rack_stride)
    except PlanError as exc:
        raise ctx.lines.error((*slot.path, "u"), f"network {net.name!r}: {exc}") from None
    pool = ctx.pools[net.name]
    if n >= pool.size:
        excluded = net.cidr.size - 2 - pool.size  # gateway, reserved ranges
        need = n + 1 + excluded
        raise ctx.lines.error(
            slot.path,
            f"network {net.name!r} ({net.cidr}) is exhausted: it has {pool.size} "
            f"plannable addresses but host {name!r} (rack {rack.name!r} index "
            f"{rack.index}, U{h.u}) needs slot {n}",
            hint=f"widen the CIDR to at least /{smallest_prefix_for(need, net.cidr.version)}"
            f" or lower networks.{net.name}.rack_stride",
        )
    return pool.nth(n)


# RFC 1123 labels (underscores too: some sites' internal names have them), 253 at most.
_HOST_NAME = re.compile(r"(?=.{1,253}\.?$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
                        r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?")


def _bmc_address(
    ctx: _Context, slot: _Slot, name: str, bmc: BMCSpec, addresses: dict[str, IPAddress]
) -> str:
    """The BMC's address: its given one (recorded in ``addresses`` if an IP) or the planned one."""
    if bmc.address is None:
        if "bmc" not in addresses:
            raise ctx.lines.error(
                (*slot.path, "bmc"),
                f"host {name!r} has no bmc.address and the site has no planned `bmc` network",
                hint="give `bmc: {address: ...}` or add a `bmc` network to plan from",
            )
        return str(addresses["bmc"])
    networks = ctx.networks
    try:
        ip = IPAddress(bmc.address)
        addresses["bmc"] = ip
        if "bmc" in networks and ip not in networks["bmc"].cidr:
            raise ctx.lines.error(
                (*slot.path, "bmc", "address"),
                f"BMC address {ip} is not inside the bmc network {networks['bmc'].cidr}",
            )
    except (AddrFormatError, ValueError):
        # A DNS name is fine for a BMC; anything else would end up inside the BMC's URL.
        if not _HOST_NAME.fullmatch(bmc.address):
            raise ctx.lines.error(
                (*slot.path, "bmc", "address"),
                f"BMC address {bmc.address!r} is neither an IP address nor a host name",
                hint="give the BMC's IP address or DNS name only: no scheme, port, path or "
                "user (the port goes in bmc.port)",
            ) from None
    return bmc.address


def _bmc_ref(ctx: _Context, slot: _Slot, name: str, bmc: BMCSpec, address: str) -> BMCRef:
    """The host's BMC, its credentials reference checked and its TLS settings resolved."""
    credentials = _credentials_ref(ctx, slot, name, bmc)
    redfish = ctx.spec.settings.redfish
    ca = bmc.ca_bundle or redfish.ca_bundle
    return BMCRef(
        address=address,
        port=bmc.port,
        vendor=bmc.vendor or "generic",
        credentials=credentials,
        verify_tls=redfish.verify_tls if bmc.verify_tls is None else bmc.verify_tls,
        ca_bundle=(ctx.site_dir / Path(ca).expanduser()) if ca else None,
        system=bmc.system,
    )


def _credentials_ref(ctx: _Context, slot: _Slot, name: str, bmc: BMCSpec) -> str:
    """The name of the BMC's credentials, which the site's `credentials:` defines."""
    hpath = slot.path
    if not bmc.credentials:
        raise ctx.lines.error(
            (*hpath, "bmc"),
            f"host {name!r} has no BMC credentials reference",
            hint="set bmc.credentials on the host or in the rack's defaults to a name "
            "defined under `credentials:`",
        )
    if bmc.credentials not in ctx.spec.credentials:
        known = ", ".join(sorted(ctx.spec.credentials)) or "none defined"
        own = slot.host.bmc and slot.host.bmc.credentials
        raise ctx.lines.error(
            (*hpath, "bmc", "credentials")
            if own
            else ("racks", slot.ri, "defaults", "bmc", "credentials"),
            f"unknown credentials reference {bmc.credentials!r} for host {name!r}",
            hint=f"define it under `credentials:` (known: {known})",
        )
    return bmc.credentials
