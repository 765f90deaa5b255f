"""The CLI's consoles measure $COLUMNS when they print, not when the CLI was imported."""

from __future__ import annotations

import io

import pytest

from provisioner.cli.consoles import TerminalConsole


def test_width_follows_columns_set_after_the_console_was_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    console = TerminalConsole(file=io.StringIO())
    assert console.width == 200
    monkeypatch.setenv("COLUMNS", "80")
    assert console.width == 80
    console.print("x" * 120)
    assert [len(line) for line in console.file.getvalue().splitlines()] == [80, 40]


def test_max_width_caps_a_wide_terminal_but_not_a_narrow_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    console = TerminalConsole(file=io.StringIO(), max_width=80)
    assert console.width == 80
    monkeypatch.setenv("COLUMNS", "60")
    assert console.width == 60


def test_an_explicit_width_still_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    console = TerminalConsole(file=io.StringIO(), width=100)
    monkeypatch.setenv("COLUMNS", "80")
    assert console.width == 100


def test_a_wide_table_widens_the_console_for_itself_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.cli.tables import Col, fit_table, print_table

    monkeypatch.setenv("COLUMNS", "80")
    console = TerminalConsole(file=io.StringIO())
    table = fit_table("t", (Col("host"), Col("note")), [["h1", "n" * 150]], width=80, wide=True)
    print_table(console, table, wide=True)
    assert max(len(line) for line in console.file.getvalue().splitlines()) > 150
    monkeypatch.setenv("COLUMNS", "60")
    assert console.width == 60
