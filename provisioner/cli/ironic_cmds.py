"""`provision ironic enroll|nodes|release`: a site's hosts in OpenStack Ironic."""

from __future__ import annotations

import typer

from provisioner.cli.common import JsonOption, SiteOption, console, print_json, site_name
from provisioner.cli.errors import exit_with, handle_errors, plain
from provisioner.cli.tables import Col, fit_table, print_table
from provisioner.exceptions import ExitCode, InputError

ironic_app = typer.Typer(help="A site's hosts in OpenStack Ironic: enrol them, list their "
                         "nodes, undeploy them.")
HostsArg = typer.Argument(None, help="Host names or globs (default: every host of the site).")


def _table(title: str, cols: list[Col], rows: list[list[str]]) -> None:
    # every cell is text Ironic or a BMC wrote (states, errors): shown, never read as markup
    cells = [[plain(cell) for cell in row] for row in rows]
    print_table(console, fit_table(plain(title), cols, cells, width=console.width))


def _progress(host: str, phase: str, message: str) -> None:
    console.print(f"{plain(host)}: {plain(phase)}: {plain(message)}")


@ironic_app.command("enroll")
@handle_errors
def enroll(
    hosts: list[str] = HostsArg,
    site: str | None = SiteOption,
    no_manage: bool = typer.Option(False, "--no-manage",
                                   help="Only create/update the nodes; leave them in enroll."),
    refresh_credentials: bool = typer.Option(
        False, "--refresh-credentials",
        help="Send the BMC passwords again (Ironic never shows them back to compare)."),
    as_json: bool = JsonOption,
) -> None:
    """Enrol the site's hosts as Ironic nodes (idempotent: a second run changes nothing).

    Each node gets its BMC (credentials by the site's reference), the provisioning MAC (pinned
    or found by `provision discover`) as its only PXE port, its root-disk hints, its conductor
    group, and automated cleaning off; then Ironic checks the BMC (manage)."""
    from provisioner.deploy.ironic.site import enrol_hosts
    from provisioner.inventory import load_site
    from provisioner.state import StateStore

    s = load_site(site_name(site))
    chosen = s.select(hosts)
    store = StateStore.for_site(s)
    try:
        results = enrol_hosts(s, chosen, store, manage=not no_manage,
                              send_password=refresh_credentials,
                              progress=None if as_json else _progress)
    finally:
        store.close()
    if as_json:
        print_json({"site": s.name, "hosts": [r.to_dict() for r in results]})
    else:
        rows = [[r.host, r.mac or "-", (r.result.action if r.result else "FAILED"),
                 (r.result.node.get("provision_state") if r.result else r.error) or ""]
                for r in results]
        _table("Ironic enrolment", [Col("host"), Col("MAC", 1), Col("action", wrap=True),
                                     Col("state / error", wrap=True)], rows)
    if any(r.error for r in results):
        exit_with(ExitCode.PARTIAL_FAILURE)


@ironic_app.command("nodes")
@handle_errors
def nodes(site: str | None = SiteOption, as_json: bool = JsonOption) -> None:
    """List the Ironic node of each host of the site: state, power, maintenance, last error."""
    from provisioner.deploy.ironic.site import site_nodes
    from provisioner.inventory import load_site

    s = load_site(site_name(site))
    rows = site_nodes(s)
    if as_json:
        print_json({"site": s.name, "nodes": rows})
        return
    _table(f"Ironic nodes of site {s.name}",
           [Col("host"), Col("state"), Col("power", 1), Col("maint.", 1),
            Col("error", 2, wrap=True)],
           [[r["host"], r["provision_state"] or "-", r["power"] or "-",
             "yes" if r["maintenance"] else "", r["last_error"] or ""] for r in rows])


@ironic_app.command("release")
@handle_errors
def release(
    hosts: list[str] = typer.Argument(..., help="Host names or globs."),
    site: str | None = SiteOption,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = JsonOption,
) -> None:
    """Undeploy the named hosts in Ironic (no cleaning: data disks are kept)."""
    from provisioner.deploy.ironic.site import undeploy_hosts
    from provisioner.inventory import load_site
    from provisioner.state import StateStore

    s = load_site(site_name(site))
    chosen = s.select(hosts)
    if not yes:
        if as_json:
            raise InputError("release asks before undeploying", hint="add --yes with --json")
        names = ", ".join(h.name for h in chosen)
        if not typer.confirm(f"Undeploy {names} in Ironic?"):
            raise typer.Exit(1)
    store = StateStore.for_site(s)
    try:
        done = undeploy_hosts(s, chosen, store, progress=None if as_json else _progress)
    finally:
        store.close()
    if as_json:
        print_json({"site": s.name, "hosts": [{"host": h, "result": what, "ok": ok}
                                               for h, what, ok in done]})
    else:
        _table("Ironic undeploy", [Col("host"), Col("result", wrap=True)],
               [[h, what if ok else f"FAILED: {what}"] for h, what, ok in done])
    if not all(ok for _, _, ok in done):
        exit_with(ExitCode.PARTIAL_FAILURE)
