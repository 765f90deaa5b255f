"""Load a site file, validate it and resolve it into a :class:`~provisioner.inventory.model.Site`.

Every error names the file, the line and the key, and says how to fix it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from netaddr import AddrFormatError, IPAddress, IPNetwork, IPSet
from pydantic import ValidationError

from provisioner.exceptions import InventoryError
from provisioner.inventory.addressing import PlanError, build_pool, slot_of, smallest_prefix_for
from provisioner.inventory.filecheck import check_referenced_files
from provisioner.inventory.model import BMCRef, Host, HostProfile, Network, Rack, Site
from provisioner.inventory.spec import NAME_RE, BMCSpec, RackSpec, SiteSpec, merge_firmware
from provisioner.inventory.yamlsrc import LineMap, load_yaml
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
            bios=dict(p.bios),
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


def _hosts(
    spec: SiteSpec,
    site_dir: Path,
    lines: LineMap,
    profiles: dict[str, HostProfile],
    networks: dict[str, Network],
) -> list[Host]:
    pools = {}
    for name, net in networks.items():
        try:
            pools[name] = build_pool(net.cidr, net.gateway, list(net.reserved))
        except PlanError as exc:
            raise lines.error(("networks", name, "reserved"), str(exc)) from None

    names: dict[str, tuple[str | int, ...]] = {}
    bmc_seen: dict[tuple[str, int | None], str] = {}
    macs: dict[str, str] = {}
    occupied: dict[tuple[str, int], str] = {}
    pinned: dict[tuple[str, IPAddress], str] = {}
    hosts: list[Host] = []
    redfish = spec.settings.redfish

    for ri, rack in enumerate(spec.racks):
        defaults = rack.defaults
        for hi, h in enumerate(rack.hosts):
            hpath: tuple[str | int, ...] = ("racks", ri, "hosts", hi)
            name = _host_name(rack, ri, hi, h.u, h.name, lines)
            if name in names:
                raise lines.error(
                    hpath,
                    f"duplicate hostname {name!r} (first declared at line {lines.line(names[name])})",
                    hint="hostnames must be unique across the site",
                )
            names[name] = hpath

            profile_name = h.profile or (defaults.profile if defaults else None)
            if profile_name is None:
                raise lines.error(
                    hpath,
                    f"host {name!r} has no profile",
                    hint="set `profile:` on the host or in the rack's `defaults`",
                )
            if profile_name not in profiles:
                known = ", ".join(sorted(profiles)) or "none defined"
                raise lines.error(
                    (*hpath, "profile") if h.profile else ("racks", ri, "defaults", "profile"),
                    f"unknown profile {profile_name!r} for host {name!r}",
                    hint=f"define it under `profiles:` (known: {known})",
                )
            profile = profiles[profile_name]

            top = h.u + profile.units - 1
            if top > rack.units:
                raise lines.error(
                    (*hpath, "u"),
                    f"host {name!r} at U{h.u} ({profile.units}U) does not fit rack "
                    f"{rack.name!r} of {rack.units}U",
                )
            for unit in range(h.u, top + 1):
                if (rack.name, unit) in occupied:
                    raise lines.error(
                        (*hpath, "u"),
                        f"host {name!r} at U{h.u} overlaps host {occupied[(rack.name, unit)]!r} "
                        f"at U{unit} of rack {rack.name!r}",
                        hint="two hosts cannot share a rack unit; check `u` and the profile's units",
                    )
                occupied[(rack.name, unit)] = name

            addresses: dict[str, IPAddress] = {}
            for net_name, text in h.addresses.items():
                apath = (*hpath, "addresses", net_name)
                if net_name not in networks:
                    raise lines.error(apath, f"unknown network {net_name!r}")
                try:
                    ip = IPAddress(text)
                except (AddrFormatError, ValueError):
                    raise lines.error(apath, f"{text!r} is not an IP address") from None
                if ip not in networks[net_name].cidr:
                    raise lines.error(apath, f"{ip} is not inside {networks[net_name].cidr}")
                addresses[net_name] = ip

            for net_name, net in networks.items():
                if net_name in addresses or not net.planned:
                    continue
                if net_name == "bmc" and h.bmc and h.bmc.address:
                    continue  # the BMC's given address is its address on this network
                try:
                    slot = slot_of(rack.index, h.u, net.rack_stride)
                except PlanError as exc:
                    raise lines.error((*hpath, "u"), f"network {net_name!r}: {exc}") from None
                pool = pools[net_name]
                if slot >= pool.size:
                    excluded = net.cidr.size - 2 - pool.size  # gateway, reserved ranges
                    need = slot + 1 + excluded
                    raise lines.error(
                        hpath,
                        f"network {net_name!r} ({net.cidr}) is exhausted: it has {pool.size} "
                        f"plannable addresses but host {name!r} (rack {rack.name!r} index "
                        f"{rack.index}, U{h.u}) needs slot {slot}",
                        hint=f"widen the CIDR to at least /{smallest_prefix_for(need, net.cidr.version)}"
                        f" or lower networks.{net_name}.rack_stride",
                    )
                addresses[net_name] = pool.nth(slot)

            bmc = _merge_bmc(defaults.bmc if defaults else None, h.bmc)
            if bmc.address is None:
                if "bmc" not in addresses:
                    raise lines.error(
                        (*hpath, "bmc"),
                        f"host {name!r} has no bmc.address and the site has no planned `bmc` network",
                        hint="give `bmc: {address: ...}` or add a `bmc` network to plan from",
                    )
                bmc_address = str(addresses["bmc"])
            else:
                bmc_address = bmc.address
                try:
                    ip = IPAddress(bmc_address)
                    addresses["bmc"] = ip
                    if "bmc" in networks and ip not in networks["bmc"].cidr:
                        raise lines.error(
                            (*hpath, "bmc", "address"),
                            f"BMC address {ip} is not inside the bmc network {networks['bmc'].cidr}",
                        )
                except (AddrFormatError, ValueError):
                    pass  # a DNS name is fine for a BMC
            key = (bmc_address, bmc.port)
            if key in bmc_seen:
                raise lines.error(
                    (*hpath, "bmc", "address"),
                    f"BMC address {bmc_address}{':' + str(bmc.port) if bmc.port else ''} of host "
                    f"{name!r} is already used by host {bmc_seen[key]!r}",
                    hint="every host has its own BMC",
                )
            bmc_seen[key] = name
            if not bmc.credentials:
                raise lines.error(
                    (*hpath, "bmc"),
                    f"host {name!r} has no BMC credentials reference",
                    hint="set bmc.credentials on the host or in the rack's defaults to a name "
                    "defined under `credentials:`",
                )
            if bmc.credentials not in spec.credentials:
                known = ", ".join(sorted(spec.credentials)) or "none defined"
                raise lines.error(
                    (*hpath, "bmc", "credentials")
                    if h.bmc and h.bmc.credentials
                    else ("racks", ri, "defaults", "bmc", "credentials"),
                    f"unknown credentials reference {bmc.credentials!r} for host {name!r}",
                    hint=f"define it under `credentials:` (known: {known})",
                )
            ca = bmc.ca_bundle or redfish.ca_bundle
            bmc_ref = BMCRef(
                address=bmc_address,
                port=bmc.port,
                vendor=bmc.vendor or "generic",
                credentials=bmc.credentials,
                verify_tls=redfish.verify_tls if bmc.verify_tls is None else bmc.verify_tls,
                ca_bundle=(site_dir / Path(ca).expanduser()) if ca else None,
            )

            if h.provisioning_mac:
                if h.provisioning_mac in macs:
                    raise lines.error(
                        (*hpath, "provisioning_mac"),
                        f"MAC {h.provisioning_mac} of host {name!r} is also host "
                        f"{macs[h.provisioning_mac]!r}'s",
                    )
                macs[h.provisioning_mac] = name

            hosts.append(
                Host(
                    name=name,
                    rack=rack.name,
                    u=h.u,
                    profile=profile,
                    bmc=bmc_ref,
                    provisioning_mac=h.provisioning_mac,
                    root_disk=h.root_disk or profile.root_disk,
                    addresses=addresses,
                    vars=dict(h.vars),
                    line=lines.line(hpath),
                    bios={**profile.bios, **h.bios},
                    firmware=merge_firmware(profile.firmware, h.firmware),
                )
            )
            for net_name, ip in addresses.items():
                if net_name == "bmc" and bmc.address:
                    continue  # BMC addresses were checked above
                k = (net_name, ip)
                if k in pinned:
                    raise lines.error(
                        hpath,
                        f"host {name!r} and host {pinned[k]!r} both get {ip} on network "
                        f"{net_name!r}",
                        hint="a pinned address collides with a planned one: pin another address "
                        "or add it to the network's reserved ranges",
                    )
                pinned[k] = name
    return hosts
