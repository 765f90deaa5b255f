"""Tables that fit the terminal: columns are dropped by priority, never cut to "lab-h…".

Each column says how important it is and whether it may wrap. Identifiers (host names, MACs,
addresses) never wrap or shrink; prose (reasons, errors) wraps. When the columns do not fit,
the least important ones are left out and the caption names them; `--wide` shows every column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import typer
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from provisioner.cli.consoles import TerminalConsole

WRAP_MIN = 12  # narrowest a prose column gets before a column is dropped instead
WideOptionHelp = "Show every column, however wide (default: fit the terminal, 80 when piped)."
WideOption = typer.Option(False, "--wide", help=WideOptionHelp)


@dataclass(frozen=True)
class Col:
    """A column: its header, importance (0 = always shown, higher = dropped first), wrapping."""

    header: str
    priority: int = 0
    wrap: bool = False
    justify: str = "left"


def _cell_width(cell: str) -> int:
    return max((Text.from_markup(line, emoji=False).cell_len for line in cell.split("\n")), default=0)


def _natural(col: Col, rows: Sequence[Sequence[str]], i: int) -> int:
    return max([len(col.header), *(_cell_width(r[i]) for r in rows)])


def _needed(cols: Sequence[Col], rows: Sequence[Sequence[str]], keep: Sequence[int]) -> int:
    """Width the kept columns need at least: identifiers whole, prose down to WRAP_MIN."""
    total = 1 + 3 * len(keep)  # the outer border, then padding and a rule per column
    for i in keep:
        nat = _natural(cols[i], rows, i)
        total += min(nat, max(WRAP_MIN, len(cols[i].header))) if cols[i].wrap else nat
    return total


def fit_table(
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    width: int,
    wide: bool = False,
) -> Table:
    """A table of ``rows`` within ``width`` columns (all columns when ``wide``)."""
    keep = list(range(len(cols)))
    dropped: list[str] = []
    if not wide:
        # drop the least important (rightmost first on ties) until the rest fits
        order = sorted(keep, key=lambda i: (cols[i].priority, i))
        while _needed(cols, rows, keep) > width and order and cols[order[-1]].priority > 0:
            gone = order.pop()
            keep.remove(gone)
            dropped.append(cols[gone].header)
    caption = None
    if dropped:
        caption = f"not shown: {', '.join(reversed(dropped))} (--wide shows them)"
    table = Table(title=title, caption=caption, expand=False)
    for i in keep:
        col = cols[i]
        nat = _natural(col, rows, i)
        if col.wrap:
            table.add_column(col.header, overflow="fold", ratio=1, justify=col.justify)  # type: ignore[arg-type]
        else:
            table.add_column(col.header, no_wrap=True, min_width=nat, justify=col.justify)  # type: ignore[arg-type]
    for row in rows:
        # parsed here with emoji off: a MAC like 52:54:00:ab:cd:ef must not show a 🆎
        table.add_row(*(Text.from_markup(row[i], emoji=False) for i in keep))
    return table


def print_table(console: TerminalConsole, table: Table, *, wide: bool = False) -> None:
    """Print a fitted table; with ``wide`` at its full width even past the terminal's."""
    if wide:
        options = console.options.update(width=10_000)
        need = Measurement.get(console, options, table).maximum
        # a rich console never prints past its own width: widen it for this table only (setting
        # console.width would fix the width for the rest of the process)
        with console.widened(need):
            console.print(table)
    else:
        console.print(table)


def skew_text(skew_s: float | None) -> str:
    """A clock skew as "+3s", "-12s" or "0s" (never "-0s"); "-" when unknown."""
    if skew_s is None:
        return "-"
    whole = round(skew_s)
    return "0s" if whole == 0 else f"{whole:+d}s"


def dash(value: object) -> str:
    """The value as text, or "-" when it is empty or unknown."""
    return "-" if value is None or value == "" else str(value)
