"""The lab's apt proxy: its command line and config, the site's apt_proxy, and start failures.

The loopback tests start the real apt-cacher-ng (no upstream traffic: the requests they make
are refused by the proxy itself before it would connect anywhere).
"""

from __future__ import annotations

import random
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from provisioner.exceptions import NotReady
from provisioner.health.config import HealthSettings
from provisioner.inventory import load_site
from provisioner.lab import aptproxy
from provisioner.lab.aptproxy import AptProxy, LabAptProxyError
from provisioner.lab.plan import LabPlan
from tests.support import machine


@pytest.fixture
def acng() -> None:
    machine.require_tools(["apt-cacher-ng"], "scripts/deps/20-lab.list")


needs_acng = pytest.mark.usefixtures("acng")


def _plan(tmp_path: Path, slot: int = 0) -> LabPlan:
    return LabPlan(netns="plabt", slot=slot, state_dir=tmp_path / "state", inventory_dir=tmp_path)


def test_proxy_listens_on_the_uplinks_root_end_with_files_in_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("PROVISIONER_DEBIAN_MIRROR", raising=False)
    plan = _plan(tmp_path, slot=5)
    proxy = aptproxy.apt_proxy(plan)
    assert proxy.url == "http://198.18.94.1:3142" == f"http://{plan.host_uplink_address}:3142"
    argv = aptproxy.argv(proxy)
    assert argv[:3] == ["apt-cacher-ng", "-c", str(plan.state_dir / "aptproxy" / "conf")]
    opts = dict(a.split("=", 1) for a in argv[3:])
    assert opts == {
        "ForeGround": "0",
        "BindAddress": "198.18.94.1",
        "Port": "3142",
        "CacheDir": str(plan.state_dir / "aptproxy/cache"),
        "LogDir": str(plan.state_dir / "aptproxy/log"),
        "PidFile": str(plan.state_dir / "aptproxy/pid"),
        "SocketPath": "",
        "SupportDir": "/usr/lib/apt-cacher-ng",
    }
    # `lab down` sweeps processes whose command line names the state dir.
    assert any(str(plan.state_dir) + "/" in a for a in argv)


def test_config_forwards_to_the_debian_archive_only(tmp_path, monkeypatch):
    monkeypatch.delenv("PROVISIONER_DEBIAN_MIRROR", raising=False)
    text = aptproxy.config_text(aptproxy.apt_proxy(_plan(tmp_path)))
    lines = dict(line.split(": ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert lines["ForceManaged"] == "1"
    assert lines["PassThroughPattern"] == "^$"
    prefixes, backend = lines["Remap-debrep"].split(" ; ")
    assert backend == "http://deb.debian.org/debian/"
    assert "deb.debian.org/debian" in prefixes.split()
    assert lines["Remap-secdeb"].endswith(" ; http://deb.debian.org/debian-security/")
    assert set(lines) == {"Remap-debrep", "Remap-secdeb", "ForceManaged", "PassThroughPattern",
                          "ExThreshold"}  # fmt: skip


def test_config_follows_the_mirror_the_lab_image_is_built_from(tmp_path, monkeypatch):
    monkeypatch.setenv("PROVISIONER_DEBIAN_MIRROR", "http://mirror.example.org/debian/")
    text = aptproxy.config_text(aptproxy.apt_proxy(_plan(tmp_path)))
    remap = next(line for line in text.splitlines() if line.startswith("Remap-debrep: "))
    assert "mirror.example.org/debian" in remap.split(" ; ")[0].split()
    assert "; http://mirror.example.org/debian/\n" in text
    assert "; http://mirror.example.org/debian-security/\n" in text


def test_site_points_apt_and_known_hosts_at_the_lab(tmp_path, write_lab_site):
    plan = write_lab_site(_plan(tmp_path, slot=3))
    site = load_site("lab", inventory_dir=plan.inventory_dir)
    assert site.settings.apt_proxy == "http://198.18.62.1:3142"
    health = HealthSettings.model_validate(site.settings.health)
    assert health.known_hosts == str(plan.ssh_dir / "known_hosts")


def test_missing_daemon_is_named_with_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(aptproxy.shutil, "which", lambda _name: None)
    with pytest.raises(NotReady, match="apt-cacher-ng is not installed") as exc:
        aptproxy.ensure(_plan(tmp_path))
    assert "apt-get install apt-cacher-ng" in (exc.value.hint or "")


def _loopback_proxy(tmp_path: Path) -> AptProxy:
    # apt-cacher-ng 3.7 cannot bind ports above 32767 ("Error resolving address for
    # binding"), which is where the kernel hands out ephemeral ports: pick a free one below.
    for port in random.sample(range(20000, 32000), 50):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            break
    return AptProxy("127.0.0.1", port, tmp_path / "aptproxy", "http://deb.debian.org/debian")


@needs_acng
def test_taken_port_is_an_error_not_a_deaf_daemon(tmp_path):
    proxy = _loopback_proxy(tmp_path)
    for d in (proxy.conf_dir, proxy.cache_dir, proxy.log_dir):
        d.mkdir(parents=True)
    proxy.conf_file.write_text(aptproxy.config_text(proxy))
    with socket.socket() as holder:
        holder.bind((proxy.address, proxy.port))
        holder.listen()
        with pytest.raises(
            LabAptProxyError, match=r"did not start on http://127\.0\.0\.1:\d+"
        ) as exc:
            aptproxy._start(proxy)
    assert "Address already in use" in str(exc.value)
    assert aptproxy.running_pid(proxy) is None


@needs_acng
def test_real_proxy_refuses_other_origins_and_stops(tmp_path, monkeypatch):
    proxy = _loopback_proxy(tmp_path)
    plan = _plan(tmp_path)
    monkeypatch.setattr(aptproxy, "apt_proxy", lambda _plan: proxy)
    pid = aptproxy.ensure(plan)
    try:
        assert aptproxy.running_pid(proxy) == pid
        assert aptproxy.ensure(plan) == pid  # nothing changed: the running one is kept
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
        with pytest.raises(urllib.error.HTTPError) as exc:
            opener.open("http://download.docker.com/linux/debian/gpg", timeout=10)
        assert exc.value.code == 403
        # A changed config restarts it.
        monkeypatch.setattr(aptproxy, "config_text", lambda p: "ForceManaged: 1\n")
        new_pid = aptproxy.ensure(plan)
        assert new_pid != pid and aptproxy.running_pid(proxy) == new_pid
        pid = new_pid
    finally:
        assert aptproxy.stop(plan) == pid
    assert aptproxy.running_pid(proxy) is None
    assert not aptproxy.answers(proxy)
    assert aptproxy.stop(plan) is None


def test_start_failure_quotes_the_daemon(tmp_path, monkeypatch):
    fake = tmp_path / "fake-acng"
    fake.write_text("#!/bin/sh\necho 'No listening socket(s) could be created/prepared.'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(aptproxy, "EXECUTABLE", str(fake))
    proxy = _loopback_proxy(tmp_path)
    proxy.log_dir.mkdir(parents=True)
    with pytest.raises(LabAptProxyError, match=r"exit 1\): No listening socket"):
        aptproxy._start(proxy)


def test_daemon_that_never_answers_times_out(tmp_path, monkeypatch):
    fake = tmp_path / "fake-acng"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setattr(aptproxy, "EXECUTABLE", str(fake))
    monkeypatch.setattr(aptproxy, "START_TIMEOUT_S", 0.5)
    proxy = _loopback_proxy(tmp_path)
    proxy.log_dir.mkdir(parents=True)
    with pytest.raises(LabAptProxyError, match=r"did not answer on http://127\.0\.0\.1:\d+ within"):
        aptproxy._start(proxy)
