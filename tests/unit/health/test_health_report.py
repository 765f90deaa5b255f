"""Verdicts and golden streaks, remedies, node_exporter textfile, JUnit, work orders, sections."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from provisioner.exceptions import InventoryError
from provisioner.health.checks.base import result
from provisioner.health.collector import BEGIN, END, collector_script, parse_sections
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.junit import render_junit, write_atomic
from provisioner.health.model import (
    HostReport,
    RemedyKind,
    Status,
    Verdict,
    judge,
)
from provisioner.health.textfile import install_command, render_textfile
from provisioner.health.ticket import render_text, work_order


def res(cid, status, kind=RemedyKind.NONE, part=None):
    return result(cid, status, f"{cid} {status.value}", remedy=kind, part=part, evidence=["line one"])


def report(*results):
    return HostReport(host='gpu"01', run_id="r1", started_at="2026-11-22T11:00:00+00:00",
                      duration_s=1.5, results=list(results))


def test_golden_after_n_clean_runs_and_reset_on_warning():
    clean = report(res("a", Status.PASS), res("b", Status.NOT_APPLICABLE))
    assert judge(clean, 3, 0).verdict is Verdict.HEALTHY
    j = judge(clean, 3, 2)
    assert j.verdict is Verdict.GOLDEN and j.clean_streak == 3
    warn = judge(report(res("a", Status.WARN)), 3, 5)
    assert warn.verdict is Verdict.HEALTHY and warn.clean_streak == 0


def test_worst_remedy_wins():
    rep = judge(report(res("a", Status.FAIL, RemedyKind.RESET_GPU),
                       res("b", Status.FAIL, RemedyKind.REPAIR, "GPU at PCI 0000:18:00.0 serial 1"),
                       res("c", Status.WARN, RemedyKind.REIMAGE)), 3, 9)
    assert rep.verdict is Verdict.NEEDS_ATTENTION and rep.clean_streak == 0
    assert rep.remedy.kind is RemedyKind.REPAIR and rep.remedy.part.endswith("serial 1")
    err = judge(report(res("a", Status.ERROR)), 3, 0)
    assert err.verdict is Verdict.NEEDS_ATTENTION and err.remedy.kind is RemedyKind.NONE


def test_textfile_escapes_labels_and_counts_every_check():
    rep = judge(report(res("a", Status.PASS), res("b", Status.FAIL, RemedyKind.REBOOT)), 3, 0)
    text = render_textfile(rep, 1700000000.0)
    assert 'node_health_check{check="a",host="gpu\\"01",status="pass"} 1' in text
    assert 'node_health_check{check="b",host="gpu\\"01",status="fail"} 0' in text
    assert 'node_health_check_severity{check="b",host="gpu\\"01"} 2' in text
    assert 'verdict="needs-attention",remedy="reboot"} 1' in text
    assert 'node_health_last_run_timestamp_seconds{host="gpu\\"01"} 1700000000.000' in text


def test_install_command_writes_atomically(tmp_path):
    d = tmp_path / "text file dir"
    cmd = install_command(str(d))
    subprocess.run(["bash", "-c", cmd], input="metric 1\n", text=True, check=True)
    assert (d / "provisioner_health.prom").read_text() == "metric 1\n"
    assert [p.name for p in d.iterdir()] == ["provisioner_health.prom"]


def test_junit(tmp_path):
    rep = judge(report(res("a", Status.PASS), res("b", Status.FAIL, RemedyKind.REBOOT),
                       res("c", Status.ERROR), res("d", Status.NOT_APPLICABLE)), 3, 0)
    path = tmp_path / "out" / "health.xml"
    write_atomic(path, render_junit([rep]))
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "4", "1", "1", "1")
    failure = suite.find("testcase[@name='b']/failure")
    assert failure is not None and failure.get("type") == "reboot"


def test_work_order_lists_worst_first():
    rep = judge(report(res("a", Status.FAIL, RemedyKind.RESET_GPU),
                       res("b", Status.FAIL, RemedyKind.REPAIR, "HCA mlx5_3 port GUID 0x1")), 3, 0)
    wo = work_order(rep, site="s", location="rack r1 U3", host_serial="SN123", bmc="10.0.0.3",
                    incidents_30d=4)
    assert [i.check for i in wo.items] == ["b", "a"] and wo.remedy is RemedyKind.REPAIR
    text = render_text(wo)
    assert "Host serial:  SN123" in text and "1. [repair] HCA mlx5_3 port GUID 0x1" in text
    assert "4 in the last 30 days  (repeat offender" in text
    assert "     line one" in text
    empty = work_order(judge(report(res("a", Status.PASS)), 3, 0), site="s", location="x")
    assert "nothing to repair" in render_text(empty)


def test_sections_round_trip_through_bash():
    script = collector_script(Expectations(settings=HealthSettings(counter_interval_s=0)))
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    out = (f"junk\n{BEGIN} a\nline1\nline2\n\n{END} a rc=0\n{BEGIN} b\n\n{END} b rc=127\n"
           f"{BEGIN} cut\npartial\n")
    secs = parse_sections(out)
    assert secs["a"].text == "line1\nline2" and secs["a"].ok
    assert secs["b"].missing and "cut" not in secs


def test_deep_and_gpu_sections_only_when_asked():
    exp = Expectations(gpus=8, settings=HealthSettings(docker_gpu_image="cuda:12"))
    assert "dcgmi diag" not in collector_script(exp)
    deep = collector_script(exp, deep=True)
    assert "dcgmi diag -r 2 -j" in deep and "sec lspci_loaded pci" in deep
    assert "docker run --rm --gpus all cuda:12" in deep and "sec dcgm " in deep
    assert "dcgmi" not in collector_script(Expectations(), deep=True)


def test_bad_health_settings_name_the_key():
    with pytest.raises(InventoryError, match=r"settings\.health\.parallel"):
        HealthSettings.from_site_block({"parallel": 0}, file="site.yml")
    with pytest.raises(InventoryError, match=r"settings\.health\.colour"):
        HealthSettings.from_site_block({"colour": "red"})
    with pytest.raises(InventoryError, match="ProxyJump=bastion"):
        HealthSettings.from_site_block({"ssh_options": ["-J bastion"]})


def test_ssh_client_missing_is_not_ready(monkeypatch):
    import provisioner.health.ssh_client as ssh_mod
    from provisioner.exceptions import ExitCode
    from provisioner.health.errors import SshUnavailable

    monkeypatch.setattr(ssh_mod.shutil, "which", lambda name: None)
    with pytest.raises(SshUnavailable, match="openssh-client") as exc:
        ssh_mod.SshClient()
    assert exc.value.exit_code is ExitCode.NOT_READY


def test_ssh_argv_is_non_interactive(tmp_path):
    from provisioner.health.ssh_client import SshClient, SshTarget

    argv = SshClient(connect_timeout_s=7, options=["ProxyJump=bastion"]).argv(
        SshTarget("h", "10.0.0.5", "provision", 2222, tmp_path / "key", tmp_path / "kh"), "bash -s")
    text = " ".join(argv)
    for opt in ("BatchMode=yes", "ConnectTimeout=7", "StrictHostKeyChecking=accept-new",
                f"UserKnownHostsFile={tmp_path / 'kh'}", "-p 2222", f"-i {tmp_path / 'key'}",
                "-o ProxyJump=bastion"):
        assert opt in text
    assert argv[-2:] == ["provision@10.0.0.5", "bash -s"]


def _kex(argv: list[str]) -> list[str]:
    """The key exchanges the real ssh client would offer with ``argv`` (ssh -G connects nowhere)."""
    import subprocess

    res = subprocess.run([argv[0], "-G", *argv[1:-1]], capture_output=True, text=True, check=True,
                         timeout=30)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("kexalgorithms "))
    return line.split()[1].split(",")


def test_health_sessions_skip_the_costly_sntrup_key_exchange_unless_the_site_names_one(tmp_path):
    from provisioner.health.ssh_client import SshClient, SshTarget

    target = SshTarget("h", "10.0.0.5", "provision", 22, None, tmp_path / "kh")
    offered = _kex(SshClient().argv(target, "bash -s"))
    assert not any(k.startswith("sntrup761") for k in offered)
    assert offered[0] in ("mlkem768x25519-sha256", "curve25519-sha256")
    chosen = SshClient(options=["KexAlgorithms=sntrup761x25519-sha512@openssh.com"]).argv(
        target, "bash -s")
    assert _kex(chosen) == ["sntrup761x25519-sha512@openssh.com"]


def test_ticket_before_any_health_run(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from provisioner.cli.main import app
    from provisioner.exceptions import ExitCode

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    site = str(Path(__file__).resolve().parents[2] / "fixtures" / "health" / "site-48")
    res = CliRunner().invoke(app, ["ticket", "--site", site, "gpu-r1-u03"])
    assert res.exit_code == ExitCode.NOT_READY and "provision health" in res.output
