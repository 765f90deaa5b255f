"""Rendering of `provision discover --explain HOST`: each NIC's facts and the rule's verdict."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from provisioner.cli.errors import plain


def explain_table(host: str, explain: dict[str, Any]) -> Table:
    """One row per port: where it sits, link (? = not reported), and why (not) chosen."""
    rule = plain(explain.get("rule") or "no rule")
    table = Table(title=f"{host}: provisioning NIC by {rule}", title_justify="left",
                  expand=False)
    for col, kw in (("port", {"overflow": "fold", "max_width": 20}),
                    ("MAC", {"no_wrap": True}),
                    ("where", {"overflow": "fold", "max_width": 11}),
                    ("link", {"no_wrap": True}),
                    ("verdict", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for port in explain.get("ports") or []:
        where = plain(port.get("location") or ("onboard" if port.get("onboard") else "?"))
        if port.get("pcie_slot"):
            where = f"{where} ({plain(port['pcie_slot'])})"
        link = {"up": "up", "down": "down"}.get(str(port.get("link")), "?")
        if port.get("chosen"):
            verdict = "[green]chosen[/]"
        else:  # the sources of each fact follow the table: keep the cell short
            verdict = "; ".join(plain(_short(r)) for r in port.get("why_not") or []) or "-"
        table.add_row(plain(port.get("id")), plain(port.get("mac")), where, link, verdict)
    return table


# Reasons whose detail the lines under the table print (location from ..., excluded: ...)
_EXCLUDED = "never a PXE port: "


def _short(reason: str) -> str:
    """A verdict reason without the detail printed under the table ("not onboard (slot, from
    ...)" -> "not onboard (slot)"); any other reason whole (a MAC prefix is full of colons)."""
    if ", from " in reason:
        return reason.split(", from ")[0] + ")"
    if reason.startswith(_EXCLUDED):
        return _EXCLUDED.removesuffix(": ")
    return reason


def print_explanation(out: Console, err: Console, host: str, explain: dict[str, Any]) -> None:
    """The table, then per port the facts' sources, then the warnings or the refusal."""
    out.print(explain_table(host, explain))
    for port in explain.get("ports") or []:
        facts = []
        if port.get("location_from"):
            facts.append(f"location from {plain(port['location_from'])}")
        if port.get("vendor"):
            facts.append(f"adapter {plain(port['vendor'])}")
        if port.get("boot_options"):
            facts.append("boot entries " + ", ".join(plain(b) for b in port["boot_options"][:2]))
        if port.get("excluded"):
            facts.append(f"excluded: {plain(port['excluded'])}")
        if facts:
            out.print(f"{plain(port.get('id'))}:", soft_wrap=False)
            for fact in facts:
                out.print(f"  {fact}", soft_wrap=False, overflow="fold")
    for warning in explain.get("warnings") or []:
        err.print(f"[yellow]{host}[/] warning: {plain(warning)}")
    if explain.get("error"):
        err.print(f"[red]{host}[/] {plain(explain['error'])}")
    if explain.get("hint") and not explain.get("chosen"):
        err.print(f"  hint: {plain(explain['hint'])}")
