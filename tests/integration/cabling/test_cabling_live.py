"""``validate --live``: the tools run by validate itself, here and through an SSH hop, with error
counters judged against the fabric's median and ``--watch`` reporting what changed.

Peers: ibsim 0.10 + OpenSM 3.3 + infiniband-diags 44 (Debian 12) for the fabric; validate runs
ibnetdiscover, iblinkinfo and ibqueryerrors through ``--run-with 'env IBSIM_SOCKNAME=... ibsim-run'``
(the simulator's HCA is ``ibsim0``). The SSH hop is a real OpenSSH sshd on loopback with its own
host key, config and port (provisioner.testing.sshfleet), never the machine's.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cabling.cli import cabling_app
from cabling.ibsim.netfile import BuiltFabric
from cabling.manifest import dump_manifest, load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from provisioner.testing.sshfleet import Recordings, SshFleet
from tests.integration.cabling.ibsim_case import kinds, need_stack, runner, start
from tests.support.waiting import HANG_S, wait_until


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Path:
    need_stack()
    path = tmp_path_factory.mktemp("plan") / "plan.yaml"
    path.write_text(dump_manifest(plan_fat_tree(PlanSpec(hosts=16, hcas=8, speed="HDR"))))
    return path


def _faulty(plan: Path) -> BuiltFabric:
    built = BuiltFabric(load_manifest(plan))
    built.rate("gpu004:mlx5_3", width="1x")
    return built


def _inject(sim) -> None:
    """A dirty cable, a flapping link, an HCA port counting receive errors, a leaf powered off."""
    sim.set_counter("r005-l2", 5, "SymbolErrorCounter", 5000)
    sim.set_counter("r005-l2", 6, "LinkDownedCounter", 7)
    sim.set_counter("gpu003/mlx5_1", 1, "PortRcvErrors", 12)
    sim.set_counter("r005-l3", 3, "SymbolErrorCounter", 3)  # below the floor: not named
    sim.unlink("r005-l8")


def _check_live_report(report: dict) -> None:
    assert kinds(report) == {"device_down": 1, "missing": 16, "down": 32, "degraded_width": 1,
                             "flapping": 1, "link_errors": 2}
    by = {f["kind"]: f for f in report["findings"]}
    assert "7 times the link went down at r005-l2 port 6" in by["flapping"]["message"]
    assert "gpu006 mlx5_1 (cable C00022)" in by["flapping"]["message"]
    errors = sorted(f["message"] for f in report["findings"] if f["kind"] == "link_errors")
    assert "5000 symbol errors at r005-l2 port 5 (fabric median 0, named above 10)" in errors[1]
    assert "12 receive errors at gpu003 mlx5_1" in errors[0]
    assert not any("r005-l3" in f["message"] for f in report["findings"])


def test_live_runs_the_tools_keeps_their_output_and_names_counters(plan, tmp_path):
    report_path = tmp_path / "report.json"
    with start(_faulty(plan), tmp_path / "sim") as sim:
        _inject(sim)
        result = runner.invoke(cabling_app, [
            "validate", "-m", str(plan), "--live", "--run-with", shlex.join(sim.wrapper()), "--ca", "ibsim0",
            "-f", "json", "-o", str(report_path)])
    assert result.exit_code == 3, result.output
    report = json.loads(report_path.read_text())
    _check_live_report(report)
    raw = tmp_path / "report.live"
    run = json.loads((raw / "run.json").read_text())
    assert [c["tool"] for c in run["commands"]] == ["ibnetdiscover", "iblinkinfo", "ibqueryerrors"]
    assert run["commands"][2]["exit_code"] == 1  # ibqueryerrors: ports with errors found
    assert all(c["argv"][-2:] == ["-C", "ibsim0"] for c in run["commands"])
    # The kept outputs are the audit trail: validating them again gives the same report.
    again = tmp_path / "again.json"
    result = runner.invoke(cabling_app, [
        "validate", "-m", str(plan), "--ibnetdiscover", str(raw / "ibnetdiscover.txt"),
        "--iblinkinfo", str(raw / "iblinkinfo.txt"), "--ibqueryerrors", str(raw / "ibqueryerrors.txt"),
        "-f", "json", "-o", str(again)])
    assert result.exit_code == 3
    assert json.loads(again.read_text())["findings"] == report["findings"]


def test_live_through_an_ssh_hop_to_a_fabric_attached_host(plan, tmp_path):
    with SshFleet(tmp_path / "ssh", 1, Recordings()) as fleet, start(_faulty(plan), tmp_path / "sim") as sim:
        _inject(sim)
        known = tmp_path / "known_hosts"
        known.write_text(f"[{fleet.addresses[0]}]:{fleet.port} {(fleet.dir / 'host_key.pub').read_text()}")
        config = tmp_path / "ssh_config"
        config.write_text(f"Host fabric-head\n  HostName {fleet.addresses[0]}\n  Port {fleet.port}\n  User root\n"
                          f"  IdentityFile {fleet.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
                          "  StrictHostKeyChecking yes\n")
        result = runner.invoke(cabling_app, [
            "validate", "-m", str(plan), "--live", "--via", "fabric-head", "--ssh-config", str(config),
            "--run-with", shlex.join(sim.wrapper()), "--ca", "ibsim0", "--raw-dir", str(tmp_path / "raw"),
            "-f", "json", "-o", str(tmp_path / "r.json")])
        assert result.exit_code == 3, result.output
    _check_live_report(json.loads((tmp_path / "r.json").read_text()))
    run = json.loads((tmp_path / "raw" / "run.json").read_text())
    assert run["via"] == "fabric-head" and run["where"] == "on fabric-head"
    assert run["commands"][0]["argv"][:2] == ["ssh", "-o"] and "fabric-head" in run["commands"][0]["argv"]


def test_live_refuses_what_it_cannot_do(plan, tmp_path):
    r = runner.invoke(cabling_app, ["validate", "-m", str(plan), "--live", "--ibnetdiscover", str(plan)])
    assert r.exit_code == 2 and "--live runs the tools itself: leave out --ibnetdiscover" in r.output
    r = runner.invoke(cabling_app, ["validate", "-m", str(plan), "--via", "h1", "--iblinkinfo", str(plan)])
    assert r.exit_code == 2 and "--via only go with --live" in r.output
    r = runner.invoke(cabling_app, ["validate", "-m", str(plan), "--live", "--via", "-oProxyCommand=x"])
    assert r.exit_code == 2 and "is not an SSH destination" in r.output
    # The tools are not installed where they run: their failure, named, exit 2 (never a traceback).
    r = runner.invoke(cabling_app, ["validate", "-m", str(plan), "--live", "--run-with", "env PATH=/nonexistent",
                                    "--raw-dir", str(tmp_path / "raw")])
    assert r.exit_code == 2 and "ibnetdiscover failed on this host (exit 127)" in r.output, r.output
    # An SSH hop that fails (here: a Host whose connection closes at once, as one ssh cannot reach does):
    # ssh's exit 255, named, with what --via takes (an SSH destination, not a site host name).
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu042\n  ProxyCommand false\n")
    r = runner.invoke(cabling_app, ["validate", "-m", str(plan), "--live", "--via", "gpu042", "--ssh-config",
                                    str(config), "--raw-dir", str(tmp_path / "raw2")])
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "ibnetdiscover failed on gpu042 (exit 255)" in text, r.output
    assert "--via takes what ssh takes" in text and "provision inventory show --site SITE" in text, r.output


def test_watch_reports_what_changed_between_sweeps(plan, tmp_path):
    raw = tmp_path / "raw"
    with start(BuiltFabric(load_manifest(plan)), tmp_path / "sim") as sim:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cabling", "validate", "-m", str(plan), "--live", "--run-with",
             shlex.join(sim.wrapper()), "--ca", "ibsim0", "--raw-dir", str(raw), "--watch", "3600", "--count", "2",
             "-f", "json", "-o", str(tmp_path / "r.json")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])
        try:
            wait_until(lambda: (raw / "sweep-001" / "run.json").exists() or proc.poll() is not None,
                       "the first sweep's outputs")
            assert proc.poll() is None, proc.communicate()
            # Between the sweeps: a link bounces (back in Init, its LinkDownedCounter +1) and a
            # cable starts counting symbol errors.
            sim.unlink("r005-l1", 7)
            sim.relink("r005-l1", 7)
            sim.set_counter("r005-l1", 7, "LinkDownedCounter", 1)
            sim.set_counter("r005-l2", 9, "SymbolErrorCounter", 40)
            os.kill(proc.pid, signal.SIGUSR1)  # sweep now instead of in an hour
            _out, err = proc.communicate(timeout=HANG_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 3, err
    assert "sweep 1: 0 error(s), 0 change(s)" in err
    changed = [line for line in err.splitlines() if "went from active to initialize" in line]
    assert len(changed) == 1 and "gpu007:mlx5_0" in changed[0] and "r005-l1:7" in changed[0], err
    assert "r005-l1:7: LinkDownedCounter +1 (now 1)" in err and "r005-l2:9: SymbolErrorCounter +40 (now 40)" in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["stats"]["sweeps"] == 2
    # The Init link is down now; it bounced (LinkDownedCounter +1); the dirty cable counts 40 symbol
    # errors, all of them during the watch (one finding saying both).
    assert kinds(report) == {"down": 1, "flapping": 1, "link_errors": 1, "changed": 1}, report["findings"]
    dirty = next(f for f in report["findings"] if f["kind"] == "link_errors")
    assert "40 symbol errors at r005-l2 port 9" in dirty["message"] and "+40 during the watch" in dirty["message"]
    assert (raw / "sweep-002" / "ibqueryerrors.txt").exists()
