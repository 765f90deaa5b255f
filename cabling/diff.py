"""Validate a built fabric against its manifest: missing, unexpected, moved, swapped, degraded, down.

Everything is indexed by (device, port), so a 12,000-link fabric validates in linear time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cabling.errors import CablingInputError
from cabling.findings import VALIDATE_KINDS, Finding, Report
from cabling.model import AnyPort, Device, Link, Manifest, PortRef
from cabling.ports import natural_key
from cabling.resolve import Ambiguity, ResolvedFabric, RLink
from cabling.rootcause import root_causes
from cabling.speeds import speed_rank, width_lanes

Key = tuple[str, str]
PeerAt = tuple[AnyPort, AnyPort, int]  # a port, the port its cable reaches, the link's index
Planned = Callable[[AnyPort], tuple[AnyPort, int] | None]
_KIND_ORDER = {k: n for n, k in enumerate(VALIDATE_KINDS)}


def _fmt(ep: AnyPort) -> str:
    """A technician's name for a port: ``r03-l1 port 17`` or ``gpu042 mlx5_3``."""
    return f"{ep.device} port {ep.port}" if ep.port.isdigit() else f"{ep.device} {ep.port}"


def validate(manifest: Manifest, found: ResolvedFabric, extra: list[Finding] | None = None) -> Report:
    """Compare the discovered fabric with the plan and say how to fix every difference; ``extra``
    findings (error counters, what a watch saw) take their place among them by kind."""
    plan_peer, keys = _index_plan(manifest)
    unsure = _unsure_ports(found)
    found_peer = _index_found(found)
    findings: list[Finding] = [_ambiguity(manifest, amb, found.source) for amb in found.ambiguous]
    findings += extra or []
    missing, matched, unchecked = _match_planned(manifest, found, keys, found_peer, unsure, findings)
    unexpected = _unplanned(found, matched, unsure)
    planned = _planned_lookup(plan_peer, missing)
    devices = manifest.device_map()
    findings += _pair_swaps(manifest, planned, found_peer, missing, unexpected, devices)
    findings += _place_moves(manifest, planned, found_peer, missing, unexpected, devices)
    findings += [_missing_link(manifest, i, lk, found) for i, lk in sorted(missing.items())]
    findings += [_unexpected_link(rl, found, devices) for _j, rl in sorted(unexpected.items())]
    findings += _identity_warnings(manifest, found)
    findings.sort(key=lambda f: _KIND_ORDER.get(f.kind, 99))
    present = {nn.device.casefold() for nn in found.names.values()}
    findings = root_causes(manifest, findings, present)
    return Report(title=f"validate {manifest.source} against {found.source}",
                  findings=findings, stats=_stats(manifest, found, len(matched), unchecked))


def _index_plan(manifest: Manifest) -> tuple[dict[Key, PeerAt], list[tuple[Key, Key]]]:
    """Each planned port's link, and each link's two port keys; refuse a port planned twice."""
    plan_peer: dict[Key, PeerAt] = {}
    keys: list[tuple[Key, Key]] = []
    twice: list[str] = []
    for i, lk in enumerate(manifest.links):
        ka, kb = lk.a.key, lk.b.key
        keys.append((ka, kb))
        if ka == kb:
            raise CablingInputError(
                f"{manifest.where_link(i)}: {lk.a} is cabled to itself", file=manifest.source,
                hint="run 'provision cabling lint' on it and fix rule CAB005 first",
            )
        for k, me, peer in ((ka, lk.a, lk.b), (kb, lk.b, lk.a)):
            if k in plan_peer:
                twice.append(f"{me} ({manifest.where_link(plan_peer[k][2])} and {manifest.where_link(i)})")
            plan_peer[k] = (me, peer, i)
    if twice:
        # With one port planned for two cables there is no single right answer to compare against.
        raise CablingInputError(
            f"the manifest plans {len(twice)} port(s) for two cables: {'; '.join(twice[:3])}"
            + ("..." if len(twice) > 3 else ""), file=manifest.source,
            hint="run 'provision cabling lint' on it and fix rule CAB003 first",
        )
    return plan_peer, keys


def _unsure_ports(found: ResolvedFabric) -> set[Key]:
    """Ports whose identity is ambiguous: nothing planned there is judged, so no fix rests on them."""
    unsure: set[Key] = set()
    for amb in found.ambiguous:
        unsure |= amb.keys()
    return unsure


def _index_found(found: ResolvedFabric) -> dict[Key, PeerAt]:
    """Each discovered port's link."""
    found_peer: dict[Key, PeerAt] = {}
    for j, rl in enumerate(found.links):
        found_peer[rl.a.key] = (rl.a, rl.b, j)
        found_peer[rl.b.key] = (rl.b, rl.a, j)
    return found_peer


def _match_planned(
    manifest: Manifest, found: ResolvedFabric, keys: list[tuple[Key, Key]],
    found_peer: dict[Key, PeerAt], unsure: set[Key], findings: list[Finding],
) -> tuple[dict[int, Link], set[int], int]:
    """Find each planned link, judging the quality of those found (into ``findings``).

    Returns the planned links not found, the indices of the found links that matched, and how many
    planned links were left unchecked because they touch an ambiguous port."""
    missing: dict[int, Link] = {}
    matched: set[int] = set()
    unchecked = 0
    for i, lk in enumerate(manifest.links):
        ka, kb = keys[i]
        if unsure and (ka in unsure or kb in unsure):
            unchecked += 1
            continue
        hit = found_peer.get(ka)
        if hit is not None and hit[1].key == kb:
            matched.add(hit[2])
            rl = found.links[hit[2]]
            _check_quality(manifest, i, lk, rl, findings)
            if rl.state != "active":
                findings.append(_inactive_link(manifest, i, lk, rl.state))
        else:
            missing[i] = lk
    return missing, matched, unchecked


def _inactive_link(manifest: Manifest, i: int, lk: Link, state: str) -> Finding:
    return Finding(
        kind="down", severity="error",
        message=f"link {lk.a} <-> {lk.b} is cabled but {state}",
        fix=f"check the subnet manager and port state of {_fmt(lk.a)} and {_fmt(lk.b)}",
        where=manifest.where_link(i), endpoints=[str(lk.a), str(lk.b)], data={"state": state, "link": i},
    )


def _unplanned(found: ResolvedFabric, matched: set[int], unsure: set[Key]) -> dict[int, RLink]:
    """The found links that match no planned link, leaving out those on ambiguous ports."""
    return {j: rl for j, rl in enumerate(found.links)
            if j not in matched and not (unsure and (rl.a.key in unsure or rl.b.key in unsure))}


def _planned_lookup(plan_peer: dict[Key, PeerAt], missing: dict[int, Link]) -> Planned:
    """Where a port's planned cable should land, and its link, while that link is still missing."""
    def planned(ep: AnyPort) -> tuple[AnyPort, int] | None:
        got = plan_peer.get(ep.key)
        if got is None or got[2] not in missing:
            return None
        return got[1], got[2]

    return planned


def _pair_swaps(
    manifest: Manifest, planned: Planned, found_peer: dict[Key, PeerAt],
    missing: dict[int, Link], unexpected: dict[int, RLink], devices: Mapping[str, Device],
) -> list[Finding]:
    """Swaps first: two cables exchanged are one fix, not two moves (removes what they explain)."""
    findings: list[Finding] = []
    for j in sorted(unexpected):
        rl = unexpected.get(j)
        if rl is None:
            continue
        swap = _swap_partner(j, rl, planned, found_peer, unexpected)
        if swap is None:
            continue
        (x, ia), (y, ib), other = swap
        findings.append(_swap(manifest, rl.a, x, y, rl.b, devices, ia, ib))
        del missing[ia], missing[ib], unexpected[j], unexpected[other]
    return findings


def _swap_partner(
    j: int, rl: RLink, planned: Planned, found_peer: dict[Key, PeerAt], unexpected: dict[int, RLink],
) -> tuple[tuple[AnyPort, int], tuple[AnyPort, int], int] | None:
    """For found a-b planned as a-x and y-b: (x, its link), (y, its link) and the index of the
    unexpected x-y it was swapped with, or None."""
    pa, pb = planned(rl.a), planned(rl.b)
    if pa is None or pb is None or pa[1] == pb[1]:
        return None
    other = found_peer.get(pa[0].key)
    if other is None or other[1].key != pb[0].key or other[2] not in unexpected or other[2] == j:
        return None
    return pa, pb, other[2]


def _place_moves(
    manifest: Manifest, planned: Planned, found_peer: dict[Key, PeerAt],
    missing: dict[int, Link], unexpected: dict[int, RLink], devices: Mapping[str, Device],
) -> list[Finding]:
    """A cable with one end where the plan puts it and the other on a wrong port is a move
    (removes what the moves explain)."""
    findings: list[Finding] = []
    for j in sorted(unexpected):
        move = _best_move(unexpected[j], planned, found_peer, unexpected, devices)
        if move is None:
            continue
        fixed, wrong, target, i = move
        findings.append(_moved(manifest, i, fixed, wrong, target, devices))
        del missing[i], unexpected[j]
    return findings


def _moved(manifest: Manifest, i: int, fixed: AnyPort, wrong: AnyPort, target: AnyPort,
           devices: Mapping[str, Device]) -> Finding:
    crossing = _crossing(devices, wrong, target)
    data = {"fixed": str(fixed), "from": str(wrong), "to": str(target), "cable": manifest.links[i].cable}
    if crossing:
        data["wrong"] = crossing[0]
    return Finding(
        kind="moved", severity="error",
        message=f"the cable at {_fmt(fixed)} lands on {_fmt(wrong)}; the plan says {_fmt(target)}"
        + (f" ({crossing[1]})" if crossing else ""),
        fix=f"move the cable at {_fmt(fixed)} from {_fmt(wrong)} to {_fmt(target)}",
        where=manifest.where_link(i), endpoints=[str(fixed), str(wrong), str(target)], data=data,
    )


def _crossing(devices: Mapping[str, Device], found: AnyPort, planned: AnyPort) -> tuple[str, str] | None:
    """Whether a cable that reaches ``found`` instead of ``planned`` also crosses into another rail
    or plane (switch group), which is what makes it more than a port off: ("rail", why) or None."""
    got, want = devices.get(found.device.casefold()), devices.get(planned.device.casefold())
    if got is None or want is None or got.kind != "switch" or want.kind != "switch" or got.name == want.name:
        return None
    if got.rail is not None and want.rail is not None and got.rail != want.rail:
        return "rail", f"wrong rail: {got.name} is a rail-{got.rail} leaf, the plan puts it on rail {want.rail}"
    if got.group and want.group and got.group != want.group:
        return "plane", f"wrong plane: {got.name} is in {got.group}, the plan puts it in {want.group}"
    return None


def _missing_link(manifest: Manifest, i: int, lk: Link, found: ResolvedFabric) -> Finding:
    """A planned link not found: down if one of its ports reports down, else missing."""
    down = found.down.get(lk.a.key) or found.down.get(lk.b.key)
    label = f" (cable {lk.cable})" if lk.cable else ""
    if down is not None:
        ep, state = down
        return Finding(
            kind="down", severity="error",
            message=f"port {_fmt(ep)} is {state}: the link {lk.a} <-> {lk.b}{label} did not come up",
            fix=f"reseat or replace the cable between {_fmt(lk.a)} and {_fmt(lk.b)}{label}; "
            f"check both ports are enabled",
            where=manifest.where_link(i), endpoints=[str(lk.a), str(lk.b)], data={"state": state, "link": i},
        )
    return Finding(
        kind="missing", severity="error",
        message=f"no link between {lk.a} and {lk.b}{label}: not cabled, or the cable or a port is dead",
        fix=f"connect {_fmt(lk.a)} to {_fmt(lk.b)}{label}",
        where=manifest.where_link(i), endpoints=[str(lk.a), str(lk.b)], data={"link": i},
    )


def _unexpected_link(rl: RLink, found: ResolvedFabric, devices: Mapping[str, Device]) -> Finding:
    unknown = [e.device for e in (rl.a, rl.b) if e.device.casefold() not in devices]
    why = f" ({', '.join(unknown)} not in the manifest)" if unknown else ""
    return Finding(
        kind="unexpected", severity="error",
        message=f"link {rl.a} <-> {rl.b} is not in the plan{why}",
        fix=f"unplug the cable between {_fmt(rl.a)} and {_fmt(rl.b)}, or add it to the manifest",
        where=f"{rl.source or found.source}:{rl.line}" if rl.line else (rl.source or found.source),
        endpoints=[str(rl.a), str(rl.b)],
    )


def _identity_warnings(manifest: Manifest, found: ResolvedFabric) -> list[Finding]:
    """Nodes whose own description names another device than the manifest's GUID does, and switches
    that give no name of their own and were named from their cables."""
    ambiguous_guids = {g for amb in found.ambiguous for g in amb.guids}
    out: list[Finding] = []
    for guid, nn in sorted(found.names.items()):
        if not nn.claims or guid in ambiguous_guids:
            continue
        if nn.named_by == "topology":
            out.append(Finding(
                kind="identity", severity="warning",
                message=f"switch 0x{guid} still describes itself as {nn.claims!r} (its vendor default); its "
                f"cables say it is {nn.device}, and they are checked as {nn.device}'s",
                fix=f"set its node description to 'MF0;{nn.device}:{_model(manifest, nn.device)}' (or give "
                f"{nn.device} guid: \"0x{guid}\" in the manifest, or use 'provision cabling name-switches')",
                where=manifest.where_device(nn.device), endpoints=[nn.device], data={"guid": guid},
            ))
            continue
        out.append(Finding(
            kind="identity", severity="warning",
            message=f"node 0x{guid} calls itself {nn.claims!r} but the manifest gives its GUID to {nn.device!r}",
            fix=f"if the device was replaced, update the GUID of {nn.device} in the manifest; otherwise fix "
            f"the node description of {nn.device}",
            where=manifest.where_device(nn.device), endpoints=[nn.device], data={"guid": guid},
        ))
    return out


def _model(manifest: Manifest, device: str) -> str:
    dev = manifest.device_map().get(device.casefold())
    return (dev.model if dev is not None else None) or "<model>"


def _stats(manifest: Manifest, found: ResolvedFabric, matched: int, unchecked: int) -> dict[str, int]:
    stats = {
        "planned_links": len(manifest.links),
        "discovered_links": len(found.links),
        "director_internal_links": found.internal_links,
        "sharp_aggregation_links": found.aggregation_links,
        "matched_links": matched,
    }
    if unchecked:
        stats["unchecked_links"] = unchecked
    return stats


def _ambiguity(manifest: Manifest, amb: Ambiguity, source: str) -> Finding:
    """The finding for one ambiguous identity: where its cables land and what to fix (not the cables)."""
    ports = sorted({_fmt(e) for e in amb.peers}, key=natural_key)
    if len(ports) > 6:  # a switch: name a few of its cables, not 64
        at = f"{', '.join(ports[:5])} and {len(ports) - 5} more"
    else:
        at = " and ".join([", ".join(ports[:-1]), ports[-1]] if len(ports) > 1 else ports)
    lines = sorted({f"{rl.source or source}:{rl.line}" for rl in amb.links if rl.line})
    seen = " and ".join(amb.descriptions) if amb.descriptions else "no description"
    what = "HCAs" if amb.node_kind == "ca" else "switches"
    if amb.kind == "duplicate_guid":
        message = (f"GUID 0x{amb.identity} answers at {len(amb.peers)} ports: the cables on {at} reach "
                   f"{what} sharing one GUID (described as {seen})")
        fix = (f"find the {what} cabled to {at}, compare the GUID each reports ('ibstat' on the host) with the "
               f"one on its label, and re-flash or replace the one whose GUID is wrong; validate again "
               f"(these cables are not checked until then; the manifest needs no change)")
    elif amb.node_kind == "switch":
        message = (f"{len(amb.guids)} switches ({', '.join('0x' + g for g in amb.guids)}) all describe "
                   f"themselves as {amb.identity!r}; their cables land on {at}")
        fix = (f"give each switch its own node description (or a line per GUID in the node-name map): which "
               f"of them is {amb.identity} the plan cannot tell; their cables are not checked until then")
    else:
        message = (f"{len(amb.guids)} nodes ({', '.join('0x' + g for g in amb.guids)}, described as {seen}) "
                   f"all resolve to {amb.identity}; their cables land on {at}")
        fix = ("give each node its own name: fix the node-name map (one line per GUID), the node descriptions, "
               "or the HCA GUIDs in the manifest; these cables are not checked until then")
    return Finding(
        kind=amb.kind, severity="error", message=message, fix=fix,
        where=", ".join(lines[:3]) or source, endpoints=[str(e) for e in amb.peers],
        data={"guids": amb.guids, "ports": [str(e) for e in amb.peers]},
    )


def _check_quality(manifest: Manifest, i: int, lk: Link, rl: RLink, findings: list[Finding]) -> None:
    want_speed, want_width = lk.speed or manifest.fabric.speed, lk.width or manifest.fabric.width
    if want_width and rl.width and rl.width != want_width and width_lanes(rl.width) < width_lanes(want_width):
        findings.append(Finding(
            kind="degraded_width", severity="error",
            message=f"link {lk.a} <-> {lk.b} trained at {rl.width}, expected {want_width}",
            fix=f"reseat, clean or replace the cable between {_fmt(lk.a)} and {_fmt(lk.b)} "
            "(lanes are failing)",
            where=manifest.where_link(i), endpoints=[str(lk.a), str(lk.b)], data={"found": rl.width, "expected": want_width},
        ))
    if want_speed and rl.speed and rl.speed != want_speed and speed_rank(rl.speed) < speed_rank(want_speed):
        findings.append(Finding(
            kind="degraded_speed", severity="error",
            message=f"link {lk.a} <-> {lk.b} trained at {rl.speed}, expected {want_speed}",
            fix=f"check the cable type between {_fmt(lk.a)} and {_fmt(lk.b)} is rated for {want_speed}, "
            "then reseat or replace it",
            where=manifest.where_link(i), endpoints=[str(lk.a), str(lk.b)], data={"found": rl.speed, "expected": want_speed},
        ))


def _swap(
    manifest: Manifest, a: AnyPort, x: AnyPort, y: AnyPort, b: AnyPort,
    devices: Mapping[str, Device], ia: int, ib: int,
) -> Finding:
    # Found a-b and y-x; planned a-x and y-b. Exchanging the cables in ports x and b fixes it, and
    # so does exchanging them in a and y: name the pair that sits side by side, else on switches.
    def score(p: AnyPort, q: AnyPort) -> int:
        same = 2 if p.device.casefold() == q.device.casefold() else 0
        da, db = devices.get(p.device.casefold()), devices.get(q.device.casefold())
        return same + (1 if da is not None and db is not None and da.kind == db.kind == "switch" else 0)

    if score(x, b) >= score(a, y):
        p1, p2, e1, e2 = x, b, a, y  # a goes to x, y goes to b
    else:
        p1, p2, e1, e2 = a, y, x, b
    if p1.device.casefold() == p2.device.casefold():
        if natural_key(p2.port) < natural_key(p1.port):
            p1, p2, e1, e2 = p2, p1, e2, e1
        fix = f"swap the cables in {p1.device} ports {p1.port} and {p2.port}"
    else:
        fix = f"swap the cables in {_fmt(p1)} and {_fmt(p2)}"
    crossing = _crossing(devices, b, x)
    return Finding(
        kind="swapped", severity="error",
        message=f"cables crossed: {_fmt(e1)} is on {_fmt(p2)} and {_fmt(e2)} is on {_fmt(p1)}"
        + (f" ({crossing[1]})" if crossing else ""),
        fix=f"{fix} (so {_fmt(e1)} reaches {_fmt(p1)} and {_fmt(e2)} reaches {_fmt(p2)})",
        where=manifest.where_link(ia), endpoints=[str(a), str(x), str(y), str(b)],
        data={"ports": [str(p1), str(p2)], "links": [ia, ib], **({"wrong": crossing[0]} if crossing else {})},
    )


def _best_move(
    rl: RLink,
    planned: Planned,
    found_peer: dict[Key, PeerAt],
    unexpected: dict[int, RLink],
    devices: Mapping[str, Device],
) -> tuple[AnyPort, AnyPort, AnyPort, int] | None:
    """Pick which end of a wrong link stays and where the other end goes, or None."""
    options: list[tuple[int, AnyPort, AnyPort, AnyPort, int]] = []
    for fixed, wrong in ((rl.a, rl.b), (rl.b, rl.a)):
        if wrong.device.casefold() not in devices:
            continue  # a cable from an unplanned device is not a misplaced planned cable
        got = planned(fixed)
        if got is None:
            continue
        target, i = got
        occupant = found_peer.get(target.key)
        if occupant is not None and occupant[2] not in unexpected:
            continue  # the target port holds a correct cable
        score = 2 if occupant is None else 0
        dev = devices.get(fixed.device.casefold())
        if dev is not None and dev.kind == "switch":
            score += 1
        options.append((score, fixed, wrong, target, i))
    if not options:
        return None
    best = max(options, key=lambda o: o[0])
    return best[1], best[2], best[3], best[4]


def check_plan(manifest: Manifest) -> None:
    """Refuse a manifest with a port planned for two cables or a self-link, naming its file."""
    _index_plan(manifest)


def manifest_as_found(manifest: Manifest) -> ResolvedFabric:
    """A manifest seen as if discovered: compare two plans with :func:`validate` (the re-cabling list)."""
    links = [RLink(PortRef(lk.a.device, lk.a.port), PortRef(lk.b.device, lk.b.port),
                   lk.width or manifest.fabric.width, lk.speed or manifest.fabric.speed, line=manifest.link_line(i))
             for i, lk in enumerate(manifest.links)]
    return ResolvedFabric(links=links, source=manifest.source)
