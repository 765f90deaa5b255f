"""Bisect: two rounds of groups name a planted bad host; the CLI runs a real shell command."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode
from provisioner.health.bisect import bisect, parse_groups, plan_rounds, shell_runner
from provisioner.health.errors import HealthInputError

HOSTS = [f"h{i:02d}" for i in range(48)]


def planted(*bad: str):
    def run(hosts):
        return (1, "hang") if set(bad) & set(hosts) else (0, "ok")
    return run


def test_rounds_share_each_pair_at_most_once():
    groups = plan_rounds(HOSTS, 6, 8)
    r1 = [g for g in groups if g.round == 1]
    r2 = [g for g in groups if g.round == 2]
    assert [len(g.hosts) for g in r1] == [8] * 6 and [len(g.hosts) for g in r2] == [6] * 8
    for a, b in itertools.combinations(HOSTS, 2):
        shared = sum(a in g.hosts and b in g.hosts for g in groups)
        assert shared <= 1, (a, b)
    assert sorted(h for g in r1 for h in g.hosts) == sorted(HOSTS)
    assert sorted(h for g in r2 for h in g.hosts) == sorted(HOSTS)


@pytest.mark.parametrize("bad", ["h00", "h17", "h47"])
def test_one_planted_bad_host_is_named(bad):
    res = bisect(HOSTS, 6, 8, planted(bad))
    assert res.suspects == [bad] and not res.ambiguous
    assert sum(o.failed for o in res.outcomes) == 2


def test_two_bad_hosts_are_ambiguous_until_confirmed():
    res = bisect(HOSTS, 6, 8, planted("h03", "h20"), confirm=True)
    assert set(res.suspects) == {"h03", "h20", "h04", "h19"} and res.ambiguous
    assert res.confirmed == {"h03": True, "h20": True, "h04": False, "h19": False}


def test_uneven_host_count_and_bad_groupings():
    res = bisect(HOSTS[:40], 6, 8, planted("h39"))
    assert res.suspects == ["h39"]
    with pytest.raises(HealthInputError, match="do not fit"):
        plan_rounds(HOSTS, 4, 8)
    with pytest.raises(HealthInputError, match="twice"):
        plan_rounds(["a", "a"], 1, 2)
    with pytest.raises(HealthInputError, match="at least two"):
        plan_rounds(["a"], 1, 2)
    with pytest.raises(HealthInputError, match="6,8"):
        parse_groups("6x8")
    with pytest.raises(HealthInputError, match=r"\{hosts\}"):
        shell_runner("true", 5)
    with pytest.raises(HealthInputError, match="every group failed"):
        bisect(HOSTS[:4], 2, 2, lambda hosts: (1, ""), confirm=True)


def test_shell_runner_timeout_counts_as_failure():
    rc, out = shell_runner("sleep 5 # {hosts}", 0.2)(["a"])
    assert rc == 124 and "timed out" in out


SITE = str(Path(__file__).resolve().parents[2] / "fixtures" / "health" / "site-48")


def test_cli_names_the_planted_bad_host(tmp_path, monkeypatch):
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    # The planted fault: any group containing gpu-r2-u17 fails, like a hung all-reduce would.
    cmd = "case ,{hosts}, in *,gpu-r2-u17,*) exit 1;; esac"
    res = CliRunner().invoke(app, ["bisect", "--site", SITE, "gpu-*", "--groups", "6,8",
                                   "--command", cmd, "--json"])
    assert res.exit_code == ExitCode.PARTIAL_FAILURE, res.output
    doc = json.loads(res.stdout)
    assert doc["suspects"] == ["gpu-r2-u17"] and not doc["ambiguous"]
    assert len(doc["groups"]) == 14 and sum(g["rc"] != 0 for g in doc["groups"]) == 2
    res = CliRunner().invoke(app, ["bisect", "--site", SITE, "gpu-*", "--groups", "6,8",
                                   "--command", cmd])
    assert "suspects: gpu-r2-u17" in res.output
    res = CliRunner().invoke(app, ["bisect", "--site", SITE, "gpu-r1-*", "--groups", "4,6",
                                   "--command", "true {hosts}"])
    assert res.exit_code == 0 and "no host is in a failing group" in res.output
