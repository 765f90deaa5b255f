"""The lint rule catalogue: each rule has an id, a severity, a description and a check.

Rules see a :class:`LintContext` with the manifest pre-indexed, so every rule is linear in
the number of links.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

from cabling.findings import Finding, Report, Severity
from cabling.model import Device, Endpoint, Manifest, parse_ratio
from cabling.ports import hca_of, natural_key, port_number, switch_port


@dataclass
class LintContext:
    """The manifest with the indexes rules share."""

    manifest: Manifest
    devices: dict[str, Device] = field(init=False)
    _known: list[tuple[int, Device, Endpoint, Device, Endpoint]] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.devices = self.manifest.device_map()

    def device(self, ep: Endpoint) -> Device | None:
        """The declared device of an endpoint, or None."""
        return self.devices.get(ep.device.casefold())

    def known_links(self) -> Iterator[tuple[int, Device, Endpoint, Device, Endpoint]]:
        """Links whose two ends are declared devices (resolved once; most rules walk them)."""
        if self._known is None:
            devices = self.devices
            known = []
            for i, lk in enumerate(self.manifest.links):
                da, db = devices.get(lk.a.device.casefold()), devices.get(lk.b.device.casefold())
                if da is not None and db is not None:
                    known.append((i, da, lk.a, db, lk.b))
            self._known = known
        return iter(self._known)


@dataclass(frozen=True)
class Rule:
    """A lint rule: stable id (for suppressions and JUnit test names), severity, description."""

    id: str
    name: str
    severity: Severity
    description: str
    check: Callable[[LintContext, Rule], list[Finding]]

    def finding(self, message: str, fix: str, where: str = "", endpoints: list[str] | None = None,
                **data: object) -> Finding:
        """A finding of this rule."""
        return Finding(kind=self.id, severity=self.severity, message=f"{self.name}: {message}", fix=fix,
                       where=where, endpoints=endpoints or [], data=dict(data))


def _unknown_device(ctx: LintContext, rule: Rule) -> list[Finding]:
    out = []
    for i, lk in enumerate(ctx.manifest.links):
        for ep in (lk.a, lk.b):
            if ctx.device(ep) is None:
                out.append(rule.finding(
                    f"link {lk} names device {ep.device!r}, which is not declared",
                    f"add {ep.device!r} to 'devices' or correct the name", ctx.manifest.where_link(i), [str(ep)]))
    return out


def _duplicate_device(ctx: LintContext, rule: Rule) -> list[Finding]:
    counts = Counter(d.name.casefold() for d in ctx.manifest.devices)
    return [rule.finding(f"device {name!r} is declared {n} times", "keep one declaration and merge its fields",
                         ctx.manifest.where_device(name)) for name, n in counts.items() if n > 1]


def _port_reused(ctx: LintContext, rule: Rule) -> list[Finding]:
    first: dict[tuple[str, str], int] = {}
    out = []
    for i, lk in enumerate(ctx.manifest.links):
        for ep in (lk.a, lk.b):
            j = first.setdefault(ep.key, i)
            if j != i:
                out.append(rule.finding(
                    f"port {ep} is used by {ctx.manifest.where_link(j)} and again here",
                    "a port takes one cable: move one of the two links to a free port",
                    ctx.manifest.where_link(i), [str(ep)]))
    return out


def _port_invalid(ctx: LintContext, rule: Rule) -> list[Finding]:
    out = []
    for i, lk in enumerate(ctx.manifest.links):
        for ep in (lk.a, lk.b):
            dev = ctx.device(ep)
            if dev is None:
                continue
            if dev.kind == "switch":
                num = port_number(ep.port)
                if num is None and switch_port(ep.port) != ep.port:
                    out.append(rule.finding(f"{ep}: {ep.port!r} is not a switch port number", "use 1..radix",
                                            ctx.manifest.where_link(i), [str(ep)]))
                elif num is not None and (num < 1 or (dev.ports is not None and num > dev.ports)):
                    out.append(rule.finding(
                        f"{ep}: port {num} is beyond the {dev.ports}-port radix of {dev.name}",
                        f"use a port in 1..{dev.ports}, or fix 'ports' of {dev.name}", ctx.manifest.where_link(i),
                        [str(ep)]))
            elif dev.hcas and hca_of(ep.port) not in dev.hcas:
                out.append(rule.finding(
                    f"{ep}: host {dev.name} has no HCA {hca_of(ep.port)!r} (it has {', '.join(dev.hcas)})",
                    "use one of the host's HCAs, or add it to 'hcas'", ctx.manifest.where_link(i), [str(ep)]))
    return out


def _self_link(ctx: LintContext, rule: Rule) -> list[Finding]:
    return [rule.finding(f"{lk} connects {lk.a.device} to itself", "connect the cable to another device",
                         ctx.manifest.where_link(i), [str(lk.a), str(lk.b)])
            for i, lk in enumerate(ctx.manifest.links) if lk.a.device.casefold() == lk.b.device.casefold()]


def _cable_label_reused(ctx: LintContext, rule: Rule) -> list[Finding]:
    # A label names the one cable a technician pulls: on two links, one of them is mislabelled.
    first: dict[str, int] = {}
    out = []
    for i, lk in enumerate(ctx.manifest.links):
        if not lk.cable:
            continue
        if lk.cable in first:
            other = ctx.manifest.links[first[lk.cable]]
            out.append(rule.finding(
                f"cable label {lk.cable!r} is on {other} and on {lk}",
                "give each cable its own label", ctx.manifest.where_link(i), [str(lk.a), str(lk.b)]))
        else:
            first[lk.cable] = i
    return out


def _islands(ctx: LintContext, rule: Rule) -> list[Finding]:
    # HCAs do not forward packets, so a host's eight HCAs are eight separate graph nodes:
    # eight rails joined only through hosts are still eight networks. (A union-find: networkx
    # costs more to import than the whole rule takes on a 12,000-link fabric.)
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(n: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(n, n)
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for d in ctx.manifest.devices:
        if d.kind == "switch":
            root(("sw", d.name.casefold()))
    for _i, da, a, db, b in ctx.known_links():
        ra, rb = root(_gnode(da, a)), root(_gnode(db, b))
        if ra != rb:
            parent[ra] = rb
    groups: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for n in parent:
        groups[root(n)].add(n)
    comps = sorted(groups.values(), key=lambda c: (-len(c), min(c)))
    if len(comps) <= 1:
        return []
    names = [_describe_island(ctx, c) for c in comps]
    seen: Counter[str] = Counter(label for label, _ in names)
    for k, (label, desc) in enumerate(names):
        if seen[label] > 1:  # one rail split in two: number the pieces
            names[k] = (f"{label} #{sum(1 for lb, _ in names[:k] if lb.startswith(label)) + 1}", desc)
    out = []
    for k, comp in enumerate(comps):
        other = comps[0] if k else comps[1]
        others = [names[j][0] for j in range(len(comps)) if j != k]
        leaves = _switches_of(ctx, comp, "leaf")
        spines = _switches_of(ctx, other, "spine") or _switches_of(ctx, other, None)
        if leaves and spines:
            fix = (f"join it at the spine tier: cable uplinks of its leaves ({_few(leaves)}) to spines of "
                   f"island {names[0 if k else 1][0]} ({_few(spines)}) and the others, so every spine reaches "
                   "leaves of every rail")
        elif _switches_of(ctx, comp, None) and spines:
            fix = f"cable {_few(_switches_of(ctx, comp, None))} to {_few(spines)}"
        else:
            fix = "connect it to a leaf switch, or remove it from the manifest"
        out.append(rule.finding(
            f"island {names[k][0]} of {len(comps)} ({names[k][1]}) has no link to {', '.join(others[:4])}"
            f"{'...' if len(others) > 4 else ''}", fix, "", [], island=names[k][0], size=len(comp)))
    return out


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + ("..." if len(names) > 3 else "")


def _switches_of(ctx: LintContext, comp: set[tuple[str, str]], role: str | None) -> list[str]:
    """Switch names of an island with the given role (None: the island's top tier)."""
    switches = [ctx.devices[n] for kind, n in comp if kind == "sw" and n in ctx.devices]
    if role is None and switches:
        top = max(d.tier for d in switches)
        return sorted((d.name for d in switches if d.tier == top), key=natural_key)
    return sorted((d.name for d in switches if d.role == role), key=natural_key)


def _gnode(dev: Device, ep: Endpoint) -> tuple[str, str]:
    if dev.kind == "switch":
        return ("sw", dev.name.casefold())
    return ("hca", f"{dev.name.casefold()}:{hca_of(ep.port).casefold()}")


def _describe_island(ctx: LintContext, comp: set[tuple[str, str]]) -> tuple[str, str]:
    switches = [ctx.devices[n] for kind, n in comp if kind == "sw" and n in ctx.devices]
    hcas = Counter(n.split(":", 1)[1] for kind, n in comp if kind == "hca")
    rails = sorted({d.rail for d in switches if d.rail is not None})
    roles = Counter(d.role or "switch" for d in switches)
    label = f"rail {','.join(str(r) for r in rails)}" if rails else (
        min(d.name for d in switches) if switches else min(n for _, n in comp))
    plural = {"leaf": "leaves", "switch": "switches"}
    parts = [f"{n} {plural.get(r, r + 's') if n > 1 else r}" for r, n in sorted(roles.items())]
    if hcas:
        parts.append(", ".join(f"{n} x {h}" for h, n in sorted(hcas.items())[:3]) + ("..." if len(hcas) > 3 else ""))
    return label, "; ".join(parts)


def _wrong_rail(ctx: LintContext, rule: Rule) -> list[Finding]:
    out = []
    for i, da, a, db, b in ctx.known_links():
        for host, hep, sw in ((da, a, db), (db, b, da)):
            if host.kind != "host" or sw.kind != "switch" or sw.rail is None or not host.hcas:
                continue
            hca = hca_of(hep.port)
            if hca in host.hcas and host.hcas.index(hca) != sw.rail:
                right = host.hcas[sw.rail] if sw.rail < len(host.hcas) else None
                k = host.hcas.index(hca)
                fix = (f"cable {host.name} {hca} (rail {k}) to a rail-{k} leaf"
                       + (f", and {host.name} {right} (rail {sw.rail}) to {sw.name}" if right else ""))
                out.append(rule.finding(
                    f"{hep} (rail {host.hcas.index(hca)}) goes to {sw.name}, a rail-{sw.rail} leaf", fix,
                    ctx.manifest.where_link(i), [str(hep)]))
    return out


def _wrong_tier(ctx: LintContext, rule: Rule) -> list[Finding]:
    # In a fat tree every cable joins adjacent tiers: host-leaf, leaf-spine, spine-core.
    out = []
    for i, da, a, db, b in ctx.known_links():
        if (da.kind == "switch" and da.role is None) or (db.kind == "switch" and db.role is None):
            continue  # tiers unknown (an imported as-built): nothing to check
        if abs(da.tier - db.tier) != 1:
            what = {0: "host", 1: "leaf", 2: "spine", 3: "core"}
            out.append(rule.finding(
                f"{a} ({what[da.tier]}) <-> {b} ({what[db.tier]}) skips or stays within a tier",
                "cable hosts to leaves, leaves to spines and spines to cores", ctx.manifest.where_link(i),
                [str(a), str(b)]))
    return out


def _blocking(ctx: LintContext, rule: Rule) -> list[Finding]:
    if not ctx.manifest.fabric.blocking:
        return []
    d_, u_ = parse_ratio(ctx.manifest.fabric.blocking)
    limit = Fraction(d_, u_)
    down: Counter[str] = Counter()
    up: Counter[str] = Counter()
    for _i, da, _a, db, _b in ctx.known_links():
        for sw, peer in ((da, db), (db, da)):
            if sw.kind == "switch" and sw.tier == 1:
                if peer.tier < sw.tier:
                    down[sw.name] += 1
                elif peer.tier > sw.tier:
                    up[sw.name] += 1
    out = []
    for d in ctx.manifest.devices:
        if d.kind != "switch" or d.tier != 1 or d.role is None:
            continue
        dn, upn = down[d.name], up[d.name]
        if dn and (upn == 0 or Fraction(dn, upn) > limit):
            need = -(-dn * u_ // d_)
            out.append(rule.finding(
                f"leaf {d.name} has {dn} down and {upn} up links ({dn}:{upn}); the plan allows "
                f"{ctx.manifest.fabric.blocking}", f"add {need - upn} uplink(s) or move hosts off {d.name}",
                ctx.manifest.where_device(d.name), [d.name], down=dn, up=upn))
    return out


def _asymmetric(ctx: LintContext, rule: Rule) -> list[Finding]:
    # Per switch: links to each upper-tier switch, and down-link counts per spine of a group.
    ups: dict[str, Counter[str]] = defaultdict(Counter)
    downs: Counter[str] = Counter()
    for _i, da, _a, db, _b in ctx.known_links():
        if da.kind == "switch" and db.kind == "switch" and da.tier != db.tier:
            lo, hi = (da, db) if da.tier < db.tier else (db, da)
            ups[lo.name][hi.name] += 1
            downs[hi.name] += 1
    out = []
    groups: dict[tuple[int, str | None], list[Device]] = defaultdict(list)
    for d in ctx.manifest.devices:
        if d.kind == "switch" and d.tier >= 2:
            groups[(d.tier, d.group)].append(d)
    for (_tier, group), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        counts = Counter(downs[d.name] for d in members)
        # On a tie (two spines, one short) the fuller count is the design; flag the short ones.
        best = max(counts.values())
        usual = max(c for c, n in counts.items() if n == best)
        for d in members:
            if downs[d.name] != usual:
                out.append(rule.finding(
                    f"{d.role or 'switch'} {d.name} has {downs[d.name]} down-links; the other "
                    f"{d.role or 'switch'}s{' of ' + group if group else ''} have {usual}",
                    f"rebalance the cables so every {d.role or 'switch'} of the group has {usual}",
                    ctx.manifest.where_device(d.name), [d.name], found=downs[d.name], expected=usual))
    for name, per_spine in sorted(ups.items()):
        if len(per_spine) > 1 and max(per_spine.values()) - min(per_spine.values()) > 1:
            most = max(per_spine, key=lambda k: per_spine[k])
            least = min(per_spine, key=lambda k: per_spine[k])
            out.append(rule.finding(
                f"{name} has {per_spine[most]} links to {most} but {per_spine[least]} to {least}",
                f"spread {name}'s uplinks evenly over its upper-tier switches", ctx.manifest.where_device(name),
                [name]))
    return out


def _speed_mismatch(ctx: LintContext, rule: Rule) -> list[Finding]:
    out = []
    for i, da, a, db, b in ctx.known_links():
        lk = ctx.manifest.links[i]
        want = ctx.manifest.expected_speed(lk)
        for dev, ep in ((da, a), (db, b)):
            if want and dev.speed and dev.speed != want:
                out.append(rule.finding(
                    f"{lk} is planned at {want} but {dev.name} runs {dev.speed}",
                    f"use a {dev.speed} cable (set speed: {dev.speed} on the link) or a {want} device",
                    ctx.manifest.where_link(i), [str(ep)], expected=want, device=dev.speed))
                break
    return out


def _tier_rate(ctx: LintContext, rule: Rule) -> list[Finding]:
    from cabling.rates import disagreeing

    out = []
    for i, lk, tier in disagreeing(ctx.manifest):
        m = ctx.manifest
        got = f"{m.expected_width(lk) or ''}{m.expected_speed(lk) or ''}"
        want = f"{tier.width or ''}{tier.speed or ''}"
        most = min(tier.width_count, tier.speed_count) if tier.width and tier.speed else \
            max(tier.width_count, tier.speed_count)
        out.append(rule.finding(
            f"{lk} is planned at {got}; {most} of the {tier.links} {tier.name} links are at {want}",
            f"if the link should run at {want} (its tier does), drop its speed/width from the manifest: an "
            f"as-built imported from a faulty fabric bakes the fault in; if it is meant to differ, --skip {rule.id}",
            m.where_link(i), [str(lk.a), str(lk.b)], expected=want, planned=got))
    return out


RULES: tuple[Rule, ...] = (
    Rule("CAB001", "unknown-device", "error", "a link names a device that is not declared", _unknown_device),
    Rule("CAB002", "duplicate-device", "error", "a device name is declared twice", _duplicate_device),
    Rule("CAB003", "port-reused", "error", "a port carries more than one cable", _port_reused),
    Rule("CAB004", "port-invalid", "error",
         "a switch port beyond the radix, or a host port that is not one of its HCAs", _port_invalid),
    Rule("CAB005", "self-link", "error", "a cable with both ends on the same device", _self_link),
    Rule("CAB006", "fabric-islands", "error",
         "the fabric is not one connected network (HCAs do not forward, so rails must meet at switches)",
         _islands),
    Rule("CAB007", "wrong-rail", "error", "HCA k of a host goes to a leaf of another rail", _wrong_rail),
    Rule("CAB008", "blocking-ratio", "warning",
         "a leaf has more down-links per up-link than the fabric's blocking ratio", _blocking),
    Rule("CAB009", "asymmetric-spine", "warning",
         "spines/cores of one group differ in down-links, or a switch's uplinks are uneven", _asymmetric),
    Rule("CAB010", "speed-mismatch", "error", "a link's speed differs from a device it connects", _speed_mismatch),
    Rule("CAB011", "wrong-tier", "error",
         "a cable that does not join adjacent tiers (host-leaf, leaf-spine, spine-core)", _wrong_tier),
    Rule("CAB012", "cable-label-reused", "error", "one cable label on two links", _cable_label_reused),
    Rule("CAB013", "tier-rate", "warning",
         "a link planned at another rate than most links of its tier (a fault baked into the plan?)", _tier_rate),
)


def lint(manifest: Manifest, skip: set[str] | None = None) -> Report:
    """Run every rule (except ids in ``skip``) and collect the findings."""
    skip = {s.upper() for s in skip or set()}
    unknown = skip - {r.id for r in RULES}
    if unknown:
        from cabling.errors import CablingInputError

        raise CablingInputError(f"unknown rule id(s) {', '.join(sorted(unknown))}",
                                hint="see 'provision cabling rules' for the list")
    ctx = LintContext(manifest)
    report = Report(title=f"lint {manifest.source}")
    for rule in RULES:
        if rule.id in skip:
            continue
        report.checks.append(rule.id)
        report.findings.extend(rule.check(ctx, rule))
    report.stats = {"devices": len(manifest.devices), "links": len(manifest.links), "rules": len(report.checks)}
    return report
