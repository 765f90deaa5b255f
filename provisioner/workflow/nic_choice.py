"""Choosing the provisioning NIC of a host from the ports its BMC reports: site policy (the
profile's rule, the MAC the site file pins), kept out of bmc/, which only reports each port's
facts (location, link, boot options, PCIe slot, function type)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from provisioner.bmc.base import HostFacts, NicPort
from provisioner.exceptions import BMCError, InputError
from provisioner.macaddr import canonical_mac

RULE_FIRST_ONBOARD_UP = "first-onboard-up"
RULE_FIRST_UP = "first-up"
KNOWN_RULES = (RULE_FIRST_ONBOARD_UP, RULE_FIRST_UP)


class NicRuleLike(Protocol):
    """What the inventory's NicRule offers (port_id, name, mac_prefix, rule)."""

    @property
    def port_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def mac_prefix(self) -> str | None: ...
    @property
    def rule(self) -> str | None: ...


class ProvisioningNicError(BMCError):
    """The profile's NIC rule matched no port, or several, on this host."""

    reason = "no PXE NIC matched"

    def __init__(self, message: str, *, candidates: Sequence[NicPort] = (), hint: str | None = None):
        self.candidates = list(candidates)
        super().__init__(message, hint=hint)


class AmbiguousProvisioningNic(ProvisioningNicError):
    """The rule matched several ports; a PXE boot could come from any of them."""

    reason = "several PXE NICs matched"


def describe_rule(rule: NicRuleLike) -> str:
    """The rule as the user wrote it, for messages."""
    parts = [
        f"{key}={value}"
        for key, value in (
            ("port_id", rule.port_id),
            ("name", rule.name),
            ("mac_prefix", rule.mac_prefix),
            ("rule", rule.rule),
        )
        if value
    ]
    return ", ".join(parts) or "(empty rule)"


def _natural_key(text: str) -> list[object]:
    return [int(tok) if tok.isdigit() else tok.lower() for tok in re.split(r"(\d+)", text)]


def _port_text(p: NicPort) -> str:
    where = p.location or ("onboard" if p.onboard else "?")
    return f"{p.id} {p.mac} {where} link={ {'up': 'up', 'down': 'down'}.get(p.link, '?') }"


def _ports_text(ports: Sequence[NicPort]) -> str:
    if not ports:
        return "none"
    return ", ".join(_port_text(p) for p in ports)


@dataclass(frozen=True)
class PortVerdict:
    """One port judged against the rule: chosen, or the reasons it was not."""

    port: NicPort
    chosen: bool = False
    reasons: tuple[str, ...] = ()


@dataclass
class NicChoice:
    """The outcome of a rule on a host: the chosen port (or None), a verdict per port."""

    rule: str
    port: NicPort | None
    verdicts: list[PortVerdict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: ProvisioningNicError | None = None


def _check_rule(rule: NicRuleLike) -> None:
    if not (rule.port_id or rule.name or rule.mac_prefix or rule.rule):
        raise InputError(
            "the host profile's provisioning_nic rule is empty",
            hint="set provisioning_nic to one of {port_id: ...}, {name: ...}, "
            "{mac_prefix: ...} or {rule: first-onboard-up}",
        )
    if rule.rule and rule.rule not in KNOWN_RULES:
        raise InputError(
            f"unknown provisioning_nic rule {rule.rule!r}",
            hint=f"use one of: {', '.join(KNOWN_RULES)}",
        )


def _reasons(port: NicPort, rule: NicRuleLike) -> list[str]:
    """Why ``port`` fails ``rule`` (link state aside): empty when it matches."""
    out: list[str] = []
    if rule.port_id and not port.id.startswith(rule.port_id):
        out.append(f"port Id is not {rule.port_id}")
    if rule.name and port.name != rule.name:
        out.append(f"name is not {rule.name}")
    if rule.mac_prefix and not port.mac.startswith(rule.mac_prefix.lower().replace("-", ":")):
        out.append(f"MAC does not start with {rule.mac_prefix}")
    if rule.rule and port.excluded:
        out.append(f"never a PXE port: {port.excluded}")
    if rule.rule == RULE_FIRST_ONBOARD_UP and not port.excluded:
        if port.onboard is False:
            out.append(f"not onboard ({port.location or 'add-in'}"
                       + (f", from {port.location_from}" if port.location_from else "") + ")")
        elif port.onboard is None:
            out.append("onboard unknown: the BMC says nowhere where this port sits")
    return out


def _suggestion(ports: Sequence[NicPort], rule: NicRuleLike) -> str:
    usable = sorted((p for p in ports if not p.excluded), key=lambda p: _natural_key(p.id))
    up = [p for p in usable if p.link_up]
    if up:
        text = f"write provisioning_nic: {{port_id: {up[0].id}}} (link up)"
        if rule.rule != RULE_FIRST_UP:
            text += f" or {{rule: {RULE_FIRST_UP}}} (first port with link up: {up[0].id})"
        return text + ", or set provisioning_mac for this host in the site file"
    if usable:
        booting = [p for p in usable if p.boot_options] or usable
        return (f"no candidate port reports link up: cable or enable the provisioning port, "
                f"or write provisioning_nic: {{port_id: {booting[0].id}}} "
                f"(or {{mac_prefix: {booting[0].mac}}})")
    return "the BMC lists no Ethernet port that can network-boot: check the host's NICs"


def explain_selection(ports: Sequence[NicPort], rule: NicRuleLike) -> NicChoice:
    """Judge every port against ``rule`` and say which one is chosen and why the others are not.

    ``first-*`` rules take the first port (natural order of port Ids) with link up; when none
    is up they accept one whose link state the BMC does not report, with a warning. Ports with
    link down never match a ``first-*`` rule.
    """
    _check_rule(rule)
    text = describe_rule(rule)
    ordered = sorted(ports, key=lambda p: _natural_key(p.id))
    reasons = {p.mac: _reasons(p, rule) for p in ordered}
    matches = [p for p in ordered if not reasons[p.mac]]
    if rule.port_id:
        exact = [p for p in matches if p.id == rule.port_id]
        for p in matches:
            if exact and p not in exact:
                reasons[p.mac].append(f"another port's Id is exactly {rule.port_id}")
        matches = exact or matches
    warnings: list[str] = []
    chosen: NicPort | None = None
    error: ProvisioningNicError | None = None
    if rule.rule:
        up = [p for p in matches if p.link_up]
        unknown = [p for p in matches if p.link_up is None]
        for p in matches:
            if p.link_up is False:
                reasons[p.mac].append("link down")
        if up:
            chosen = up[0]
        elif unknown:
            chosen = unknown[0]
            warnings.append(
                f"chose {chosen.id} ({chosen.mac}) although the BMC reports no link state for "
                f"it (no matching port reports link up): check it is the cabled port")
        for p in matches:
            if chosen is not None and p is not chosen and not reasons[p.mac]:
                reasons[p.mac].append(f"{chosen.id} comes first"
                                      + ("" if p.link_up or chosen.link_up is None
                                         else " (link unknown)"))
    elif len(matches) == 1:
        chosen = matches[0]
    elif len(matches) > 1:
        error = AmbiguousProvisioningNic(
            f"{len(matches)} ports match the provisioning NIC rule ({text}): "
            f"{_ports_text(matches)}",
            candidates=matches,
            hint="make the rule specific (a port_id, or a longer mac_prefix), or set "
            "provisioning_mac for this host in the site file",
        )
        for p in matches:
            reasons[p.mac].append("several ports match")
    if chosen is None and error is None:
        error = ProvisioningNicError(
            f"no port matches the provisioning NIC rule ({text}); ports seen: "
            f"{_ports_text(ordered)}",
            candidates=ordered,
            hint=_suggestion(ordered, rule),
        )
    verdicts = [PortVerdict(p, chosen=p is chosen, reasons=tuple(reasons[p.mac]))
                for p in ordered]
    return NicChoice(rule=text, port=chosen, verdicts=verdicts, warnings=warnings, error=error)


def select_provisioning_nic(ports: Sequence[NicPort], rule: NicRuleLike) -> NicPort:
    """The one port matching ``rule``; raise ProvisioningNicError on zero or several matches."""
    choice = explain_selection(ports, rule)
    if choice.port is None:
        raise choice.error or ProvisioningNicError("no port matches", candidates=ports)
    return choice.port


def port_facts(port: NicPort) -> dict[str, object]:
    """The facts of a port a NIC rule looks at, JSON-ready (for --explain)."""
    return {
        "id": port.id,
        "mac": port.mac,
        "name": port.name,
        "link": port.link,
        "speed_mbps": port.speed_mbps,
        "onboard": port.onboard,
        "location": port.location,
        "location_from": port.location_from,
        "pcie_slot": port.pcie_slot,
        "vendor": port.vendor,
        "boot_options": list(port.boot_options),
        "excluded": port.excluded,
        "source": port.source,
    }


def choice_to_dict(choice: NicChoice) -> dict[str, object]:
    """A NicChoice as JSON-ready data: the rule, the chosen MAC, and each port's verdict."""
    return {
        "rule": choice.rule,
        "chosen": choice.port.mac if choice.port else None,
        "warnings": list(choice.warnings),
        "error": choice.error.message if choice.error else None,
        "hint": choice.error.hint if choice.error else None,
        "ports": [
            {**port_facts(v.port), "chosen": v.chosen, "why_not": list(v.reasons)}
            for v in choice.verdicts
        ],
    }


def explain_pinned(ports: Sequence[NicPort], mac: str) -> dict[str, object]:
    """Like choice_to_dict for a host whose provisioning_mac the site file pins."""
    wanted = canonical_mac(mac) or mac.strip().lower()
    found = any(p.mac == wanted for p in ports)
    return {
        "rule": f"provisioning_mac={wanted} (site file)",
        "chosen": wanted if found else None,
        "warnings": [],
        "error": None if found else f"provisioning_mac {wanted} is not among the host's ports",
        "hint": None if found else "correct provisioning_mac for this host, or remove it",
        "ports": [
            {**port_facts(p), "chosen": p.mac == wanted,
             "why_not": [] if p.mac == wanted else ["not the pinned provisioning_mac"]}
            for p in sorted(ports, key=lambda p: _natural_key(p.id))
        ],
    }


def pinned_port(ports: Sequence[NicPort], mac: str) -> NicPort:
    """The port with the MAC pinned in the site file (provisioning_mac); raise if absent."""
    wanted = canonical_mac(mac) or mac.strip().lower()
    for port in ports:
        if port.mac == wanted:
            return port
    raise ProvisioningNicError(
        f"provisioning_mac {wanted} from the site file is not among the host's ports "
        f"({_ports_text(ports)})",
        candidates=ports,
        hint="correct provisioning_mac for this host, or remove it so the profile rule applies",
    )


@dataclass(frozen=True)
class NicPolicy:
    """How a host's provisioning NIC is chosen: the MAC the site file pins, else the profile's
    rule (either may be absent: then no port is chosen)."""

    rule: NicRuleLike | None = None
    pinned_mac: str | None = None

    @property
    def given(self) -> bool:
        """Whether there is anything to choose by."""
        return self.rule is not None or bool(self.pinned_mac)

    def explain(self, ports: Sequence[NicPort]) -> dict[str, object]:
        """Each port's facts and why the policy chose it or not (for --explain)."""
        if self.pinned_mac:
            return explain_pinned(ports, self.pinned_mac)
        if self.rule is None:
            return {"rule": None, "chosen": None, "warnings": [], "error": None,
                    "hint": "give the host's profile a provisioning_nic rule",
                    "ports": [{**port_facts(p), "chosen": False, "why_not": []}
                              for p in sorted(ports, key=lambda p: _natural_key(p.id))]}
        return choice_to_dict(explain_selection(ports, self.rule))

    def choose(self, ports: Sequence[NicPort]) -> tuple[NicPort, list[str]]:
        """The port that network-boots and the warnings of the choice; raises
        :class:`ProvisioningNicError` when none (or several) qualify. The BMC's boot code
        calls it (``boot_port``) to aim a network boot at that port."""
        if self.pinned_mac:
            return pinned_port(ports, self.pinned_mac), []
        if self.rule is None:
            raise ProvisioningNicError(
                "no provisioning NIC rule for this host", candidates=ports,
                hint="give the host's profile a provisioning_nic rule, or set "
                "provisioning_mac for this host in the site file")
        choice = explain_selection(ports, self.rule)
        if choice.port is None:
            raise choice.error or ProvisioningNicError("no port matches", candidates=ports)
        return choice.port, list(choice.warnings)


def apply_nic_policy(facts: HostFacts, policy: NicPolicy) -> None:
    """Choose the provisioning NIC among the ports discovery read: sets
    ``facts.provisioning_mac``, or the error and the rule to write; records every port's
    verdict for --explain and adds the choice's warnings."""
    if not policy.given:
        return
    warnings = facts.extra.setdefault("warnings", [])
    try:
        port, notes = policy.choose(facts.nics)
    except ProvisioningNicError as exc:  # the caller reports it per host
        facts.extra["provisioning_nic_error"] = str(exc)  # with the rule to write
        if exc.hint:
            facts.extra["provisioning_nic_hint"] = exc.hint
    else:
        facts.provisioning_mac = port.mac
        warnings.extend(w for w in notes if w not in warnings)
    facts.extra["nic_explain"] = policy.explain(facts.nics)
