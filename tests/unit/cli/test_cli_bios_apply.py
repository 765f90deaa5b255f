"""`bios apply` asks only about the hosts it would reset: a host in use is refused without a
prompt first (#36 item 8)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from provisioner.cli import baseline_cmds
from provisioner.cli.main import app
from provisioner.state import NodeState, StateStore

pytestmark = pytest.mark.usefixtures("state_dir")
runner = CliRunner()


@pytest.fixture
def in_use(monkeypatch: pytest.MonkeyPatch) -> str:
    """gpu-r01-u03 of the example site is validated (in use); the CLI runs on a terminal."""
    store = StateStore.for_site("example")
    store.ensure_hosts(["gpu-r01-u03"])
    store.transition("gpu-r01-u03", NodeState.VALIDATED, reason="test: in use", force=True)
    store.close()
    monkeypatch.setattr(baseline_cmds, "is_tty", lambda: True)
    return "gpu-r01-u03"


def test_a_host_in_use_is_refused_without_asking_first(in_use: str) -> None:
    res = runner.invoke(app, ["bios", "apply", in_use, "--site", "example", "--json"],
                        input="y\n")
    assert "reset 1 host" not in res.output
    assert res.exit_code == 3, res.output
    (one,) = json.loads(res.stdout)
    assert one["reason"] == "serving" and "provision maintenance gpu-r01-u03" in one["error"]


def test_the_prompt_names_only_the_hosts_it_would_reset(in_use: str) -> None:
    res = runner.invoke(app, ["bios", "apply", in_use, "gpu-r01-u05", "--site", "example"],
                        input="n\n")
    assert res.exit_code == 0, res.output
    assert ("reset 1 host(s) to apply BIOS settings: gpu-r01-u05 (1 in use left alone)?"
            in res.output)
    assert "nothing done" in res.stdout
