"""`provision inventory check|show`."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import err_console, handle_errors
from provisioner.inventory import load_site
from provisioner.inventory.ansible_view import ansible_inventory

inventory_app = typer.Typer(help="Check and show the rack inventory (inventory/<site>/site.yml).")


@inventory_app.command("check")
@handle_errors
def check(
    site: str = typer.Argument(None, help="Site name, directory or file (default: the lab)."),
) -> None:
    """Validate a site file: schema, names, U positions, BMCs, networks, address plan, and that
    the CA bundles and secret files it names can be read."""
    s = load_site(site_name(site), check_files=True)
    unverified = [h.name for h in s.hosts if not h.bmc.verify_tls]
    if unverified:
        shown = ", ".join(unverified[:5]) + (f" and {len(unverified) - 5} more" if len(unverified) > 5 else "")
        err_console.print(Text(
            f"warning: {len(unverified)} host(s) do not verify their BMC's TLS certificate "
            f"(verify_tls: false): {shown}; give the site a ca_bundle instead",
            style="yellow",
        ))
    console.print(
        f"[green]ok[/]: site {s.name!r} ({s.path}): {len(s.racks)} racks, {len(s.hosts)} hosts, "
        f"{len(s.networks)} networks, {len(s.profiles)} profiles"
    )


@inventory_app.command("show")
@handle_errors
def show(
    site: str | None = SiteOption,
    rack: str | None = typer.Option(None, "--rack", help="Only this rack."),
    as_json: bool = JsonOption,
    ansible: bool = typer.Option(False, "--ansible", help="Print the Ansible view (groups, vars)."),
) -> None:
    """List the hosts with their rack, U, profile, BMC and planned addresses."""
    s = load_site(site_name(site))
    hosts = s.select(None, rack)
    if ansible:
        print_json(ansible_inventory(s))
        return
    if as_json:
        rows: list[dict[str, Any]] = [
            {
                "name": h.name,
                "rack": h.rack,
                "u": h.u,
                "profile": h.profile.name,
                "bmc": {"address": h.bmc.address, "port": h.bmc.port, "vendor": h.bmc.vendor},
                "provisioning_mac": h.provisioning_mac,
                "addresses": {k: str(v) for k, v in h.addresses.items()},
                "root_disk": h.root_disk.model_dump(exclude_none=True) if h.root_disk else None,
            }
            for h in hosts
        ]
        print_json({"site": s.name, "hosts": rows})
        return
    nets = list(s.networks)
    table = Table(title=f"site {s.name}: {len(hosts)} hosts")
    for col in ("host", "rack", "U", "profile", "BMC", *nets, "prov. MAC"):
        table.add_column(col)
    for h in hosts:
        bmc = h.bmc.address + (f":{h.bmc.port}" if h.bmc.port else "") + f" ({h.bmc.vendor})"
        table.add_row(
            h.name,
            h.rack,
            str(h.u),
            h.profile.name,
            bmc,
            *(str(h.addresses.get(n, "")) for n in nets),
            h.provisioning_mac or "-",
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add the inventory commands."""
    app.add_typer(inventory_app, name="inventory")
