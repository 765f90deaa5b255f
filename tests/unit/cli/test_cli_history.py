"""`provision history` at 80 columns: state changes in their own column, a facts update as one
line, --kind and --since to narrow it (#36 item 9)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.cli.state_cmds import parse_since
from provisioner.exceptions import ExitCode, InputError
from provisioner.state import NodeState, StateStore
from provisioner.state import store as store_module

pytestmark = pytest.mark.usefixtures("state_dir")
runner = CliRunner()
HOST = "gpu-r01-u03"
FACTS = {f"fact_{i:02d}_with_a_long_name": i for i in range(15)}
NOW = datetime.now(UTC)


@pytest.fixture(autouse=True)
def columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture
def lived(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host with a day of history: 12 discoveries (15 facts each) around its state changes,
    the last three hours ago and the rest a day ago."""
    clock = SimpleNamespace(time=lambda: (NOW - timedelta(days=1)).timestamp())
    monkeypatch.setattr(store_module, "time", clock)
    store = StateStore.for_site("example")
    store.ensure_hosts([HOST])
    for i in range(12):
        store.record_facts(HOST, {**FACTS, "round": i})
    for state in (NodeState.DISCOVERED, NodeState.DEPLOYING):
        store.transition(HOST, state, reason=f"test: {state.value}")
    clock.time = lambda: (NOW - timedelta(hours=3)).timestamp()
    store.transition(HOST, NodeState.FAILED, reason="deploy failed",
                     error="no disk matches root_disk serial S9", force=True)
    store.close()


def _lines(*extra: str) -> list[str]:
    res = runner.invoke(app, ["history", "--site", "example", HOST, *extra])
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def test_history_fits_80_columns_with_a_line_per_facts_update(lived: None) -> None:
    lines = _lines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert "…" not in "\n".join(lines)
    facts_rows = [line for line in lines if "facts updated: 16 facts" in line]
    assert len(facts_rows) == 12
    assert not any("fact_00" in line for line in lines)  # the names: --wide and --json
    # 15 events: title, header rows and borders aside, one line each (but the error's)
    assert len(lines) <= 15 + 8, "\n".join(lines)
    assert any("deploying -> failed" in line for line in lines)


def test_wide_and_json_keep_the_fact_names(lived: None) -> None:
    assert any("fact_00_with_a_long_name" in line for line in _lines("--wide"))
    res = runner.invoke(app, ["history", "--site", "example", HOST, "--json"])
    assert "fact_14_with_a_long_name" in json.loads(res.stdout)[2]["message"]


def test_kind_keeps_only_the_state_changes(lived: None) -> None:
    res = runner.invoke(app, ["history", "--site", "example", HOST, "--kind", "transition",
                              "--json"])
    events = json.loads(res.stdout)
    assert [e["to"] for e in events] == ["discovered", "deploying", "failed"]


def test_since_an_age_or_a_date(lived: None) -> None:
    res = runner.invoke(app, ["history", "--site", "example", HOST, "--since", "4h", "--json"])
    assert [e["to"] for e in json.loads(res.stdout)] == ["failed"]
    day = (NOW - timedelta(days=2)).strftime("%Y-%m-%d")
    res = runner.invoke(app, ["history", "--site", "example", HOST, "--since", day, "--json",
                              "--limit", "2"])
    assert [e["to"] for e in json.loads(res.stdout)] == ["deploying", "failed"]


def test_since_that_is_neither_an_age_nor_a_date_is_bad_input(lived: None) -> None:
    res = runner.invoke(app, ["history", "--site", "example", HOST, "--since", "yesterday"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "--since 'yesterday'" in res.output and "30m" in res.output


def test_parse_since() -> None:
    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert parse_since("30m", now) == now - timedelta(minutes=30)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-11-27T10:00", now) == datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    with pytest.raises(InputError):
        parse_since("-3h", now)
