"""``provision cabling ...``: plan, lint, validate, import, name-switches, convert, draw, simulate."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from cabling.asbuilt import as_built, fabric_json
from cabling.csvio import export_csv
from cabling.diff import VALIDATE_KINDS, manifest_as_found
from cabling.diff import validate as run_validate
from cabling.discovery.nodemap import format_node_name_map
from cabling.errors import CablingError, CablingInputError, ExitCode
from cabling.findings import Report
from cabling.manifest import dump_manifest, schema_text
from cabling.model import Manifest
from cabling.naming import infer_switch_names
from cabling.ndt import export_ndt
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.report.json import render_json
from cabling.report.junit import render_junit
from cabling.report.svg import render_html, render_svg
from cabling.report.text import render_text, summary
from cabling.report.worklist import render_worklist
from cabling.resolve import resolve
from cabling.rules import RULES, lint
from cabling.simulate import (
    build_clean,
    inject_faults,
    render_iblinkinfo_down,
    render_ibnetdiscover,
)
from cabling.slurm import slurm_topology
from cabling.sources import DiscoveryOptions, open_manifest

P = ParamSpec("P")
R = TypeVar("R")

cabling_app = typer.Typer(
    name="cabling",
    help=(
        "Wiring manifests for InfiniBand/RoCE fabrics: generate a plan, lint it in CI, validate the "
        "built fabric against it.\n\nExit codes: 0 clean, 2 bad input, 3 findings."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


class Format(StrEnum):
    """Report formats."""

    text = "text"
    json = "json"
    junit = "junit"
    worklist = "worklist"


def _errors(func: Callable[P, R]) -> Callable[P, R]:
    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except CablingError as exc:
            # The message is text (file names, keys, device names): never Rich markup.
            err.print(Text.assemble(("error:", "bold red"), " ", str(exc)))
            raise typer.Exit(int(exc.exit_code)) from None

    return wrapper


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        output.write_text(text, encoding="utf-8")
        err.print(f"wrote {escape(str(output))}")


def _emit(report: Report, fmt: Format, output: Path | None, cases: list[str], limit: int | None,
          manifest: Manifest | None = None) -> None:
    if fmt is Format.worklist and manifest is not None:
        _write(render_worklist(report, manifest), output)
    elif fmt is Format.json:
        _write(render_json(report), output)
    elif fmt is Format.junit:
        _write(render_junit(report, cases), output)
    elif output is None:
        render_text(report, out, limit or None)
        return
    else:
        with output.open("w", encoding="utf-8") as fh:
            render_text(report, Console(file=fh, width=200, highlight=False), None)
        err.print(f"wrote {escape(str(output))}")
    err.print(summary(report))


def _picture(path: Path | None, manifest: Manifest, report: Report | None) -> None:
    if path is None:
        return
    text = render_html(manifest, report) if path.suffix.lower() in (".html", ".htm") else render_svg(manifest, report)
    path.write_text(text, encoding="utf-8")
    err.print(f"wrote {escape(str(path))}")


def _finish(report: Report, strict: bool) -> None:
    if report.failed(strict):
        raise typer.Exit(int(ExitCode.FINDINGS))


ManifestArg = typer.Argument(..., help="YAML/JSON manifest, CSV cable list, or UFM NDT file(s)")
FormatOpt = typer.Option(Format.text, "--format", "-f",
                         help="report format (worklist: fixes grouped by rack, for technicians)")
OutputOpt = typer.Option(None, "--output", "-o", help="write the report to this file")
LimitOpt = typer.Option(200, "--limit", help="most findings in the text report (0: all)")


@cabling_app.command()
@_errors
def plan(
    hosts: int = typer.Option(..., "--hosts", help="number of GPU hosts"),
    hcas: int = typer.Option(8, "--hcas", help="HCAs per host (one rail each)"),
    radix: int = typer.Option(64, "--radix", help="switch port count (QM9700: 64)"),
    blocking: str = typer.Option("1:1", "--blocking", help="leaf down:up ratio"),
    tiers: int | None = typer.Option(None, "--tiers", help="2 or 3 (default: the fewest that fit)"),
    speed: str = typer.Option("NDR", "--speed", help="link speed"),
    model: str = typer.Option("QM9700", "--switch-model"),
    host_prefix: str = typer.Option("gpu", "--host-prefix"),
    name: str | None = typer.Option(None, "--name", help="fabric name"),
    output: Path | None = OutputOpt,
) -> None:
    """Generate the manifest of a rail-optimised fat tree (YAML; CSV or JSON by -o's extension)."""
    manifest = plan_fat_tree(PlanSpec(hosts=hosts, hcas=hcas, radix=radix, blocking=blocking, tiers=tiers,
                                      speed=speed.upper(), switch_model=model, host_prefix=host_prefix, name=name))
    suffix = output.suffix.lower() if output else ""
    if suffix == ".csv":
        text = export_csv(manifest)
    elif suffix == ".json":
        text = manifest.model_dump_json(indent=1, exclude_none=True) + "\n"
    else:
        text = dump_manifest(manifest)
    _write(text, output)
    roles: dict[str, int] = {}
    for d in manifest.devices:
        roles[d.role or d.kind] = roles.get(d.role or d.kind, 0) + 1
    err.print(f"{manifest.fabric.tiers}-tier plan: {', '.join(f'{n} {r}' for r, n in roles.items())}, "
              f"{len(manifest.links)} links")


@cabling_app.command("lint")
@_errors
def lint_cmd(
    manifest: list[Path] = ManifestArg,
    fmt: Format = FormatOpt,
    output: Path | None = OutputOpt,
    skip: list[str] = typer.Option([], "--skip", help="rule id to skip (repeatable)"),
    strict: bool = typer.Option(False, "--strict", help="warnings fail too"),
    svg: Path | None = typer.Option(None, "--svg", help="also draw the fabric (.svg or .html)"),
    limit: int = LimitOpt,
) -> None:
    """Check a manifest before anyone pulls a cable (exit 3 on errors; on warnings with --strict)."""
    m = open_manifest(manifest)
    report = lint(m, set(skip))
    _emit(report, fmt, output, report.checks, limit, m)
    _picture(svg, m, report)
    _finish(report, strict)


@cabling_app.command()
def rules() -> None:
    """List the lint rules: id, severity, name, what each checks."""
    for r in RULES:
        out.print(f"{r.id}  {r.severity:<7}  {r.name:<17}  {r.description}")


def _discovery(ibnetdiscover: Path | None, iblinkinfo: list[Path], ufm: str | None, ufm_dir: Path | None,
               ufm_user: str | None, ufm_insecure: bool, lldp: Path | None, node_name_map: list[Path],
               ibstat: Path | None) -> DiscoveryOptions:
    return DiscoveryOptions(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, lldp, node_name_map,
                            ibstat)


IbnetOpt = typer.Option(None, "--ibnetdiscover", help="ibnetdiscover output file")
IblinkOpt = typer.Option([], "--iblinkinfo", help="iblinkinfo output (links, widths, ports down)")
UfmOpt = typer.Option(None, "--ufm", help="URL of a live UFM (credentials: UFM_USER/UFM_PASSWORD or UFM_TOKEN)")
UfmDirOpt = typer.Option(None, "--ufm-dir", help="folder with UFM systems.json, ports.json, links.json")
UfmUserOpt = typer.Option(None, "--ufm-user", help="UFM user (default UFM_USER or admin)")
UfmInsecureOpt = typer.Option(False, "--ufm-insecure", help="do not verify UFM's TLS certificate")
LldpOpt = typer.Option(None, "--lldp", help="folder of <host>.json files from 'lldpctl -f json'")
NnmOpt = typer.Option([], "--node-name-map", help="GUID -> name map (repeatable)")
IbstatOpt = typer.Option(None, "--ibstat", help="folder of <host>.txt ibstat outputs (maps HCA GUIDs)")


@cabling_app.command("validate")
@_errors
def validate_cmd(
    manifest: list[Path] = typer.Option(..., "--manifest", "-m", help="the plan (repeat for several NDT files)"),
    ibnetdiscover: Path | None = IbnetOpt,
    iblinkinfo: list[Path] = IblinkOpt,
    ufm: str | None = UfmOpt,
    ufm_dir: Path | None = UfmDirOpt,
    ufm_user: str | None = UfmUserOpt,
    ufm_insecure: bool = UfmInsecureOpt,
    lldp: Path | None = LldpOpt,
    node_name_map: list[Path] = NnmOpt,
    ibstat: Path | None = IbstatOpt,
    fmt: Format = FormatOpt,
    output: Path | None = OutputOpt,
    svg: Path | None = typer.Option(None, "--svg", help="also draw the fabric with faults (.svg or .html)"),
    warn_only: list[str] = typer.Option([], "--warn-only",
                                        help="report this kind as a warning, not a CI failure (repeatable)"),
    limit: int = LimitOpt,
) -> None:
    """Compare the built fabric with the plan: what to move, swap, connect, unplug or replace."""
    unknown = set(warn_only) - set(VALIDATE_KINDS)
    if unknown:
        raise CablingInputError(f"unknown finding kind(s) {', '.join(sorted(unknown))} for --warn-only",
                                hint=f"kinds: {', '.join(VALIDATE_KINDS)}")
    m = open_manifest(manifest)
    fab, names = _discovery(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, lldp, node_name_map,
                            ibstat).load()
    report = run_validate(m, resolve(fab, m, names))
    for f in report.findings:
        if f.kind in warn_only:
            f.severity = "warning"  # e.g. degraded links during a staged bring-up
    _emit(report, fmt, output, list(VALIDATE_KINDS), limit, m)
    _picture(svg, m, report)
    _finish(report, False)


@cabling_app.command("import")
@_errors
def import_cmd(
    ibnetdiscover: Path | None = IbnetOpt,
    iblinkinfo: list[Path] = IblinkOpt,
    ufm: str | None = UfmOpt,
    ufm_dir: Path | None = UfmDirOpt,
    ufm_user: str | None = UfmUserOpt,
    ufm_insecure: bool = UfmInsecureOpt,
    lldp: Path | None = LldpOpt,
    node_name_map: list[Path] = NnmOpt,
    ibstat: Path | None = IbstatOpt,
    output: Path | None = typer.Option(None, "--output", "-o", help="write the as-built manifest here"),
    as_json: bool = typer.Option(False, "--json", help="print the parsed nodes and links as JSON instead"),
) -> None:
    """Turn a discovered fabric into a manifest (the as-built), to adopt an existing fabric."""
    fab, names = _discovery(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, lldp, node_name_map,
                            ibstat).load()
    if as_json:
        _write(json.dumps(fabric_json(fab, resolve(fab, None, names)), indent=2) + "\n", output)
        return
    m = as_built(fab, names)
    _write(export_csv(m) if output and output.suffix.lower() == ".csv" else dump_manifest(m), output)
    err.print(f"as-built: {len(m.devices)} devices, {len(m.links)} links")


@cabling_app.command("name-switches")
@_errors
def name_switches(
    manifest: list[Path] = typer.Option(..., "--manifest", "-m", help="the plan"),
    ibnetdiscover: Path | None = IbnetOpt,
    iblinkinfo: list[Path] = IblinkOpt,
    ufm: str | None = UfmOpt,
    ufm_dir: Path | None = UfmDirOpt,
    ufm_user: str | None = UfmUserOpt,
    ufm_insecure: bool = UfmInsecureOpt,
    node_name_map: list[Path] = NnmOpt,
    ibstat: Path | None = IbstatOpt,
    output: Path | None = typer.Option(None, "--output", "-o", help="write the node-name-map here"),
) -> None:
    """Infer each switch's planned name from its neighbours; write a node-name-map (exit 3 if any is unmatched)."""
    m = open_manifest(manifest)
    fab, names = _discovery(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, None, node_name_map,
                            ibstat).load()
    result = infer_switch_names(fab, m, names)
    _write(format_node_name_map(result.names, "node-name-map written by 'provision cabling name-switches'"),
           output)
    for guid, why in sorted(result.ambiguous.items()):
        err.print(f"[yellow]ambiguous[/] 0x{guid} ({escape(result.current.get(guid, '?'))}): {escape(why)}",
                  markup=True)
    for guid, why in sorted(result.unmatched.items()):
        err.print(f"[yellow]unmatched[/] 0x{guid} ({escape(result.current.get(guid, '?'))}): {escape(why)}",
                  markup=True)
    renamed = sum(1 for g, n in result.names.items() if result.current.get(g) != n)
    internal = f" (of them {len(result.internal)} director spine blades, named after their chassis)" \
        if result.internal else ""
    err.print(f"{len(result.names)} switch(es) named{internal}, {renamed} differ from their current description; "
              f"{len(result.ambiguous)} ambiguous, {len(result.unmatched)} unmatched")
    if result.ambiguous or result.unmatched:
        raise typer.Exit(int(ExitCode.FINDINGS))


@cabling_app.command()
@_errors
def convert(
    manifest: list[Path] = ManifestArg,
    output: Path | None = typer.Option(None, "--output", "-o",
                                       help=".yaml/.yml, .json, .csv or .ndt (default: YAML)"),
) -> None:
    """Convert between YAML, JSON, CSV and UFM NDT files (.ndt output is for UFM's cable validation)."""
    m = open_manifest(manifest)
    suffix = output.suffix.lower() if output else ".yaml"
    if suffix == ".ndt":
        text = export_ndt(m)
    elif suffix == ".csv":
        text = export_csv(m)
    elif suffix == ".json":
        text = m.model_dump_json(indent=2, exclude_none=True) + "\n"
    else:
        text = dump_manifest(m)
    _write(text, output)


@cabling_app.command("diff")
@_errors
def diff_cmd(
    old: Path = typer.Argument(..., help="the fabric as cabled now (a manifest)"),
    new: Path = typer.Argument(..., help="the fabric as it should become"),
    fmt: Format = FormatOpt,
    output: Path | None = OutputOpt,
    limit: int = LimitOpt,
) -> None:
    """The re-cabling list from one plan to another: moves, swaps, cables to add and to remove."""
    before, after = open_manifest([old]), open_manifest([new])
    report = run_validate(after, manifest_as_found(before))
    report.title = f"re-cable {before.source} into {after.source}"
    _emit(report, fmt, output, list(VALIDATE_KINDS), limit, after)
    _finish(report, False)


@cabling_app.command("slurm-topology")
@_errors
def slurm_topology_cmd(
    manifest: list[Path] = ManifestArg,
    output: Path | None = typer.Option(None, "--output", "-o", help="write topology.conf here"),
) -> None:
    """Write Slurm's topology.conf (topology/tree): one switch per leaf group, then the tiers above."""
    _write(slurm_topology(open_manifest(manifest)), output)


@cabling_app.command()
def schema(output: Path | None = OutputOpt) -> None:
    """Print the JSON schema of the manifest format."""
    _write(schema_text(), output)


@cabling_app.command()
@_errors
def draw(
    manifest: list[Path] = ManifestArg,
    output: Path = typer.Option(..., "--output", "-o", help=".svg or .html"),
) -> None:
    """Draw the fabric by tier (lint findings highlighted)."""
    m = open_manifest(manifest)
    _picture(output, m, lint(m))


@cabling_app.command()
@_errors
def simulate(
    manifest: list[Path] = ManifestArg,
    output: Path = typer.Option(..., "--output", "-o", help="ibnetdiscover text to write"),
    faults: int = typer.Option(0, "--faults-per-kind", help="inject this many faults of every kind"),
    seed: int = typer.Option(7, "--seed"),
    down_output: Path | None = typer.Option(None, "--iblinkinfo-output",
                                            help="write the ports that are down as iblinkinfo here"),
) -> None:
    """Write the ibnetdiscover output the planned fabric would give (to rehearse validate, or for UFM's simulator)."""
    m = open_manifest(manifest)
    try:
        sim = inject_faults(m, faults, seed) if faults else build_clean(m)
    except ValueError as exc:
        raise CablingInputError(f"cannot inject {faults} faults of each kind: {exc}") from None
    output.write_text(render_ibnetdiscover(m, sim), encoding="utf-8")
    if down_output is not None:
        down_output.write_text(render_iblinkinfo_down(m, sim), encoding="utf-8")
    err.print(f"wrote {output}: {len(sim.links)} links, {len(sim.faults)} injected fault(s)")
