"""A table of findings for a terminal, with a one-line summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cabling.findings import Finding, Report
from cabling.safetext import printable

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def summary(report: Report) -> str:
    """``3 errors, 1 warning: 2 missing, 1 swapped ...`` or ``clean``."""
    if not report.findings:
        return f"{report.title}: clean ({_stats(report)})"
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(report.by_kind().items()))
    return f"{report.title}: {report.errors} error(s), {report.warnings} warning(s): {kinds} ({_stats(report)})"


def _stats(report: Report) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report.stats.items())


def render_text(report: Report, console: Console, limit: int | None = None) -> None:
    """Print the findings (a table on a terminal, one line each in a CI log) and the summary."""
    shown = report.findings if limit is None else report.findings[:limit]
    if report.findings and not console.is_terminal:
        for f, depth in zip(shown, _depths(shown), strict=True):
            # Names come from input files: escaped, a name cannot forge a finding line or colour the log.
            where = f" {printable(f.where)}:" if f.where else ""
            # What a root cause explains is indented under it.
            pad = "    " * depth
            console.print(f"{pad}{f.severity} {f.kind}{where} {printable(f.message)}"
                          + (f"\n{pad}    fix: {printable(f.fix)}" if f.fix else ""), markup=False)
    elif report.findings:
        # here: the summary line alone must not load rich
        from rich.table import Table
        from rich.text import Text

        table = Table(show_lines=False, expand=False)
        table.add_column("severity")
        table.add_column("kind")
        table.add_column("problem", overflow="fold")
        table.add_column("fix", overflow="fold")
        table.add_column("where", overflow="fold")
        for f, depth in zip(shown, _depths(shown), strict=True):
            # Device and port names come from input files: cells are text, never markup.
            kind = "  " * max(depth - 1, 0) + ("\u2514 " if depth else "") + f.kind
            table.add_row(Text(f.severity, style=_STYLE[f.severity]), kind, Text(printable(f.message)),
                          Text(printable(f.fix)), Text(printable(f.where)))
        console.print(table)
    if limit is not None and len(report.findings) > limit:
        console.print(f"... {len(report.findings) - limit} more (use --limit 0 or --format json for all)")
    console.print(summary(report), highlight=False, markup=False)


def _depths(findings: list[Finding]) -> list[int]:
    """How many root causes each finding sits under (a cable under a switch under a rail: 2)."""
    roots = {g.data["root"]: g for g in findings if g.data.get("root")}
    out = []
    for f in findings:
        depth, cause = 0, f.data.get("cause")
        while cause and depth < 3:
            depth += 1
            parent = roots.get(cause)
            cause = parent.data.get("cause") if parent is not None else None
        out.append(depth)
    return out
