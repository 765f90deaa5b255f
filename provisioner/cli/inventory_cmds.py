"""`provision inventory check|show`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.text import Text

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import err_console, exit_with, handle_errors, plain
from provisioner.cli.tables import Col, WideOption, dash, fit_table, print_table
from provisioner.exceptions import ProvisionerError
from provisioner.safetext import terminal, xml_tree
from provisioner.wording import plural

if TYPE_CHECKING:  # annotations only: `--help` must not load these (test_cli_lazy)
    from provisioner.inventory import Site

inventory_app = typer.Typer(help="Check and show the rack inventory (inventory/<site>/site.yml).")


@inventory_app.command("check")
@handle_errors
def check(
    sites: list[str] = typer.Argument(
        None, help="Site names, directories or files (default: the lab); each is checked."
    ),
    junit: Path | None = typer.Option(
        None, "--junit", metavar="FILE", help="Also write the results as JUnit XML (for CI)."
    ),
) -> None:
    """Validate site files: schema, names, U positions, BMCs, networks, address plan, that
    the CA bundles and secret files they name can be read, and that Ansible can use the site
    folder as its inventory (ansible-inventory --list).

    Every site named is checked, even after one fails; the exit code is the worst one.
    """
    from provisioner.inventory import load_site

    results: list[tuple[str, ProvisionerError | None]] = []
    for name in sites or [site_name(None)]:
        try:
            s = load_site(name, check_files=True)
            _check_ansible_view(s)
        except ProvisionerError as exc:
            err_console.print(f"[bold red]error:[/] {plain(exc)}")
            results.append((name, exc))
            continue
        _warn_unverified(s)
        console.print(
            f"[green]ok[/]: site {plain(repr(s.name))} ({plain(s.path)}): "
            f"{plural(len(s.racks), 'rack')}, {plural(len(s.hosts), 'host')}, "
            f"{plural(len(s.networks), 'network')}, {plural(len(s.profiles), 'profile')}"
        )
        results.append((name, None))
    if junit is not None:
        write_text_atomic(junit, check_junit(results))
    codes = [int(exc.exit_code) for _, exc in results if exc is not None]
    if codes:
        exit_with(max(codes))


def _check_ansible_view(s: Site) -> None:
    """What Ansible fails on fails here (a folder in the site directory it cannot parse)."""
    from provisioner.workflow.ansible_view_check import check_ansible_view

    view = check_ansible_view(s.path.parent)
    if not view.ran:
        err_console.print(Text(terminal(f"warning: {view.note}"), style="yellow"))


def _warn_unverified(s: Site) -> None:
    unverified = [h.name for h in s.hosts if not h.bmc.verify_tls]
    if unverified:
        shown = ", ".join(unverified[:5]) + (
            f" and {len(unverified) - 5} more" if len(unverified) > 5 else "")
        err_console.print(Text(
            f"warning: {len(unverified)} host(s) do not verify their BMC's TLS certificate "
            f"(verify_tls: false): {shown}; give the site a ca_bundle instead",
            style="yellow",
        ))


def check_junit(results: list[tuple[str, ProvisionerError | None]]) -> str:
    """JUnit XML with one test case per site: a failure carries the error and its hint."""
    failed = sum(exc is not None for _, exc in results)
    root = ET.Element("testsuites", name="provision inventory check")
    suite = ET.SubElement(
        root,
        "testsuite",
        name="provision inventory check",
        tests=str(len(results)),
        failures=str(failed),
        errors="0",
    )
    for name, exc in results:
        case = ET.SubElement(suite, "testcase", classname="inventory", name=name)
        if exc is not None:
            el = ET.SubElement(case, "failure", message=str(exc).splitlines()[0], type="invalid")
            el.text = str(exc)
    ET.indent(xml_tree(root))
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file (a CI reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


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
    from provisioner.inventory import load_site
    from provisioner.inventory.ansible_view import ansible_inventory

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
                plain(h.profile.name),
                plain(bmc),
                *(dash(h.addresses.get(n)) for n in nets),
                plain(dash(h.provisioning_mac)),
            ]
        )
    title = f"site {s.name}: {plural(len(hosts), 'host')}"
    print_table(console, fit_table(title, cols, cells, width=console.width, wide=wide), wide=wide)


def register(app: typer.Typer) -> None:
    """Add the inventory commands."""
    app.add_typer(inventory_app, name="inventory")
