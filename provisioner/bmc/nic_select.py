"""Choosing the provisioning NIC of a host from its ports by the host profile's rule."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from provisioner.bmc.base import NicPort
from provisioner.exceptions import BMCError, InputError

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


def _ports_text(ports: Sequence[NicPort]) -> str:
    if not ports:
        return "none"
    return ", ".join(
        f"{p.id} {p.mac} link={'up' if p.link_up else 'down' if p.link_up is False else '?'}"
        for p in ports
    )


def select_provisioning_nic(ports: Sequence[NicPort], rule: NicRuleLike) -> NicPort:
    """The one port matching ``rule``; raise ProvisioningNicError on zero or several matches."""
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
    matches = list(ports)
    if rule.port_id:
        matches = [p for p in matches if p.id == rule.port_id or p.id.startswith(rule.port_id)]
        exact = [p for p in matches if p.id == rule.port_id]
        matches = exact or matches
    if rule.name:
        matches = [p for p in matches if p.name == rule.name]
    if rule.mac_prefix:
        prefix = rule.mac_prefix.lower().replace("-", ":")
        matches = [p for p in matches if p.mac.startswith(prefix)]
    pick_first = False
    if rule.rule == RULE_FIRST_ONBOARD_UP:
        matches = [p for p in matches if p.onboard and p.link_up]
        pick_first = True
    elif rule.rule == RULE_FIRST_UP:
        matches = [p for p in matches if p.link_up]
        pick_first = True
    matches.sort(key=lambda p: _natural_key(p.id))
    if not matches:
        raise ProvisioningNicError(
            f"no port matches the provisioning NIC rule ({describe_rule(rule)}); "
            f"ports seen: {_ports_text(ports)}",
            candidates=ports,
            hint="fix the profile's provisioning_nic rule, or cable/enable the port",
        )
    if len(matches) > 1 and not pick_first:
        raise AmbiguousProvisioningNic(
            f"{len(matches)} ports match the provisioning NIC rule ({describe_rule(rule)}): "
            f"{_ports_text(matches)}",
            candidates=matches,
            hint="make the rule specific (a port_id, or a longer mac_prefix), or set "
            "provisioning_mac for this host in the site file",
        )
    return matches[0]


def pinned_port(ports: Sequence[NicPort], mac: str) -> NicPort:
    """The port with the MAC pinned in the site file (provisioning_mac); raise if absent."""
    wanted = mac.strip().lower().replace("-", ":")
    for port in ports:
        if port.mac == wanted:
            return port
    raise ProvisioningNicError(
        f"provisioning_mac {wanted} from the site file is not among the host's ports "
        f"({_ports_text(ports)})",
        candidates=ports,
        hint="correct provisioning_mac for this host, or remove it so the profile rule applies",
    )
