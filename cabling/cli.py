"""``provision cabling ...``: plan, lint, validate, import, name-switches, convert, draw, simulate."""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import typer

from cabling.errors import CablingError, CablingInputError, ExitCode
from cabling.findings import VALIDATE_KINDS

if TYPE_CHECKING:
    from rich.console import Console

    from cabling.findings import Report
    from cabling.model import Manifest
    from cabling.sources import DiscoveryOptions
    from cabling.validating import Judged

# Each command imports what it uses: 'validate' on a 12,000-link fabric must not pay for the
# planner, the simulator and every renderer at start-up (the CLI's wall time is measured).
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


class _LazyConsole:
    """A rich Console made on first use: a JSON report and its summary line need no rich (30 ms)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        """The real Console."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, highlight=False, soft_wrap=True, emoji=False)
        return self._console

    def print(self, *objects: object, **kwargs: Any) -> None:
        """Console.print."""
        self.console.print(*objects, **kwargs)


out = _LazyConsole(stderr=False)
err = _LazyConsole(stderr=True)


# Set by run_and_exit (`python -m cabling`, `provision cabling`), which ends the process without
# tearing it down: the command's 10^5 objects are then kept instead of being freed one by one
# (0.1 s on a 12,000-link fabric).
KEEP_UNTIL_EXIT = False
_kept: list[object] = []


def run_and_exit(run: Callable[[], object]) -> NoReturn:
    """Run a command (a Typer app call) and end the process without tearing it down: freeing a
    4,000-GPU fabric's objects one by one is a fifth of the run, and cabling registers no exit
    handlers (files it wrote are closed by then). The exit code and output are the command's."""
    global KEEP_UNTIL_EXIT
    KEEP_UNTIL_EXIT = True
    # The cyclic collector never needs to run in a process this short: re-enabled after a command,
    # its first pass would traverse every object the command made (a tenth of the run on a
    # 4,000-GPU fabric), and during start-up it re-scans what pydantic and typer build.
    gc.disable()
    code = 0
    try:
        run()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _keep(*objects: object) -> None:
    if KEEP_UNTIL_EXIT:
        _kept.extend(objects)


def _note(text: str) -> None:
    """A plain line on stderr (no markup, no rich)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class Format(StrEnum):
    """Report formats."""

    text = "text"
    json = "json"
    junit = "junit"
    worklist = "worklist"


def _errors(func: Callable[P, R]) -> Callable[P, R]:
    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        # A command builds 10^5 objects without reference cycles and exits: the cyclic collector
        # would re-scan them again and again (2-3x the load and validate time), so it rests meanwhile.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        except CablingError as exc:
            # The message is text (file names, keys, device names): never Rich markup.
            from rich.text import Text

            err.print(Text.assemble(("error:", "bold red"), " ", str(exc)))
            raise typer.Exit(int(exc.exit_code)) from None
        finally:
            if collecting:
                gc.enable()

    return wrapper


def _cannot_write(path: Path, exc: OSError) -> CablingInputError:
    """A typed error naming the output path and why the OS refused it."""
    if isinstance(exc, IsADirectoryError):
        reason = "it is a folder, not a file"
    elif isinstance(exc, FileNotFoundError):
        reason = f"the folder {str(path.parent)!r} does not exist"
    else:
        reason = exc.strerror or str(exc)
    return CablingInputError(f"cannot write {str(path)!r}: {reason}", file=None,
                             hint="give a file path in a folder that exists and that you can write")


def _write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path``; a path that cannot be written is a typed error (exit 2)."""
    try:
        with path.open("w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise _cannot_write(path, exc) from None


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _write_file(output, text)
        _note(f"wrote {output}")


def _emit(report: Report, fmt: Format, output: Path | None, cases: list[str], limit: int | None,
          manifest: Manifest | None = None) -> None:
    from cabling.report.text import render_text, summary

    if fmt is Format.worklist and manifest is not None:
        from cabling.report.worklist import render_worklist

        _write(render_worklist(report, manifest), output)
    elif fmt is Format.json:
        from cabling.report.json import render_json

        _write(render_json(report), output)
    elif fmt is Format.junit:
        from cabling.report.junit import render_junit

        _write(render_junit(report, cases), output)
    elif output is None:
        render_text(report, out.console, limit or None)
        return
    else:
        import io

        from rich.console import Console

        buffer = io.StringIO()
        render_text(report, Console(file=buffer, width=200, highlight=False), None)
        _write_file(output, buffer.getvalue())
        _note(f"wrote {output}")
    _note(summary(report))


def _picture(path: Path | None, manifest: Manifest, report: Report | None,
             seen_guids: dict[str, list[str]] | None = None) -> None:
    if path is None:
        return
    if path.suffix.lower() in (".html", ".htm"):
        from cabling.report.fabricmap import render_map

        text = render_map(manifest, report, seen_guids)
    else:
        from cabling.report.svg import render_svg

        text = render_svg(manifest, report)
    _write_file(path, text)
    _note(f"wrote {path}")


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
    model: str = typer.Option("QM9700", "--switch-model", help="switch model written on each switch"),
    host_prefix: str = typer.Option("gpu", "--host-prefix", help="host names start with this"),
    name: str | None = typer.Option(None, "--name", help="fabric name"),
    output: Path | None = OutputOpt,
) -> None:
    """Generate the manifest of a rail-optimised fat tree (YAML; CSV or JSON by -o's extension)."""
    from cabling.csvio import export_csv
    from cabling.manifest import dump_manifest
    from cabling.plan import PlanSpec, plan_fat_tree

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
    svg: Path | None = typer.Option(None, "--svg", help="also draw the fabric: .html is an interactive map (zoom, search, findings), .svg a picture"),
    limit: int = LimitOpt,
) -> None:
    """Check a manifest before anyone pulls a cable (exit 3 on errors; on warnings with --strict)."""
    from cabling.rules import lint
    from cabling.sources import open_manifest

    m = open_manifest(manifest)
    report = lint(m, set(skip))
    _keep(m, report)
    _emit(report, fmt, output, report.checks, limit, m)
    _picture(svg, m, report)
    _finish(report, strict)


@cabling_app.command()
def rules() -> None:
    """List the lint rules: id, severity, name, what each checks."""
    from cabling.rules import RULES

    for r in RULES:
        out.print(f"{r.id}  {r.severity:<7}  {r.name:<17}  {r.description}")


def _discovery(ibnetdiscover: Path | None, iblinkinfo: list[Path], ufm: str | None, ufm_dir: Path | None,
               ufm_user: str | None, ufm_insecure: bool, lldp: Path | None, node_name_map: list[Path],
               ibstat: Path | None) -> DiscoveryOptions:
    from cabling.sources import DiscoveryOptions

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


IbqOpt = typer.Option(None, "--ibqueryerrors", help="ibqueryerrors output (error counters; judged against the "
                      "fabric's median)")


@cabling_app.command("validate")
@_errors
def validate_cmd(
    manifest: list[Path] = typer.Option(..., "--manifest", "-m", help="the plan (repeat for several NDT files)"),
    ibnetdiscover: Path | None = IbnetOpt,
    iblinkinfo: list[Path] = IblinkOpt,
    ibqueryerrors: Path | None = IbqOpt,
    ufm: str | None = UfmOpt,
    ufm_dir: Path | None = UfmDirOpt,
    ufm_user: str | None = UfmUserOpt,
    ufm_insecure: bool = UfmInsecureOpt,
    lldp: Path | None = LldpOpt,
    node_name_map: list[Path] = NnmOpt,
    ibstat: Path | None = IbstatOpt,
    live: bool = typer.Option(False, "--live", help="run ibnetdiscover, iblinkinfo and ibqueryerrors now "
                              "(here, or on --via HOST) and keep their outputs beside the report"),
    via: str | None = typer.Option(None, "--via", help="with --live: run the tools on this fabric-attached host "
                                   "over SSH (host, user@host or a Host of your ssh config)"),
    ssh_config: Path | None = typer.Option(None, "--ssh-config", help="with --via: the ssh config file (ssh -F)"),
    ca: str | None = typer.Option(None, "--ca", help="with --live: the HCA the tools use (-C), e.g. mlx5_0"),
    ca_port: int | None = typer.Option(None, "--ca-port", min=1, max=254, help="with --live: its port (-P)"),
    run_with: str | None = typer.Option(None, "--run-with", help="with --live: words in front of each tool, "
                                        "e.g. 'sudo -n'"),
    raw_dir: Path | None = typer.Option(None, "--raw-dir", help="with --live: where the tools' outputs are kept "
                                        "(default: beside -o, REPORT.live/, else ./cabling-live-<time>/)"),
    counters: bool = typer.Option(True, "--counters/--no-counters", help="with --live: also read every port's error "
                                  "counters (ibqueryerrors)"),
    tool_timeout: float = typer.Option(600.0, "--tool-timeout", min=1, help="with --live: seconds each tool may run"),
    watch_s: float | None = typer.Option(None, "--watch", min=0, help="with --live: sweep again every N seconds and "
                                         "report what changed (Ctrl-C ends; SIGUSR1 sweeps now)"),
    count: int | None = typer.Option(None, "--count", min=1, help="with --watch: stop after this many sweeps"),
    fmt: Format = FormatOpt,
    output: Path | None = OutputOpt,
    svg: Path | None = typer.Option(None, "--svg", help="also draw the fabric with faults: .html is an interactive map, .svg a picture"),
    warn_only: list[str] = typer.Option([], "--warn-only",
                                        help="report this kind as a warning, not a CI failure (repeatable)"),
    limit: int = LimitOpt,
) -> None:
    """Compare the built fabric with the plan: what to move, swap, connect, unplug or replace."""
    from cabling.sources import open_manifest
    from cabling.validating import judge

    unknown = set(warn_only) - set(VALIDATE_KINDS)
    if unknown:
        raise CablingInputError(f"unknown finding kind(s) {', '.join(sorted(unknown))} for --warn-only",
                                hint=f"kinds: {', '.join(VALIDATE_KINDS)}")
    options = _discovery(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, lldp, node_name_map, ibstat)
    _check_live_options(live, options, ibqueryerrors, via, ssh_config, ca, ca_port, run_with, raw_dir, watch_s, count)
    m = open_manifest(manifest)
    if live:
        judged = _live(m, options, via, ssh_config, ca, ca_port, run_with, raw_dir, counters, tool_timeout, watch_s,
                       count, output)
    else:
        judged = judge(m, options, ibqueryerrors, _note)
    report, found = judged.report, judged.found
    _keep(m, judged, report)
    for f in report.findings:
        if f.kind in warn_only:
            f.severity = "warning"  # e.g. degraded links during a staged bring-up
    _emit(report, fmt, output, list(VALIDATE_KINDS), limit, m)
    if svg is not None:
        # The map finds a device by the GUIDs the fabric reported, not only those in the plan.
        seen: dict[str, list[str]] = {}
        for guid, nn in found.names.items():
            seen.setdefault(nn.device, []).append(guid)
        _picture(svg, m, report, seen)
    _finish(report, False)


def _check_live_options(live: bool, options: DiscoveryOptions, ibqueryerrors: Path | None, *live_only: object) -> None:
    """--live runs the tools itself: no files of theirs alongside; the live options need --live."""
    names = ("--via", "--ssh-config", "--ca", "--ca-port", "--run-with", "--raw-dir", "--watch", "--count")
    if not live:
        given = [n for n, v in zip(names, live_only, strict=True) if v is not None]
        if given:
            raise CablingInputError(f"{', '.join(given)} only go with --live", hint="add --live to run the tools now")
        return
    files = [o for o, v in (("--ibnetdiscover", options.ibnetdiscover), ("--iblinkinfo", options.iblinkinfo),
                            ("--ibqueryerrors", ibqueryerrors), ("--ufm", options.ufm_url),
                            ("--ufm-dir", options.ufm_dir), ("--lldp", options.lldp)) if v]
    if files:
        raise CablingInputError(f"--live runs the tools itself: leave out {', '.join(files)}",
                                hint="validate saved outputs without --live, or run them now with --live alone")
    if live_only[-1] is not None and live_only[-2] is None:
        raise CablingInputError("--count goes with --watch", hint="e.g. --watch 60 --count 10")


def _live(m: Manifest, options: DiscoveryOptions, via: str | None, ssh_config: Path | None, ca: str | None,
          ca_port: int | None, run_with: str | None, raw_dir: Path | None, counters: bool, tool_timeout: float,
          watch_s: float | None, count: int | None, output: Path | None) -> Judged:
    """Run the tools (once, or sweep after sweep) and judge what they printed."""
    import shlex

    from cabling.live import LiveTarget, default_folder
    from cabling.validating import judge_live, watch

    try:
        wrapper = tuple(shlex.split(run_with)) if run_with else ()
    except ValueError as exc:
        raise CablingInputError(f"--run-with {run_with!r}: {exc}") from None
    target = LiveTarget(via, ssh_config, ca, ca_port, wrapper, tool_timeout)
    folder = raw_dir or default_folder(output)
    if watch_s is None:
        return judge_live(m, options, target, folder, counters, _note)[0]
    return watch(m, options, target, folder, counters, watch_s, count, _note)


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
    from cabling.asbuilt import as_built, fabric_json
    from cabling.csvio import export_csv
    from cabling.manifest import dump_manifest
    from cabling.resolve import resolve

    fab, names = _discovery(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, lldp, node_name_map,
                            ibstat).load(_note)
    res = resolve(fab, None, names)
    if as_json:
        _write(json.dumps(fabric_json(fab, res), indent=2) + "\n", output)
        return
    m = as_built(fab, names, res)
    slow = _slow_links(m, "written into the as-built at its tier's rate: a fault to fix (validate against the "
                          "as-built names it), not the plan")
    from cabling.rates import plan_rates

    plan_rates(m)
    _write(export_csv(m) if output and output.suffix.lower() == ".csv" else dump_manifest(m), output)
    for amb in res.ambiguous:
        # Names and descriptions come from the fabric: plain text, never rich markup.
        if amb.kind == "duplicate_name" and amb.node_kind == "switch":
            _note(f"named by GUID: {len(amb.guids)} switches that all call themselves {amb.identity!r} "
                  f"({', '.join('S-' + g for g in amb.guids)}): give each its own node description, or "
                  "rename them in the manifest")
            continue
        what = "GUID 0x" + amb.identity if amb.kind == "duplicate_guid" else amb.identity
        _note(f"left out {len(amb.links)} link(s) of {what}: {amb.kind.replace('_', ' ')} "
              f"({'; '.join(amb.descriptions)}); fix it and import again")
    err.print(f"as-built: {len(m.devices)} devices, {len(m.links)} links"
              + (f"; {slow} link(s) below their tier's rate (warnings above)" if slow else ""))


def _slow_links(manifest: Manifest, then: str) -> int:
    """Warn about every link below the rate most links of its tier run at; how many there are."""
    from cabling.rates import slow_links

    slow = slow_links(manifest)
    for s in slow:
        _note(f"warning: link {s.link} trained at {s.describe()}: {then}")
    return len(slow)


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
    from cabling.discovery.nodemap import format_node_name_map
    from cabling.naming import infer_switch_names
    from cabling.sources import open_manifest

    m = open_manifest(manifest)
    fab, names = _discovery(ibnetdiscover, iblinkinfo, ufm, ufm_dir, ufm_user, ufm_insecure, None, node_name_map,
                            ibstat).load(_note)
    result = infer_switch_names(fab, m, names)
    from cabling.asbuilt import as_built

    _slow_links(as_built(fab, names), "a fault to fix before the fabric is adopted")
    _write(format_node_name_map(result.names, "node-name-map written by 'provision cabling name-switches'"),
           output)
    for guid, why in sorted(result.ambiguous.items()):
        _note(f"ambiguous 0x{guid} ({result.current.get(guid, '?')}): {why}")
    for guid, why in sorted(result.unmatched.items()):
        _note(f"unmatched 0x{guid} ({result.current.get(guid, '?')}): {why}")
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
    from cabling.csvio import export_csv
    from cabling.manifest import dump_manifest
    from cabling.ndt import export_ndt
    from cabling.sources import open_manifest

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
    from cabling.diff import manifest_as_found
    from cabling.diff import validate as run_validate
    from cabling.sources import open_manifest

    before, after = open_manifest([old]), open_manifest([new])
    # Each side is checked as a plan, so an error names the file it is in (OLD or NEW).
    from cabling.diff import check_plan

    check_plan(before)
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
    from cabling.slurm import slurm_topology
    from cabling.sources import open_manifest

    _write(slurm_topology(open_manifest(manifest)), output)


@cabling_app.command()
@_errors
def schema(output: Path | None = OutputOpt) -> None:
    """Print the JSON schema of the manifest format."""
    from cabling.manifest import schema_text

    _write(schema_text(), output)


@cabling_app.command()
@_errors
def draw(
    manifest: list[Path] = ManifestArg,
    output: Path = typer.Option(..., "--output", "-o", help=".html (interactive map) or .svg"),
) -> None:
    """Draw the fabric by tier (lint findings highlighted)."""
    from cabling.rules import lint
    from cabling.sources import open_manifest

    m = open_manifest(manifest)
    _picture(output, m, lint(m))


@cabling_app.command()
@_errors
def simulate(
    manifest: list[Path] = ManifestArg,
    output: Path = typer.Option(..., "--output", "-o", help="ibnetdiscover text to write"),
    faults: int = typer.Option(0, "--faults-per-kind", help="inject this many faults of every kind"),
    seed: int = typer.Option(7, "--seed", help="random seed: the same seed gives the same faults"),
    down_output: Path | None = typer.Option(None, "--iblinkinfo-output",
                                            help="write the ports that are down as iblinkinfo here"),
) -> None:
    """Write the ibnetdiscover output the planned fabric would give (to rehearse validate, or for UFM's simulator)."""
    from cabling.simulate import (
        build_clean,
        inject_faults,
        render_iblinkinfo_down,
        render_ibnetdiscover,
    )
    from cabling.sources import open_manifest

    m = open_manifest(manifest)
    try:
        sim = inject_faults(m, faults, seed) if faults else build_clean(m)
    except ValueError as exc:
        raise CablingInputError(f"cannot inject {faults} faults of each kind: {exc}") from None
    _write_file(output, render_ibnetdiscover(m, sim))
    if down_output is not None:
        _write_file(down_output, render_iblinkinfo_down(m, sim))
    _note(f"wrote {output}: {len(sim.links)} links, {len(sim.faults)} injected fault(s)")
