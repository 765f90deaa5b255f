"""Runs that resume and never reinstall by surprise: each host continues from the step it
finished (an installed host that missed site.yml is configured, its key pinned again), a host
that was configured is reinstalled only with consent, and site.yml starts per wave as hosts come
up. The backend and ansible-playbook are scripted stand-ins (tests/support/rack_runs.py); the
lab end-to-end test runs the same paths on real VMs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from provisioner.inventory import Site
from provisioner.state import NodeState, StateStore, Step
from provisioner.workflow import configure, rack
from provisioner.workflow.rack import RackOptions, RackRunner
from tests.support.rack_runs import Recorder, ScriptedBackend, fake_playbook, pinned_mac_site
from tests.support.signals import ctrl_c_raises
from tests.support.waiting import HANG_S

S = NodeState


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return pinned_mac_site(tmp_path)


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Host keys "pinned" per host (no traffic leaves this machine)."""
    seen: list[str] = []
    monkeypatch.setattr(rack, "pin_host_key", lambda _known, t: seen.append(t.host))
    return seen


@pytest.fixture
def playbook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = fake_playbook(tmp_path)
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(fake))
    return tmp_path / "playbook-runs"


def make(site: Site, tmp_path: Path, backend: ScriptedBackend | None = None,
         **opts: object) -> RackRunner:
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    # hosts ready together share a wave (the last expected host starts it: no timer involved)
    opts.setdefault("configure_gather_s", HANG_S * 10)
    options = RackOptions(wait_ssh=False, log_dir=tmp_path / "logs", **opts)  # type: ignore[arg-type]
    return RackRunner(site, store, backend or ScriptedBackend(), open_bmc=None,
                      reporter=Recorder(), options=options)


def installed_then_interrupted(site: Site, tmp_path: Path, names: list[str]) -> StateStore:
    """What Ctrl-C in site.yml leaves: hosts installed (deployed), their run aiming at
    configured, site.yml never applied."""
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    store.ensure_hosts(names)
    for n in names:
        store.transition(n, S.DISCOVERED)
        store.transition(n, S.DEPLOYING, goal=Step.CONFIGURED)
        store.transition(n, S.DEPLOYED, reason="installed, SSH answers")
    return store


def test_an_installed_host_that_missed_site_yml_is_configured_not_skipped(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path
) -> None:
    names = [h.name for h in site.hosts[:2]]
    installed_then_interrupted(site, tmp_path, names)
    backend = ScriptedBackend()
    result = make(site, tmp_path, backend).run(site.hosts[:2])
    assert backend.deployed == [] and backend.prepared == []  # nothing installed again
    assert [(r.host, r.status, r.reason) for r in result.results] == [
        (n, "ok", "configured") for n in names]
    assert sorted(pinned) == sorted(names)  # the keys refreshed before site.yml
    assert playbook.read_text().split() == [",".join(names)]
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    for n in names:
        rec = store.get(n)
        assert (rec.state, rec.step, rec.unfinished) == (S.CONFIGURED, Step.CONFIGURED, False)
        assert any(e.kind == "resume" for e in store.events(n))


def test_a_host_whose_site_yml_failed_is_configured_again_not_reinstalled(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h1 = site.hosts[0].name
    failing = fake_playbook(tmp_path, failing=[h1])
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(failing))
    first = make(site, tmp_path).run(site.hosts[:1])
    assert first.results[0].status == "failed"
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    assert (store.get(h1).state, store.get(h1).step) == (S.FAILED, Step.INSTALLED)
    (tmp_path / "ok").mkdir()
    ok = fake_playbook(tmp_path / "ok")
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(ok))
    backend = ScriptedBackend()
    again = make(site, tmp_path, backend).run(site.hosts[:1])
    assert backend.deployed == []
    assert (again.results[0].status, again.results[0].reason) == ("ok", "configured")
    assert store.get(h1).state is S.CONFIGURED


def test_with_skip_configure_an_installed_host_is_left_as_deployed(
    site: Site, tmp_path: Path, pinned: list[str]
) -> None:
    names = [site.hosts[0].name]
    installed_then_interrupted(site, tmp_path, names)
    result = make(site, tmp_path, configure=False).run(site.hosts[:1])
    assert [(r.status, r.reason) for r in result.results] == [("skipped", "already deployed")]
    assert pinned == []


def test_a_host_that_was_configured_is_reinstalled_only_with_consent(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path
) -> None:
    h = site.hosts[0]
    store = installed_then_interrupted(site, tmp_path, [h.name])
    store.transition(h.name, S.CONFIGURED, reason="site.yml applied")
    store.transition(h.name, S.FAILED, reason="health: gpu.ecc fail", error="remedy: reimage")
    store.record_discovery(h.name, {"serial": "X"})  # a re-discovery makes it discovered
    assert store.get(h.name).state is S.DISCOVERED and store.get(h.name).step is Step.CONFIGURED
    backend = ScriptedBackend()
    runner = make(site, tmp_path, backend)
    plan = runner.plan([h])
    assert plan.consent == {h.name: "was configured, now discovered (BMC discovered)"}
    result = runner.run([h])
    assert backend.deployed == []
    assert result.results[0].status == "skipped"
    assert result.results[0].reason.endswith("reinstalling it needs --reinstall")
    consented = make(site, tmp_path, backend, reinstall=True).run([h])
    assert backend.deployed == [h.name]
    assert consented.results[0].reason == "configured"


def test_an_interrupted_install_starts_over(site: Site, tmp_path: Path, pinned: list[str],
                                           playbook: Path) -> None:
    h = site.hosts[0]
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    store.ensure_hosts([h.name])
    store.transition(h.name, S.DISCOVERED)
    store.transition(h.name, S.DEPLOYING, goal=Step.CONFIGURED)
    backend = ScriptedBackend()
    result = make(site, tmp_path, backend).run([h])
    assert backend.deployed == [h.name] and result.results[0].reason == "configured"


def test_reimage_continues_its_own_interrupted_run_and_restart_installs_again(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path
) -> None:
    h = site.hosts[0]
    installed_then_interrupted(site, tmp_path, [h.name])
    backend = ScriptedBackend()
    plan = make(site, tmp_path, backend, reimage=True).plan([h])
    assert plan.configure == [h] and "re-image stopped after the install" in plan.resumed[h.name]
    result = make(site, tmp_path, backend, reimage=True).run([h])
    assert backend.deployed == [] and result.results[0].reason == "configured"
    # finished now: a new re-image installs it again
    make(site, tmp_path, backend, reimage=True).run([h])
    assert backend.deployed == [h.name]
    # --restart installs again even past an interrupted re-image's install
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    store.transition(h.name, S.DEPLOYING, goal=Step.CONFIGURED)
    store.transition(h.name, S.DEPLOYED)
    make(site, tmp_path, backend, reimage=True, restart=True).run([h])
    assert backend.deployed == [h.name, h.name]


def test_configure_only_runs_site_yml_for_the_hosts_that_need_it(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path
) -> None:
    a, b, c = site.hosts[:3]
    store = installed_then_interrupted(site, tmp_path, [a.name, b.name])
    store.transition(b.name, S.CONFIGURED, reason="site.yml applied")
    store.ensure_hosts([c.name])
    backend = ScriptedBackend()
    result = make(site, tmp_path, backend, configure_only=True).run([a, b, c])
    by = {r.host: (r.status, r.reason) for r in result.results}
    assert by[a.name] == ("ok", "configured")
    assert by[b.name] == ("skipped", "already configured")
    assert by[c.name] == ("skipped", f"not installed (enrolled): `provision rack {c.name}` "
                                     "installs it first")
    assert backend.deployed == [] and backend.prepared == []
    assert playbook.read_text().split() == [a.name]


def test_leaving_maintenance_returns_the_state_and_rack_leaves_the_host_alone(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path
) -> None:
    h = site.hosts[0]
    store = installed_then_interrupted(site, tmp_path, [h.name])
    store.transition(h.name, S.CONFIGURED, reason="site.yml applied")
    store.transition(h.name, S.VALIDATED, reason="health: golden")
    store.transition(h.name, S.MAINTENANCE, reason="PSU swap")
    back, had = store.leave_maintenance(h.name)
    assert (back.state, had) == (S.VALIDATED, S.VALIDATED)
    assert store.events(h.name)[-1].data == {"restored": "validated"}  # not a forced move
    backend = ScriptedBackend()
    result = make(site, tmp_path, backend).run([h])
    assert backend.deployed == [] and result.results[0].reason == "already validated"
    assert playbook.exists() is False


def test_maintenance_during_an_install_returns_the_host_to_install_again(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite", site="t")
    store.ensure_hosts(["h"])
    store.transition("h", S.DISCOVERED)
    store.transition("h", S.DEPLOYING)
    store.transition("h", S.MAINTENANCE, reason="wrong cable")
    back, had = store.leave_maintenance("h")
    assert (back.state, had) == (S.DISCOVERED, S.DEPLOYING)
    store.ensure_hosts(["never"])
    store.transition("never", S.MAINTENANCE)
    assert store.leave_maintenance("never")[0].state is S.ENROLLED


def test_site_yml_starts_for_hosts_that_are_up_while_others_still_install(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, slow = site.hosts[:2]
    fast_configured = threading.Event()
    real = rack.run_playbook

    def watched(site_path: Path, hosts: list[str], **kw: object) -> object:
        out = real(site_path, hosts, **kw)  # type: ignore[arg-type]
        if fast.name in hosts:
            fast_configured.set()
        return out

    def hold_slow(name: str) -> None:
        # the slow host's install finishes only once the fast host's site.yml is through
        if name == slow.name:
            assert fast_configured.wait(HANG_S), "site.yml waited for the slowest install"

    monkeypatch.setattr(rack, "run_playbook", watched)
    runner = make(site, tmp_path, ScriptedBackend(before=hold_slow), max_parallel=2,
                  configure_gather_s=0)
    result = runner.run([fast, slow])
    assert [r.reason for r in result.results] == ["configured", "configured"]
    assert playbook.read_text().split() == [fast.name, slow.name]  # two waves, in that order
    assert len(result.configure_logs) == 2


def test_a_host_that_gives_no_key_fails_with_its_reason_and_the_others_go_on(
    site: Site, tmp_path: Path, playbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = site.hosts[:2]

    def pin(_known: Path, target: configure.KeyTarget) -> str | None:
        return "ssh-keyscan 10.0.0.9 gave no host key within 10 s (2 attempts)" if (
            target.host == b.name) else None

    monkeypatch.setattr(rack, "pin_host_key", pin)
    result = make(site, tmp_path).run([a, b])
    by = {r.host: r for r in result.results}
    assert by[a.name].reason == "configured"
    assert by[b.name].status == "failed"
    assert by[b.name].reason == ("host key not read: ssh-keyscan 10.0.0.9 gave no host key "
                                 "within 10 s (2 attempts)")
    assert playbook.read_text().split() == [a.name]  # site.yml never ran for it
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    rec = store.get(b.name)
    assert (rec.state, rec.step) == (S.FAILED, Step.INSTALLED)  # the next run configures it


def test_two_runs_on_different_hosts_take_turns_with_the_deploy_server(
    site: Site, tmp_path: Path
) -> None:
    a, b = site.hosts[:2]
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    first_in = threading.Event()
    second_waits = threading.Event()
    order: list[str] = []

    class OnePerSite(ScriptedBackend):
        one_per_site = True

        def prepare(self, site: Site, requests: object) -> None:
            order.append(f"prepare {self.tag}")

        def close(self) -> None:
            order.append(f"close {self.tag}")

    def hold_first(name: str) -> None:
        first_in.set()
        assert second_waits.wait(HANG_S), "the second run never waited for the deploy server"

    backends = {}
    for tag, host, before in (("a", a, hold_first), ("b", b, None)):
        backend = OnePerSite(before=before)
        backend.tag = tag  # type: ignore[attr-defined]
        backends[tag] = (backend, host)

    class Told(Recorder):
        def phase(self, host: str, phase: str, message: str) -> None:
            super().phase(host, phase, message)
            if phase == "wait":
                second_waits.set()

    def run(tag: str) -> None:
        backend, host = backends[tag]
        lease = store.hold(f"provision reimage {host.name}", [host.name])
        options = RackOptions(wait_ssh=False, configure=False, reimage=True)
        with lease:
            RackRunner(site, store, backend, open_bmc=None, reporter=Told(), options=options,
                       lease=lease).run([host])

    t = threading.Thread(target=run, args=("a",))
    t.start()
    assert first_in.wait(HANG_S)
    run("b")  # waits for the deploy server, then installs b
    t.join(HANG_S)
    assert order == ["prepare a", "close a", "prepare b", "close b"]
    assert store.get(a.name).state is S.DEPLOYED and store.get(b.name).state is S.DEPLOYED


def test_ctrl_c_in_site_yml_leaves_the_host_installed_for_the_next_run(
    site: Site, tmp_path: Path, pinned: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    h = site.hosts[0]
    interrupted = tmp_path / "ansible-playbook"
    interrupted.write_text(f"#!{sys.executable}\nimport sys\nprint('TASK [common : ntp] ***')\n"
                           "print('ERROR! User interrupted execution')\nsys.exit(99)\n")
    interrupted.chmod(0o755)
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(interrupted))
    first = make(site, tmp_path).run([h])
    assert first.results[0].reason == "site.yml interrupted: the next run continues it"
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    rec = store.get(h.name)
    assert (rec.state, rec.step, rec.unfinished) == (S.DEPLOYED, Step.INSTALLED, True)
    assert store.events(h.name)[-1].kind == "deploy.interrupted"
    (tmp_path / "ok").mkdir()
    ok = fake_playbook(tmp_path / "ok")
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(ok))
    backend = ScriptedBackend()
    again = make(site, tmp_path, backend).run([h])
    assert backend.deployed == [] and again.results[0].reason == "configured"
    assert pinned == [h.name, h.name]  # its key read again before the second site.yml


def test_a_known_hosts_file_that_cannot_be_written_fails_the_host_with_the_path(
    site: Site, tmp_path: Path, playbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    def unwritable(known: Path, _target: configure.KeyTarget) -> str | None:
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(known))

    monkeypatch.setattr(rack, "known_hosts_file", lambda _site: tmp_path)
    monkeypatch.setattr(rack, "pin_host_key", unwritable)
    result = make(site, tmp_path).run(site.hosts[:1])
    assert result.results[0].status == "failed"
    assert result.results[0].reason == (f"host key not read: cannot record it in {tmp_path}: "
                                        "Is a directory")
    assert not playbook.exists()


def test_ctrl_c_while_others_install_starts_no_install_and_no_site_yml_after_it(
    site: Site, tmp_path: Path, pinned: list[str], playbook: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while the first host's site.yml runs and the second host still installs: the
    second finishes its install and stays `deployed` (no new wave takes it), the third, queued,
    never starts, and the next run only configures the two."""
    import signal

    first, second, queued = site.hosts[:3]
    real = rack.run_playbook
    runner: RackRunner | None = None
    second_installing = threading.Event()

    def interrupted_wave(site_path: Path, hosts: list[str], **kw: object) -> object:
        if first.name not in hosts:
            return real(site_path, hosts, **kw)  # type: ignore[arg-type]
        assert second_installing.wait(HANG_S), "the second host's install never started"
        # a terminal's Ctrl-C reaches the CLI's main thread and ansible-playbook alike
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        return 99, {}, "ERROR! User interrupted execution\n"

    def hold_second(name: str) -> None:
        # the second host's install ends only once the run is stopping
        if name == second.name:
            second_installing.set()
            assert runner is not None and runner.stopping.wait(HANG_S), "the run never stopped"

    monkeypatch.setattr(rack, "run_playbook", interrupted_wave)
    backend = ScriptedBackend(before=hold_second)
    runner = make(site, tmp_path, backend, max_parallel=1, configure_gather_s=0)
    with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        runner.run([first, second, queued])
    assert backend.deployed == [first.name, second.name]  # the queued host never started
    assert not playbook.exists()  # no site.yml wave after the Ctrl-C
    assert (second.name, "interrupted") in runner.reporter.phases  # type: ignore[attr-defined]
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    for h in (first, second):
        rec = store.get(h.name)
        assert (rec.state, rec.step, rec.unfinished) == (S.DEPLOYED, Step.INSTALLED, True)
    assert store.get(queued.name).state is not S.DEPLOYING

    monkeypatch.setattr(rack, "run_playbook", real)
    again_backend = ScriptedBackend()
    again = make(site, tmp_path, again_backend).run([first, second])
    assert again_backend.deployed == []
    assert [(r.host, r.reason) for r in again.results] == [
        (first.name, "configured"), (second.name, "configured")]
