"""The embedded backend's control flow and its DHCP server, without a VM (seconds, not minutes).

dnsmasq runs for real inside a throwaway network namespace and answers a real DHCP client
(busybox udhcpc) for a reserved MAC while ignoring an unknown one. The deploy flow runs against
the real HTTP server, with a BMC whose "host" is a thread acting as the deploy ramdisk: it
fetches the one-time configuration and posts the callbacks the ramdisk would.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from netaddr import IPAddress

from provisioner.bmc.base import BootTarget, HostFacts, PowerAction, PowerState
from provisioner.deploy.base import DeployRequest
from provisioner.deploy.embedded import EmbeddedBackend
from provisioner.deploy.embedded.dnsmasq import DnsmasqService, Reservation, parse_offers
from provisioner.exceptions import BMCError, DeployError, InputError, InventoryError
from provisioner.inventory.loader import load_site
from tests.support import machine
from tests.support.waiting import HANG_S, wait_until

# No VM and no lab: root (a network namespace, DHCP on port 67) and seconds, so it runs in the
# quick loop too.

NET = "198.18.236"
MAC = "52:54:00:ec:00:01"
STRANGER = "52:54:00:ec:00:99"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture
def netns() -> Iterator[str]:
    machine.require("root")
    machine.require_tools(["dnsmasq", "busybox"], "scripts/deps/50-deploy.list")
    name = f"pdflow{os.getpid() % 100000}"
    sh("ip", "netns", "del", name, check=False)
    sh("ip", "netns", "add", name)
    ns = ("ip", "-n", name)
    sh(*ns, "link", "add", "pfbr0", "type", "bridge")
    sh(*ns, "addr", "add", f"{NET}.1/24", "dev", "pfbr0")
    sh(*ns, "link", "set", "pfbr0", "up")
    for i, mac in enumerate((MAC, STRANGER)):
        sh(*ns, "link", "add", f"cl{i}", "address", mac, "type", "veth", "peer", "name", f"cl{i}p")
        sh(*ns, "link", "set", f"cl{i}p", "master", "pfbr0")
        sh(*ns, "link", "set", f"cl{i}p", "up")
        sh(*ns, "link", "set", f"cl{i}", "up")
    yield name
    sh("ip", "netns", "del", name, check=False)


def site_file(tmp: Path, netns: str, extra: str = "") -> Path:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForFlowTests test@flow"
    (tmp / "site.yml").write_text(
        f"""\
site: flowtest
settings:
  ssh_authorized_keys: ["{key}"]
  embedded:
    netns: {netns}
    interface: pfbr0
    server_address: {NET}.1
    http_address: 127.0.0.1
    http_port: 0
    log_dir: {tmp / "deploy"}
    callback_timeout_s: 20
{extra}networks:
  provisioning: {{cidr: {NET}.0/24, gateway: {NET}.1, reserved: ["{NET}.1-{NET}.99"]}}
credentials:
  c: {{username: u, password: {{env: FLOWTEST_UNUSED}}}}
profiles:
  vm: {{provisioning_nic: {{mac_prefix: "52:54:00:ec"}}}}
racks:
  - name: f1
    index: 1
    host_name_template: "flow{{u:02d}}"
    defaults: {{profile: vm, bmc: {{vendor: generic, credentials: c, address: 198.19.236.10}}}}
    hosts:
      - {{u: 1, root_disk: {{serial: FLOW-ROOT}}}}
"""
    )
    return tmp / "site.yml"


def udhcpc_argv(netns: str, iface: str, tries: int) -> list[str]:
    return ["ip", "netns", "exec", netns, "busybox", "udhcpc", "-i", iface, "-n", "-q",
            "-t", str(tries), "-T", "1", "-s", "/bin/true"]


def lease(netns: str, iface: str) -> str:
    """What busybox udhcpc printed once it got a lease (it asks again every second; the tries
    only stop a hung test)."""
    r = subprocess.run(udhcpc_argv(netns, iface, 100), capture_output=True, text=True,
                       check=False, timeout=HANG_S)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def refused(svc: DnsmasqService, netns: str, iface: str, mac: str) -> None:
    """The client asks; dnsmasq logs that it ignored this MAC's DISCOVER and offers it nothing."""
    log = svc.cfg.log_path
    offset = log.stat().st_size
    asking = subprocess.Popen(udhcpc_argv(netns, iface, 100), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: f"DHCPDISCOVER(pfbr0) {mac} ignored" in _since(log, offset),
                   f"dnsmasq to ignore {mac}")
    finally:
        asking.kill()
        asking.wait()
    assert mac not in parse_offers(_since(log, offset))


def _since(log: Path, offset: int) -> str:
    with log.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def test_dhcp_only_for_reserved_macs(netns: str, tmp_path: Path) -> None:
    site = load_site(site_file(tmp_path, netns))
    from provisioner.deploy.embedded.dnsmasq import DnsmasqConfig

    net = site.networks["provisioning"]
    cfg = DnsmasqConfig(
        interface="pfbr0",
        server_address=f"{NET}.1",
        network=net.cidr,
        gateway=net.gateway,
        dns=(),
        ipxe_boot_url="http://127.0.0.1/ipxe/boot.ipxe",
        workdir=tmp_path / "dhcp",
    )
    svc = DnsmasqService(cfg, netns=netns)
    svc.start()
    try:
        refused(svc, netns, "cl0", MAC)  # nobody reserved yet
        # a reservation added to the running server (it must re-read its hosts file)
        svc.add(Reservation(MAC, IPAddress(f"{NET}.100"), "flow01"))
        assert f"lease of {NET}.100 obtained" in lease(netns, "cl0")
        refused(svc, netns, "cl1", STRANGER)
        # and taken back: the installed host asks again and is ignored
        svc.remove(MAC)
        refused(svc, netns, "cl0", MAC)
    finally:
        svc.stop()
    log = cfg.log_path.read_text()
    assert parse_offers(log) == {MAC: {f"{NET}.100"}}
    assert f"DHCPDISCOVER(pfbr0) {STRANGER} ignored" in log
    assert not svc.running()


def test_dnsmasq_start_failure_names_the_cause(netns: str, tmp_path: Path) -> None:
    from provisioner.deploy.embedded.dnsmasq import DnsmasqConfig
    from provisioner.exceptions import NotReady

    base = {
        "server_address": f"{NET}.1",
        "network": load_site(site_file(tmp_path, netns)).networks["provisioning"].cidr,
        "gateway": None,
        "dns": (),
        "ipxe_boot_url": "http://127.0.0.1/ipxe/boot.ipxe",
        "workdir": tmp_path / "dhcp",
    }
    svc = DnsmasqService(DnsmasqConfig(interface="nosuchif0", **base), netns=netns)  # type: ignore[arg-type]
    with pytest.raises(DeployError, match="dnsmasq exited at start"):
        svc.start()
    with pytest.raises(NotReady, match="network namespace 'nope-ns' does not exist"):
        DnsmasqService(DnsmasqConfig(interface="x", **base), netns="nope-ns").start()  # type: ignore[arg-type]


class RamdiskBMC:
    """A BMC whose host, once PXE-booted, behaves like the deploy ramdisk over HTTP."""

    def __init__(self, base: str, host: str, outcome: str) -> None:
        self.base, self.host, self.outcome = base, host, outcome
        self.state = PowerState.OFF
        self.next_boot: BootTarget | None = None
        self.actions: list[str] = []
        self.seen: dict[str, str] = {}
        self.threads: list[threading.Thread] = []

    def _ramdisk(self) -> None:
        # as the real host: the key to the one-time configuration is in its iPXE script
        script = requests.get(f"{self.base}/ipxe/{MAC.replace(':', '-')}", timeout=5).text
        key = script.split("deploy_key=", 1)[1].split()[0]
        env_text = requests.get(f"{self.base}/deploy/{self.host}/config", timeout=5,
                                headers={"Authorization": f"Bearer {key}"}).text
        env = {k: shlex.split(v)[0] if v else "" for k, _, v in (ln.partition("=") for ln in env_text.splitlines())}
        self.seen = env
        hdr = {"Authorization": f"Bearer {env['DEPLOY_TOKEN']}"}
        cb = env["CALLBACK_URL"]
        if self.outcome == "silent":
            return
        requests.post(f"{cb}/started", data="ramdisk up", headers=hdr, timeout=5)
        if "IMAGE_URL" in env:  # through the stream gate, as deploy.sh fetches it
            self.seen["image_status"] = str(requests.get(env["IMAGE_URL"], timeout=5).status_code)
        if self.outcome == "hang":  # got its image, then stopped (a disk write that hangs)
            return
        if self.outcome == "nodisk":
            log = (
                "deploy: FAILED: root disk hint: no disk matches the hint serial=FLOW-ROOT ...\n"
                "  vda serial=OTHER wwn=? model=\"?\" size_gb=10.7 by_path=?\n"
            )
            requests.post(f"{cb}/failed", data=log, headers=hdr, timeout=5)
            return
        seed = requests.get(f"{self.base}/deploy/{self.host}/seed/user-data", headers=hdr, timeout=5)
        self.seen["user-data"] = seed.text
        if self.outcome.startswith("kexec"):  # the ramdisk jumps into the installed kernel
            requests.post(f"{cb}/finished?next=kexec", data="deploy: kexec: loaded x\n",
                          headers=hdr, timeout=5)
            if self.outcome == "kexec":
                self._installed_os()  # no power action: the same power-on runs the new OS
            return
        requests.post(f"{cb}/finished", data="deploy: sha256 verified: x\n", headers=hdr, timeout=5)
        self.state = PowerState.OFF  # the ramdisk powers off after its last report

    def _installed_os(self) -> None:
        url = self.seen["user-data"].split("url: ")[1].split()[0]
        requests.post(url, data={"instance_id": "x"}, timeout=5)

    def _run(self, target: object) -> None:
        t = threading.Thread(target=target)  # type: ignore[arg-type]
        t.start()
        self.threads.append(t)

    def power_state(self) -> PowerState:
        return self.state

    def power(self, action: PowerAction) -> None:
        self.actions.append(action.value)
        if action == PowerAction.OFF:
            self.state = PowerState.OFF
            return
        self.state = PowerState.ON
        boot, self.next_boot = self.next_boot, None
        self._run(self._ramdisk if boot == BootTarget.PXE else self._installed_os)

    def wait_power(self, state: PowerState, timeout_s: float) -> None:
        deadline = time.monotonic() + min(timeout_s, 5)
        while self.state != state:
            if time.monotonic() > deadline:
                raise BMCError("timeout")
            time.sleep(0.05)

    def set_boot(self, target: BootTarget, *, persistent: bool = False) -> None:
        self.actions.append(f"boot:{target.value}")
        self.next_boot = target

    def insert_media(self, image_url: str) -> None: ...
    def eject_media(self) -> None: ...
    def discover(self) -> HostFacts:
        return HostFacts()

    def close(self) -> None: ...


@pytest.fixture
def backend(netns: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedBackend]:
    # the ramdisk and image builders are exercised by the VM test; here they are stand-ins
    import provisioner.deploy.embedded.backend as be
    from provisioner.deploy.embedded.artifacts import ServedImage
    from provisioner.deploy.ramdisk import Ramdisk

    blob = tmp_path / "blob"
    blob.write_bytes(b"x" * 1024)
    monkeypatch.setattr(be, "build_ramdisk", lambda flavour: Ramdisk(blob, blob, "6.1", {}))
    monkeypatch.setattr(be, "prepare_image", lambda image: ServedImage(blob, "ab" * 32, 1024, 2))
    b = EmbeddedBackend()
    yield b
    b.close()


def _deploy(backend: EmbeddedBackend, tmp_path: Path, netns: str, outcome: str,
            attempt: int = 1) -> tuple:
    site = load_site(site_file(tmp_path, netns))
    req = DeployRequest(host=site.host("flow01"), mac=MAC, timeout_s=30, attempt=attempt)
    if attempt == 1:  # a retry belongs to the same run: prepared once, as the runner does
        backend.prepare(site, [req])
    assert backend.server is not None
    bmc = RamdiskBMC(f"http://127.0.0.1:{backend.server.port}", "flow01", outcome)
    req.bmc = bmc
    phases: list[str] = []
    out = backend.deploy(req, lambda h, p, m: phases.append(p))
    for t in bmc.threads:
        t.join(10)
    return out, bmc, phases


def test_successful_flow(backend: EmbeddedBackend, tmp_path: Path, netns: str) -> None:
    out, bmc, phases = _deploy(backend, tmp_path, netns, "ok")
    assert out.ok, out.reason
    assert phases == ["pxe", "install", "reboot", "firstboot"]
    assert set(out.phases) == {"pxe", "install", "reboot", "firstboot"}
    assert bmc.actions == ["boot:Pxe", "cycle", "boot:Hdd", "on"]
    assert bmc.seen["HINT_ARGS"] == "--serial FLOW-ROOT"
    assert bmc.seen["IMAGE_SHA256"] == "ab" * 32 and bmc.seen["ROOT_PART"] == "2"
    # the image URL carries the host's ticket at the stream gate; the retry/give-up settings
    assert bmc.seen["IMAGE_URL"].endswith("?host=flow01")
    assert bmc.seen["IMAGE_RETRY_S"] == "1" and int(bmc.seen["IMAGE_WAIT_S"]) >= 60
    assert bmc.seen["IMAGE_ATTEMPTS"] == "2"  # a stream that does not verify is fetched again
    assert bmc.seen["image_status"] == "200"
    # by default: no peer serving, and the installed OS boots through a power cycle
    assert bmc.seen["PEER_KEY"] == bmc.seen["PEER_PORT"] == bmc.seen["PEER_URL"] == ""
    assert bmc.seen["NEXT_BOOT"] == "reboot" and bmc.seen["IMAGE_SIZE"] == "1024"
    assert backend.server is not None and not backend.server.peer_serving
    # the server holds busy image requests as the site says (defaults: 25 s, 512 at once)
    assert backend.server is not None and backend.server.gate is not None
    assert backend.server.hold_s == 25.0 and backend.server.gate.max_held == 512
    assert "hostname: flow01" in bmc.seen["user-data"]
    assert out.log == "deploy: sha256 verified: x\n"
    # the host's reservation is withdrawn once it is done
    assert backend.dnsmasq is not None
    assert "52:54:00:ec:00:01" not in backend.dnsmasq.cfg.hosts_path.read_text()


def test_no_matching_disk_fails_with_the_reason(backend: EmbeddedBackend, tmp_path: Path, netns: str) -> None:
    out, bmc, _ = _deploy(backend, tmp_path, netns, "nodisk")
    assert not out.ok
    assert out.reason == "root disk hint: no disk matches the hint serial=FLOW-ROOT ..."
    assert "vda serial=OTHER" in out.log
    assert bmc.actions[-1] == "off"  # a failed host is left powered off


def test_silent_host_times_out(backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import provisioner.deploy.embedded.backend as be

    real = be.embedded_settings
    monkeypatch.setattr(be, "embedded_settings", lambda s: real(s).model_copy(update={"callback_timeout_s": 1.0}))
    out, bmc, _ = _deploy(backend, tmp_path, netns, "silent")
    assert not out.ok
    assert "no 'started' report within 1 s" in out.reason
    assert "dnsmasq.log" in out.log  # where to look next
    assert bmc.actions[-1] == "off"


def test_deploy_without_bmc_or_prepare(backend: EmbeddedBackend, tmp_path: Path, netns: str) -> None:
    site = load_site(site_file(tmp_path, netns))
    req = DeployRequest(host=site.host("flow01"), mac=MAC)
    with pytest.raises(DeployError, match="not prepared"):
        backend.deploy(req, lambda *a: None)
    backend.prepare(site, [req])
    out = backend.deploy(req, lambda *a: None)
    assert not out.ok and "no BMC to drive" in out.reason
    with pytest.raises(InputError, match="does not erase"):
        backend.release(req, erase=True)
    backend.release(req)


def test_settings_errors_name_the_key(tmp_path: Path, netns: str) -> None:
    # the block is typed in the site schema: the site itself does not load
    with pytest.raises(InventoryError, match=r"\[settings.embedded.bogus_key\]"):
        load_site(site_file(tmp_path, netns, extra="    bogus_key: 1\n"))


class InstallerBMC(RamdiskBMC):
    """A host that, PXE-booted, runs "Ubuntu's installer": it reads the autoinstall user-data
    the way subiquity's NoCloud source does and reports through its callback commands."""

    def _ramdisk(self) -> None:
        import re

        import yaml

        script = requests.get(f"{self.base}/ipxe/{MAC.replace(':', '-')}", timeout=5).text
        self.seen["ipxe"] = script
        seed = re.search(r"ds=nocloud-net;s=(\S+)", script)
        assert seed is not None
        text = requests.get(f"{seed.group(1)}user-data", timeout=5).text
        meta = requests.get(f"{seed.group(1)}meta-data", timeout=5).text
        self.seen["user-data"] = text
        self.seen["meta-data"] = meta
        ai = yaml.safe_load(text)["autoinstall"]
        token = re.search(r"Bearer (\S+)'", ai["early-commands"][0])
        assert token is not None
        hdr = {"Authorization": f"Bearer {token.group(1)}"}
        cb = f"{self.base}/callback/{self.host}"
        requests.post(f"{cb}/started", data="installer started", headers=hdr, timeout=5)
        requests.post(f"{cb}/finished", data="subiquity: done", headers=hdr, timeout=5)
        self.state = PowerState.OFF  # shutdown: poweroff

    def _installed_os(self) -> None:
        import yaml

        ud = yaml.safe_load(self.seen["user-data"])["autoinstall"]["user-data"]
        requests.post(ud["phone_home"]["url"], data={"instance_id": "x"}, timeout=5)


AUTOINSTALL = """\
    autoinstall:
      kernel_url: http://10.0.0.9/noble/vmlinuz
      initrd_url: http://10.0.0.9/noble/initrd
      iso_url: http://10.0.0.9/noble/live-server.iso
"""


def test_autoinstall_flow(backend: EmbeddedBackend, tmp_path: Path, netns: str) -> None:
    site = load_site(site_file(tmp_path, netns, extra=AUTOINSTALL))
    req = DeployRequest(host=site.host("flow01"), mac=MAC, method="autoinstall", timeout_s=30)
    backend.prepare(site, [req])
    assert backend.server is not None and backend.image is None  # no image is prepared for it
    bmc = InstallerBMC(f"http://127.0.0.1:{backend.server.port}", "flow01", "ok")
    req.bmc = bmc
    out = backend.deploy(req, lambda *a: None)
    for t in bmc.threads:
        t.join(10)
    assert out.ok, out.reason
    assert "kernel http://10.0.0.9/noble/vmlinuz" in bmc.seen["ipxe"]
    assert "url=http://10.0.0.9/noble/live-server.iso autoinstall" in bmc.seen["ipxe"]
    assert "local-hostname: flow01" in bmc.seen["meta-data"]
    assert "serial: '*FLOW-ROOT'" in bmc.seen["user-data"]
    assert bmc.actions == ["boot:Pxe", "cycle", "boot:Hdd", "on"]


def test_autoinstall_needs_its_settings(backend: EmbeddedBackend, tmp_path: Path, netns: str) -> None:
    site = load_site(site_file(tmp_path, netns))
    req = DeployRequest(host=site.host("flow01"), mac=MAC, method="autoinstall", timeout_s=30)
    backend.prepare(site, [req])
    req.bmc = RamdiskBMC("http://127.0.0.1:1", "flow01", "silent")
    out = backend.deploy(req, lambda *a: None)
    assert not out.ok
    assert "settings.embedded.autoinstall" in out.reason
    assert req.bmc.actions == []  # refused before touching the host


def test_a_host_that_got_its_image_and_went_silent_fails_at_the_callback_timeout(
    backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import provisioner.deploy.embedded.backend as be

    real = be.embedded_settings
    monkeypatch.setattr(be, "embedded_settings",
                        lambda s: real(s).model_copy(update={"callback_timeout_s": 1.0}))
    out, bmc, phases = _deploy(backend, tmp_path, netns, "hang")
    assert bmc.seen["image_status"] == "200"
    assert not out.ok and phases == ["pxe", "install"]
    # declared failed 1 s after its image, not at the end of the 30 s deploy timeout
    assert "got its whole image but did not report 'finished' within 1 s" in out.reason
    assert bmc.actions[-1] == "off"


def test_the_servers_hold_and_held_requests_follow_the_site(
    backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import provisioner.deploy.embedded.backend as be

    real = be.embedded_settings
    monkeypatch.setattr(be, "embedded_settings", lambda s: real(s).model_copy(
        update={"image_hold_s": 3.0, "max_hosts_in_flight": 7, "image_attempts": 3}))
    out, bmc, _ = _deploy(backend, tmp_path, netns, "ok")
    assert out.ok, out.reason
    assert backend.server is not None and backend.server.gate is not None
    assert backend.server.hold_s == 3.0 and backend.server.gate.max_held == 7
    assert bmc.seen["IMAGE_ATTEMPTS"] == "3"


def _with(monkeypatch: pytest.MonkeyPatch, **update: object) -> None:
    import provisioner.deploy.embedded.backend as be

    real = be.embedded_settings
    monkeypatch.setattr(be, "embedded_settings", lambda s: real(s).model_copy(update=update))


def test_kexec_boots_the_installed_os_without_a_power_action(
    backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(monkeypatch, installed_boot="kexec")
    out, bmc, phases = _deploy(backend, tmp_path, netns, "kexec")
    assert out.ok, out.reason
    assert bmc.seen["NEXT_BOOT"] == "kexec"
    assert phases == ["pxe", "install", "reboot", "firstboot"]
    assert bmc.actions == ["boot:Pxe", "cycle"]  # one POST: no power off, no disk boot, no on
    assert out.phases["reboot"] == 0.0
    assert out.log == "deploy: kexec: loaded x\n"


def test_a_kexec_that_never_comes_up_fails_at_the_callback_timeout_and_its_retry_reboots(
    backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(monkeypatch, installed_boot="kexec", callback_timeout_s=1.0)
    out, bmc, _ = _deploy(backend, tmp_path, netns, "kexec-hang")
    assert not out.ok
    assert "did not phone home within 1 s of the ramdisk's kexec" in out.reason
    assert bmc.actions[-1] == "off"  # left off for the retry
    # its retry does not kexec again: it boots the disk through a power cycle
    again, bmc2, _ = _deploy(backend, tmp_path, netns, "ok", attempt=2)
    assert again.ok, again.reason
    assert bmc2.seen["NEXT_BOOT"] == "reboot"
    assert bmc2.actions == ["boot:Pxe", "cycle", "boot:Hdd", "on"]


def test_peer_serving_hands_each_host_its_own_key_port_and_long_poll(
    backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(monkeypatch, peer_serving=True, peer_port=9181, peer_linger_s=4.0,
          peer_serve_max_s=90.0)
    out, bmc, _ = _deploy(backend, tmp_path, netns, "ok")
    assert out.ok, out.reason
    assert backend.server is not None and backend.server.peer_serving
    assert bmc.seen["PEER_PORT"] == "9181" and bmc.seen["PEER_MAX_S"] == "90"
    assert len(bmc.seen["PEER_KEY"]) >= 40
    assert bmc.seen["PEER_URL"].endswith("/deploy/flow01/peer")
    # the key is this attempt's own: never in the log the outcome carries
    assert bmc.seen["PEER_KEY"] not in out.log + out.reason


def test_a_retry_after_another_failure_still_kexecs(
    backend: EmbeddedBackend, tmp_path: Path, netns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(monkeypatch, installed_boot="kexec")
    out, _, _ = _deploy(backend, tmp_path, netns, "nodisk")
    assert not out.ok
    # a failure that is not the kexec's: the retry has paid its POST already, it kexecs again
    again, bmc, _ = _deploy(backend, tmp_path, netns, "kexec", attempt=2)
    assert again.ok, again.reason
    assert bmc.seen["NEXT_BOOT"] == "kexec" and bmc.actions == ["boot:Pxe", "cycle"]
