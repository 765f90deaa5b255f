"""`provision inventory check|show`."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import handle_errors
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.inventory import load_site
from provisioner.inventory.ansible_view import ansible_inventory
from provisioner.wording import plural

inventory_app = typer.Typer(help="Check and show the rack inventory (inventory/<site>/site.yml).")


@inventory_app.command("check")
@handle_errors
def check(
    site: str = typer.Argument(None, help="Site name, directory or file (default: the lab)."),
) -> None:
    """Validate a site file: schema, names, U positions, BMCs, networks, address plan."""
    s = load_site(site_name(site))
    console.print(
        f"[green]ok[/]: site {s.name!r} ({s.path}): {plural(len(s.racks), 'rack')}, "
        f"{plural(len(s.hosts), 'host')}, {plural(len(s.networks), 'network')}, "
        f"{plural(len(s.profiles), 'profile')}"
    )


@inventory_app.command("show")
@handle_errors
def show(
    site: str | None = SiteOption,
    rack: str | None = typer.Option(None, "--rack", help="Only this rack."),
    as_json: bool = JsonOption,
    ansible: bool = typer.Option(False, "--ansible", help="Print the Ansible view (groups, vars)."),
    wide: bool = WideOption,
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
    cols = (
        Col("host"),
        Col("rack", priority=3),
        Col("U", priority=3, justify="right"),
        Col("profile", priority=4),
        Col("BMC", priority=2),
        *(Col(n, priority=1 if n == "provisioning" else 5) for n in nets),
        Col("prov. MAC", priority=1),
    )
    cells: list[list[str]] = []
    for h in hosts:
        bmc = h.bmc.address + (f":{h.bmc.port}" if h.bmc.port else "") + f" ({h.bmc.vendor})"
        cells.append(
            [
                h.name,
                h.rack,
                str(h.u),
                escape(h.profile.name),
                escape(bmc),
                *(dash(h.addresses.get(n)) for n in nets),
                dash(h.provisioning_mac),
            ]
        )
    title = f"site {s.name}: {plural(len(hosts), 'host')}"
    print_table(console, fit_table(title, cols, cells, width=console.width, wide=wide), wide=wide)


def register(app: typer.Typer) -> None:
    """Add the inventory commands."""
    app.add_typer(inventory_app, name="inventory")
