"""The rack runner's own logic: skipping, retries, failure reasons, states, reimage scope.

The backend here is a scripted implementation of the DeployBackend interface (tests/support), so that
the runner's decisions are tested alone and fast; the real backends are tested against real
peers (tests/integration/deploy, tests/integration/deploy/maas, and the lab end-to-end test).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from provisioner.deploy.base import DeployBackend
from provisioner.http_policy import deadline
from provisioner.inventory import Site, load_site
from provisioner.redfish.errors import BMCDeadline
from provisioner.state import NodeState, StateStore
from provisioner.workflow.rack import RackOptions, RackRunner
from provisioner.workflow.waves import choose_wave_size
from tests.support.rack_runs import EXAMPLE, Recorder, ScriptedBackend, pinned_mac_site


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return pinned_mac_site(tmp_path)


def runner(site: Site, tmp_path: Path, backend: DeployBackend, **opts: object) -> RackRunner:
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    options = RackOptions(configure=False, wait_ssh=False, **opts)  # type: ignore[arg-type]
    return RackRunner(site, store, backend, open_bmc=None, reporter=Recorder(), options=options)


def test_deploys_and_records_states(site: Site, tmp_path: Path) -> None:
    backend = ScriptedBackend()
    r = runner(site, tmp_path, backend, max_parallel=4)
    result = r.run(site.select(None, "r01"))
    assert len(result.ok) == 16 and not result.failed
    assert backend.max_concurrent <= 4
    assert sorted(backend.prepared) == sorted(h.name for h in site.select(None, "r01"))
    assert all(r.store.get(h.name).state == NodeState.DEPLOYED for h in site.select(None, "r01"))
    # the other rack was never touched
    assert not set(backend.deployed) & {h.name for h in site.select(None, "r02")}


def test_rerun_skips_done_hosts(site: Site, tmp_path: Path) -> None:
    backend = ScriptedBackend()
    hosts = site.select(["gpu-r01-u0*"])
    runner(site, tmp_path, backend).run(hosts)
    again = ScriptedBackend()
    result = runner(site, tmp_path, again).run(hosts)
    assert again.deployed == []
    assert [r.status for r in result.results] == ["skipped"] * len(hosts)
    assert result.results[0].reason == "already deployed"


def test_retry_then_success_and_failure_with_reason(site: Site, tmp_path: Path) -> None:
    site.settings.__dict__["deploy_retries"] = 1
    backend = ScriptedBackend({"gpu-r01-u03": 1, "gpu-r01-u05": 5})
    r = runner(site, tmp_path, backend)
    result = r.run(site.select(["gpu-r01-u03", "gpu-r01-u05", "gpu-r01-u07"]))
    status = {x.host: (x.status, x.attempts) for x in result.results}
    assert status == {
        "gpu-r01-u03": ("ok", 2),
        "gpu-r01-u05": ("failed", 2),
        "gpu-r01-u07": ("ok", 1),
    }
    rec = r.store.get("gpu-r01-u05")
    assert rec.state == NodeState.FAILED
    assert "no disk matches the root-disk hint" in (rec.last_error or "")
    kinds = [e.kind for e in r.store.events("gpu-r01-u05")]
    assert kinds.count("deploy.attempt_failed") == 2


def test_maintenance_hosts_are_skipped_unless_forced(site: Site, tmp_path: Path) -> None:
    backend = ScriptedBackend()
    r = runner(site, tmp_path, backend)
    r.store.ensure_hosts(["gpu-r01-u03"])
    r.store.transition("gpu-r01-u03", NodeState.MAINTENANCE, reason="RMA")
    result = r.run(site.select(["gpu-r01-u03"]))
    assert result.results[0].status == "skipped" and "RMA" in result.results[0].reason
    forced = runner(site, tmp_path, backend, force=True).run(site.select(["gpu-r01-u03"]))
    assert forced.results[0].status == "ok"


def test_reimage_releases_and_redeploys_only_named(site: Site, tmp_path: Path) -> None:
    runner(site, tmp_path, ScriptedBackend()).run(site.select(["gpu-r01-u0*"]))
    backend = ScriptedBackend()
    result = runner(site, tmp_path, backend, reimage=True).run(site.select(["gpu-r01-u05"]))
    assert backend.released == ["gpu-r01-u05"] and backend.deployed == ["gpu-r01-u05"]
    assert result.results[0].status == "ok"


def test_wave_size_from_uplink() -> None:
    plan = choose_wave_size(400, uplink_gbps=100, host_link_gbps=10, image_bytes=4 * 2**30)
    assert plan.size == 8  # 100 Gb/s x 80% / 10 Gb/s
    assert plan.bound_s == pytest.approx(4 * 2**30 * 8 * 400 / 100e9)
    assert plan.est_makespan_s is not None and plan.est_makespan_s >= plan.bound_s
    assert choose_wave_size(3, uplink_gbps=100, host_link_gbps=10).size == 3
    assert choose_wave_size(50, uplink_gbps=1, host_link_gbps=10).size == 1
    assert choose_wave_size(50, uplink_gbps=100, host_link_gbps=10, explicit=20).size == 20


def test_cli_dry_run_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from provisioner.cli.main import app

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path))
    res = CliRunner().invoke(
        app, ["reimage", "--site", "example", "gpu-r01-u03", "--dry-run", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["deploy"] == ["gpu-r01-u03"] and doc["wave"]["size"] == 1
    # nothing written: not even the state file or a lock
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_cli_reimage_needs_hosts_or_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from provisioner.cli.main import app
    from provisioner.exceptions import ExitCode

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path))
    res = CliRunner().invoke(app, ["reimage", "--site", "example"])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "name the hosts to re-image" in res.output
    # without --yes and without a terminal to answer on, nothing is wiped (see test_cli_prompts)
    res = CliRunner().invoke(app, ["reimage", "--site", "example", "gpu-r01-u03"], input="n\n")
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "nothing was done" in res.output and "--yes" in res.output


def test_reimage_failed_takes_only_hosts_a_reimage_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from provisioner.cli.main import app

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path))
    store = StateStore(tmp_path / "example.sqlite", site="example")
    hosts = ["gpu-r01-u03", "gpu-r01-u05", "gpu-r01-u07"]
    store.ensure_hosts(hosts)
    for name, reason, remedy in (
        ("gpu-r01-u03", "deploy failed", None),
        ("gpu-r01-u05", "health: root filesystem corrupt", "reimage"),
        ("gpu-r01-u07", "health: GPU fell off the bus", "repair"),
    ):
        store.transition(name, NodeState.FAILED, reason=reason, error="x")
        if remedy:
            store.record_facts(name, {"health": {"remedy": {"kind": remedy}}})
    res = CliRunner().invoke(app, ["reimage", "--site", "example", "--failed", "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["deploy"] == ["gpu-r01-u03", "gpu-r01-u05"]
    assert "not re-imaging gpu-r01-u07: its health remedy is repair" in res.stderr


def test_cli_playbook_option_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from provisioner.cli.main import app
    from provisioner.exceptions import ExitCode

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path))
    res = CliRunner().invoke(
        app, ["rack", "--site", "example", "--dry-run", "--playbook", "playbooks/nope.yml"]
    )
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "playbook 'playbooks/nope.yml' not found" in res.output
    res = CliRunner().invoke(
        app, ["rack", "--site", "example", "--dry-run", "-p", "playbooks/base.yml", "-p", "playbooks/monitoring.yml"]
    )
    assert res.exit_code == 0, res.output


def test_run_playbook_runs_several_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from provisioner.workflow import configure

    # a stand-in ansible-playbook that prints its arguments and a recap
    fake = tmp_path / "ansible-playbook"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nprint(*sys.argv[1:], sep='\\n')\n"
        "print('PLAY RECAP')\nprint('h1 : ok=3 changed=1 unreachable=0 failed=0')\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(fake))
    code, recaps, out = configure.run_playbook(
        EXAMPLE, ["h1"], playbook=("playbooks/base.yml", "playbooks/monitoring.yml"), pin_keys=False
    )
    assert code == 0 and recaps["h1"].success
    books = [a for a in out.splitlines() if a.endswith(".yml")]
    assert [Path(b).name for b in books] == ["base.yml", "monitoring.yml"]


def test_gated_streams_allow_more_hosts_in_flight() -> None:
    image = 4 * 2**30
    plan = choose_wave_size(
        400, uplink_gbps=100, host_link_gbps=10, image_bytes=image, streams=10, ceiling=512
    )
    # starts with 8 hosts per stream, may grow to every host (the ceiling is above 400)
    assert (plan.size, plan.streams, plan.ceiling) == (80, 10, 400)
    assert plan.reason == "80 to 400 hosts at once, 10 image streams (uplink 100 Gb/s / 10 Gb/s)"
    assert plan.summary == plan.reason
    ungated = choose_wave_size(400, uplink_gbps=100, host_link_gbps=10)
    assert ungated.summary == "8 at once (100 Gb/s uplink x 80% / 10 Gb/s per host = 8 at once)"
    assert ungated.ceiling is None
    assert plan.est_makespan_s is not None and plan.bound_s is not None
    assert plan.est_makespan_s >= plan.bound_s
    # the ceiling caps the start too; never below the stream count
    capped = choose_wave_size(400, uplink_gbps=400, host_link_gbps=10, streams=32, ceiling=64)
    assert (capped.size, capped.ceiling) == (64, None)
    assert choose_wave_size(400, uplink_gbps=1000, host_link_gbps=10, streams=80, ceiling=64).size == 80
    # a small lab: every host at once, as before
    lab = choose_wave_size(3, uplink_gbps=38, host_link_gbps=10, streams=3)
    assert (lab.size, lab.ceiling) == (3, None)
    assert choose_wave_size(2, uplink_gbps=1, host_link_gbps=10, streams=1).size == 2
    one = choose_wave_size(1, uplink_gbps=25, host_link_gbps=10, streams=2)
    assert one.summary == "1 host at once, 2 image streams (uplink 25 Gb/s / 10 Gb/s)"
    assert choose_wave_size(8, uplink_gbps=10, host_link_gbps=10, streams=1).summary == (
        "8 hosts at once, 1 image stream (uplink 10 Gb/s / 10 Gb/s)")
    # --max-parallel still wins: fixed, not adaptive; the reason names the streams too
    explicit = choose_wave_size(400, uplink_gbps=100, host_link_gbps=10, streams=8, explicit=16)
    assert explicit.size == 16 and explicit.reason == "--max-parallel 16, 8 image streams"
    assert explicit.ceiling is None
    # a stream count set by hand is named as such
    manual = choose_wave_size(400, uplink_gbps=100, host_link_gbps=10, streams=4, ceiling=512)
    assert manual.size == 32 and "settings.embedded.max_image_streams" in manual.reason


def test_embedded_backend_plans_with_its_stream_gate(site: Site, tmp_path: Path) -> None:
    from provisioner.deploy.embedded.backend import EmbeddedBackend
    from provisioner.deploy.embedded.settings import max_image_streams

    streams = max_image_streams(site)
    s = site.settings
    link = s.embedded.host_link_gbps if s.embedded else 10.0
    assert streams == max(1, math.floor(s.uplink_gbps / link))  # the whole uplink
    backend = EmbeddedBackend()
    assert backend.image_streams(site) == streams
    hosts = list(site.hosts)
    plan = runner(site, tmp_path, backend).wave_plan(len(hosts))
    assert plan.streams == streams and plan.size >= min(len(hosts), streams)
    # the ungated test backend keeps the old rule: hosts at once = streams
    assert runner(site, tmp_path, ScriptedBackend()).wave_plan(len(hosts)).streams is None


def test_done_is_said_after_site_yml_and_a_failed_host_names_its_log(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from provisioner import events
    from provisioner.events import ListSink
    from provisioner.workflow import configure, rack

    # a stand-in ansible-playbook: one task, host 1 fine, host 2 failing, then the recap
    fake = tmp_path / "ansible-playbook"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "hosts = sys.argv[sys.argv.index('--limit') + 1].split(',')\n"
        "print('PLAY [all] ***')\nprint('TASK [common : ntp] ***')\n"
        "print(f'changed: [{hosts[0]}]')\nprint(f'fatal: [{hosts[1]}]: FAILED! => ')\n"
        "print('    msg: held package')\nprint()\nprint('PLAY RECAP ***')\n"
        "print(f'{hosts[0]} : ok=1 changed=1 unreachable=0 failed=0')\n"
        "print(f'{hosts[1]} : ok=0 changed=0 unreachable=0 failed=1')\nsys.exit(2)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(fake))
    pinned: list[str] = []
    # no traffic out: each host's key "pinned" as it comes up, before its site.yml wave
    monkeypatch.setattr(rack, "pin_host_key", lambda _k, t: pinned.append(t.host))
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    options = RackOptions(configure=True, wait_ssh=False, log_dir=tmp_path / "logs",
                          configure_gather_s=3600)  # both hosts in one wave: no timer involved
    rec = Recorder()
    run = RackRunner(site, store, ScriptedBackend(), open_bmc=None, reporter=rec, options=options)
    h1, h2 = site.hosts[0].name, site.hosts[1].name
    sink = ListSink()
    with events.sinks(sink):
        result = run.run(site.hosts[:2])
    for host in (h1, h2):
        phases = [p for h, p in rec.phases if h == host]
        assert "done" not in phases[: phases.index("configure")], phases
        assert phases.index("deployed") < phases.index("configure")
    assert [p for h, p in rec.phases if h == h1][-1] == "done"
    assert [p for h, p in rec.phases if h == h2][-1] == "failed"
    by = {r.host: r for r in result.results}
    assert (by[h1].status, by[h1].reason) == ("ok", "configured")
    assert by[h2].status == "failed"
    own = tmp_path / "logs" / result.configure_log.stem / f"{h2}.log"  # type: ignore[union-attr]
    assert by[h2].reason.endswith(f"; log: {own}")
    assert "    msg: held package" in own.read_text()
    assert store.get(h1).state == NodeState.CONFIGURED and store.get(h2).state == NodeState.FAILED
    (started,) = sink.of("run")
    assert started.data["hosts"] == [h1, h2] and started.data["configure"] is True
    assert [e.message for e in sink.of("task")] == ["common : ntp"]
    assert sorted(pinned) == sorted([h1, h2])


def test_site_sets_the_ceiling_of_hosts_in_flight_and_max_parallel_wins(
    site: Site, tmp_path: Path
) -> None:
    from pydantic import ValidationError

    from provisioner.deploy.embedded.backend import EmbeddedBackend
    from provisioner.exceptions import InventoryError
    from provisioner.settings.embedded import EmbeddedSettings

    text = site.path.read_text()
    assert "    http_port: 8080\n" in text
    (tmp_path / "site.yml").write_text(text.replace(
        "    http_port: 8080\n", "    http_port: 8080\n    max_hosts_in_flight: 200\n"))
    capped = load_site(tmp_path / "site.yml")
    assert capped.settings.embedded is not None
    assert capped.settings.embedded.max_hosts_in_flight == 200
    plan = runner(capped, tmp_path, EmbeddedBackend()).wave_plan(500)
    assert (plan.size, plan.ceiling) == (80, 200) and "80 to 200 hosts" in plan.reason
    # the default ceiling is 512 (or what the open-files limit allows)
    default = runner(site, tmp_path, EmbeddedBackend()).wave_plan(500)
    assert default.ceiling is not None and default.ceiling != 200
    pinned = runner(capped, tmp_path, EmbeddedBackend(), max_parallel=100).wave_plan(500)
    assert pinned.size == 100 and pinned.ceiling is None  # --max-parallel still wins
    for bad in ("0", "5000", "many"):
        (tmp_path / "bad.yml").write_text(text.replace(
            "    http_port: 8080\n", f"    http_port: 8080\n    max_hosts_in_flight: {bad}\n"))
        with pytest.raises(InventoryError, match="max_hosts_in_flight"):
            load_site(tmp_path / "bad.yml")
    for hold in (-1, 601):
        with pytest.raises(ValidationError, match="image_hold_s"):
            EmbeddedSettings(interface="eno1", server_address="10.0.0.1", image_hold_s=hold)


def test_reimage_discovery_runs_under_the_hosts_discovery_deadline(site: Site,
                                                                    tmp_path: Path) -> None:
    # #32 item 7: rack/reimage read each BMC under discover's per-host deadline.
    seen: list[float | None] = []

    class SlowBMC:
        def discover(self) -> None:
            seen.append(deadline.allowed_s())
            raise BMCDeadline("gave up: the BMC's answers took longer than allowed",
                              bmc="x", path="/redfish/v1/Systems/1")

        def close(self) -> None:
            pass

    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    options = RackOptions(configure=False, wait_ssh=False, discover=True)
    r = RackRunner(site, store, ScriptedBackend(), open_bmc=lambda s, h: SlowBMC(),  # type: ignore[arg-type,return-value]
                   reporter=Recorder(), options=options)
    result = r.run(site.select(["gpu-r01-u03"]))
    assert seen == [site.settings.redfish.discovery_deadline_s]
    (failed,) = result.failed
    assert "took longer than allowed" in failed.reason


@pytest.mark.parametrize("drives_power", [True, False])
def test_each_deploy_attempt_runs_under_the_hosts_bmc_deadline(site: Site, tmp_path: Path,
                                                               drives_power: bool) -> None:
    # #32 item 7: a backend that drives the BMC (PXE boot, power cycle, power off) does so under
    # the deploy timeout + settings.redfish.host_deadline_s; an engine's API keeps its own bounds.
    seen: list[float | None] = []

    flag = drives_power

    class Backend(ScriptedBackend):
        drives_power = flag

    backend = Backend(before=lambda name: seen.append(deadline.allowed_s()))
    assert runner(site, tmp_path, backend, discover=False).run(site.select(["gpu-r01-u03"])).ok
    s = site.settings
    assert seen == [s.deploy_timeout_s + s.redfish.host_deadline_s if drives_power else None]
