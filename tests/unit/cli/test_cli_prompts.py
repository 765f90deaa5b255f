"""`provision reimage`'s confirmation: declining, no terminal, a locked site, and the summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from provisioner.cli import deploy_cmds
from provisioner.cli.main import app
from provisioner.exceptions import ExitCode
from provisioner.state import StateStore
from provisioner.workflow.rack import HostResult, RackResult
from provisioner.workflow.waves import choose_wave_size

runner = CliRunner()
REIMAGE = ["reimage", "--site", "example", "gpu-r01-u03"]


pytestmark = pytest.mark.usefixtures("state_dir")


def test_without_a_terminal_and_without_yes_it_is_bad_input_with_the_hint() -> None:
    res = runner.invoke(app, REIMAGE)
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "no terminal to ask on; nothing was done" in res.output
    assert "--yes" in res.output
    assert "wiped" not in res.output


def test_declining_is_exit_0_and_nothing_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deploy_cmds, "_can_ask", lambda: True)
    res = runner.invoke(app, REIMAGE, input="n\n")
    assert res.exit_code == 0, res.output
    assert "1 host will have the root disk wiped" in res.output
    assert "nothing done: no host was touched" in res.output
    # end of input is a no as well
    res = runner.invoke(app, REIMAGE, input="")
    assert res.exit_code == 0 and "nothing done" in res.output
    store = StateStore.for_site("example")
    assert all(r.state.value == "enrolled" for r in store.all())  # no host was moved


def test_a_host_in_use_is_refused_before_anything_is_announced() -> None:
    holder = StateStore.for_site("example").hold("provision rack --site example", ["gpu-r01-u03"])
    try:
        res = runner.invoke(app, [*REIMAGE, "--yes"])
    finally:
        holder.release()
    assert res.exit_code == ExitCode.LOCKED, res.output
    assert "the host is in use by another run: gpu-r01-u03: `provision rack --site example`" in (
        res.output)
    assert "wiped" not in res.output.lower()


def test_a_host_in_use_is_left_out_and_the_others_are_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deploy_cmds, "_can_ask", lambda: True)
    holder = StateStore.for_site("example").hold("provision health --site example", ["gpu-r01-u03"])
    try:
        res = runner.invoke(app, [*REIMAGE, "gpu-r01-u05"], input="n\n")
    finally:
        holder.release()
    assert res.exit_code == 0, res.output
    assert "not re-imaging gpu-r01-u03: in use by `provision health --site example`" in res.output
    assert "1 host will have the root disk wiped" in res.output
    assert "gpu-r01-u05  (rack r01 U5" in res.output and "gpu-r01-u03  (rack" not in res.output


def _result(*rows: HostResult) -> RackResult:
    return RackResult(choose_wave_size(len(rows), uplink_gbps=10, host_link_gbps=10), list(rows))


def test_summary_says_the_state_each_host_reached() -> None:
    res = _result(
        HostResult("h1", "ok", "configured", {"install": 61.0}, 1),
        HostResult("h2", "ok", "deployed", {}, 1),
        HostResult("h3", "failed", "no disk with serial X", {}, 2),
        HostResult("h4", "skipped", "already configured"),
    )
    line = deploy_cmds.summary_line(res)
    assert line.startswith("failed: 1 host configured, 1 deployed, 1 failed, 1 skipped (wave: ")
    ok = _result(HostResult("a", "ok", "configured"), HostResult("b", "ok", "configured"))
    assert deploy_cmds.summary_line(ok).startswith("done: 2 hosts configured (wave: ")
    out = Console(width=80, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    out.print(deploy_cmds.summary_table(res))
    text = out.export_text()
    assert "configured" in text and "1m01s" in text and "no disk with serial X" in text
    assert "…" not in text


def test_events_to_stdout_and_json_together_are_refused(tmp_path: Path) -> None:
    res = runner.invoke(app, ["rack", "--site", "example", "--json", "--events", "-"])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "--events - and --json would both write to stdout" in res.output
    res = runner.invoke(app, ["rack", "--site", "example", "--events", str(tmp_path / "no" / "x")])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "cannot write events to" in res.output
