"""The embedded deploy backend: dnsmasq + iPXE + the deploy HTTP server + the BMC.

``prepare`` starts the services for a run; ``deploy`` drives one host through
one-time PXE -> power cycle -> ramdisk (or installer) callbacks -> power off -> one-time disk boot
-> cloud-init phone-home from the installed OS, and returns the phase timings.
"""

from __future__ import annotations

import logging
import secrets
import shlex
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from netaddr import AddrFormatError, IPAddress

from provisioner.bmc.base import BootTarget, PowerAction, PowerState
from provisioner.deploy import autoinstall as ai
from provisioner.deploy import cloudinit
from provisioner.deploy.base import (
    DeployBackend,
    DeployOutcome,
    DeployRequest,
    ProgressFn,
    StreamStats,
    register_backend,
)
from provisioner.deploy.embedded import ipxe
from provisioner.deploy.embedded.artifacts import ServedImage, prepare_image
from provisioner.deploy.embedded.dnsmasq import DnsmasqConfig, DnsmasqService, Reservation
from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.peers import PeerPool
from provisioner.deploy.embedded.sessions import (
    BOOTED,
    FAILED,
    FINISHED,
    KEXEC,
    REBOOT,
    START,
    HostSession,
)
from provisioner.deploy.embedded.settings import (
    EmbeddedSettings,
    embedded_settings,
    host_link_gbps,
    max_image_streams,
    state_dir,
)
from provisioner.deploy.ramdisk import FILES as RAMDISK_FILES
from provisioner.deploy.ramdisk import build_ramdisk
from provisioner.exceptions import DeployError, InputError, InventoryError, ProvisionerError
from provisioner.secrets import Secret

if TYPE_CHECKING:
    from provisioner.inventory.model import Host, Network, Site
    from provisioner.inventory.spec import RootDiskHint

log = logging.getLogger("provisioner.deploy.embedded")


def authorized_keys(site: Site) -> tuple[str, ...]:
    """settings.ssh_authorized_keys (keys or paths to .pub files), else ssh_private_key + .pub."""
    keys: list[str] = []
    for entry in site.settings.ssh_authorized_keys:
        text = entry.strip()
        if text.startswith(("ssh-", "ecdsa-", "sk-")):
            keys.append(text)
            continue
        path = site.resolve_path(text)
        if not path.is_file():
            raise InventoryError(
                f"{text!r} is neither an SSH public key nor a readable file",
                file=str(site.path),
                key="settings.ssh_authorized_keys",
            )
        keys += [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if not keys and site.settings.ssh_private_key:
        pub = Path(str(site.resolve_path(site.settings.ssh_private_key)) + ".pub")
        if pub.is_file():
            keys.append(pub.read_text().strip())
    return tuple(keys)


def hint_args(hint: RootDiskHint | None) -> str:
    """pick-disk.sh arguments for a root-disk hint, shell-quoted."""
    args: list[str] = []
    if hint is not None:
        pairs = (
            ("--serial", hint.serial),
            ("--wwn", hint.wwn),
            ("--by-path", hint.by_path),
            ("--model", hint.model),
            ("--min-gb", hint.size_gb_min),
            ("--max-gb", hint.size_gb_max),
        )
        for flag, value in pairs:
            if value is not None:
                args += [flag, str(value)]
    return " ".join(shlex.quote(a) for a in args)


def failure_reason(log_text: str) -> str:
    """The one line of a deploy log that says why it failed."""
    for line in log_text.splitlines():
        if "FAILED:" in line:
            return line.split("FAILED:", 1)[1].strip()
    lines = [ln for ln in log_text.splitlines() if ln.strip()]
    return lines[0].strip() if lines else "the host reported a failure without a log"


@register_backend
class EmbeddedBackend(DeployBackend):
    """Installs hosts with the project's own dnsmasq/iPXE/HTTP services."""

    name = "embedded"
    one_per_site = True  # one HTTP port and one dnsmasq per provisioning network

    def __init__(self) -> None:
        self.site: Site | None = None
        self.settings: EmbeddedSettings | None = None
        self.server: DeployServer | None = None
        self.dnsmasq: DnsmasqService | None = None
        self.image: ServedImage | None = None
        self.image_url = ""
        self.base = ""  # the HTTP server's URL as hosts see it, set by prepare()
        self._network: Network | None = None
        self._lock = threading.Lock()
        self._no_kexec: set[str] = set()  # hosts whose kexec'd OS did not come up: reboot them

    def image_streams(self, site: Site) -> int | None:
        """The HTTP server gates image streams to settings.embedded.max_image_streams."""
        return max_image_streams(site)

    def host_link_gbps(self, site: Site) -> float:
        """settings.embedded.host_link_gbps."""
        return host_link_gbps(site)

    def serves_peers(self, site: Site) -> bool:
        """settings.embedded.peer_serving."""
        return bool(site.settings.embedded and site.settings.embedded.peer_serving)

    def stream_stats(self) -> StreamStats | None:
        """The HTTP server's gate figures (stream and queue times) while it runs."""
        server = self.server
        return server.gate.stats() if server is not None and server.gate is not None else None

    # -- set-up -----------------------------------------------------------------------------
    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        """Build/find the ramdisk and image, start the HTTP server and dnsmasq."""
        self.close()  # a second prepare() replaces the services of the first
        self._no_kexec = set()  # a new run tries kexec on every host again
        self.image = None
        settings = embedded_settings(site)
        network = site.networks.get("provisioning")
        if network is None:
            raise InventoryError(
                "the embedded backend needs networks.provisioning",
                file=str(site.path),
                key="networks.provisioning",
            )
        self.site, self.settings, self._network = site, settings, network
        for r in requests:
            self._reservation(r)  # bad addresses or names fail before anything starts
        peers = (PeerPool(linger_s=settings.peer_linger_s, serve_max_s=settings.peer_serve_max_s)
                 if settings.peer_serving else None)
        server = DeployServer(
            bind=settings.bind_address,
            port=settings.http_port,
            public_url="",
            max_image_streams=max_image_streams(site, settings),
            retry_after_s=settings.image_retry_after_s,
            hold_s=settings.image_hold_s,
            # every host in flight may hold a request; beyond that they poll (plain 503s)
            max_held=settings.max_hosts_in_flight,
            peers=peers,
            min_stream_bps=settings.image_min_rate_mbps * 1e6 / 8,
        )
        server.static["pick-disk.sh"] = (RAMDISK_FILES / "pick-disk.sh").read_bytes()
        if any(r.method == "image" for r in requests):
            ramdisk = build_ramdisk(settings.ramdisk_flavour)
            server.files["ramdisk/vmlinuz"] = ramdisk.kernel
            server.files["ramdisk/initrd.img"] = ramdisk.initrd
            self.image = prepare_image(site.settings.image)
            if peers is not None:
                # a peer download not reported in 4x its time at the host link frees its peer
                link_s = self.image.size_bytes * 8 / (host_link_gbps(site) * 1e9)
                peers.stream_ttl_s = max(120.0, 4 * link_s)
            server.files[self._image_path()] = self.image.path
            server.gated_files.add(self._image_path())
        server.start()
        self.server = server
        self.base = server.public_url = settings.public_http(server.port)
        if self.image is not None:
            self.image_url = f"{self.base}/files/{self._image_path()}"
        cfg = DnsmasqConfig(
            interface=settings.interface,
            server_address=settings.server_address,
            network=network.cidr,
            gateway=network.gateway,
            dns=tuple(network.dns),
            ipxe_boot_url=f"{self.base}/ipxe/boot.ipxe",
            workdir=state_dir(site, settings),
            lease_s=settings.dhcp_lease_s,
            dynamic_range=settings.dynamic_range,
        )
        dnsmasq = DnsmasqService(cfg, netns=settings.netns)
        try:
            dnsmasq.start()
        except BaseException:
            self.close()
            raise
        self.dnsmasq = dnsmasq
        log.info(
            "embedded deploy: HTTP on %s:%s, dnsmasq on %s%s; log %s",
            settings.bind_address,
            server.port,
            settings.interface,
            f" (netns {settings.netns})" if settings.netns else "",
            cfg.log_path,
        )

    def _image_wait_s(self, timeout_s: float) -> float:
        """How long a host's ramdisk asks for an image stream before it reports a failure."""
        assert self.settings is not None
        st = self.settings
        return max(60.0, min(st.image_wait_s, timeout_s - st.callback_timeout_s - 60.0))

    def _image_path(self) -> str:
        assert self.image is not None
        return f"images/{self.image.sha256[:16]}.raw"

    def _reservation(self, request: DeployRequest) -> Reservation:
        addr = request.host.addresses.get("provisioning")
        if addr is None:
            raise InputError(
                f"host {request.host.name} has no provisioning address",
                hint="give networks.provisioning a planned cidr or pin the host's address",
            )
        return Reservation(
            mac=request.mac.lower(), address=IPAddress(addr), hostname=request.host.name
        )

    # -- one host ---------------------------------------------------------------------------
    def _client_address(self, res: Reservation) -> str | None:
        """The address the host's requests must come from: its DHCP reservation.

        A server bound to loopback is reachable from this machine only, where every request
        comes from loopback: there the address proves nothing and is not checked.
        """
        assert self.settings is not None
        try:
            loopback = IPAddress(self.settings.bind_address).is_loopback()
        except (ValueError, AddrFormatError):
            loopback = False
        return None if loopback else str(res.address)

    def _session(self, request: DeployRequest) -> HostSession:
        assert self.site is not None and self.settings is not None and self._network is not None
        site, settings, net = self.site, self.settings, self._network
        host: Host = request.host
        base = self.base
        res = self._reservation(request)
        session = HostSession(host=host.name, mac=res.mac, method=request.method, ipxe_script="",
                              address=self._client_address(res), locality=host.rack)
        if settings.peer_serving and request.method == "image":
            session.peer_key = Secret(secrets.token_urlsafe(32))
            session.peer_port = settings.peer_port
        gateway = net.gateway if net.gateway is not None else settings.server_address
        seed = cloudinit.SeedSpec(
            hostname=host.name,
            instance_id=f"{host.name}-{uuid.uuid4().hex[:12]}",
            mac=res.mac,
            address=res.address,
            network=net.cidr,
            gateway=net.gateway,
            dns=tuple(net.dns),
            ssh_user=site.settings.ssh_user,
            ssh_authorized_keys=authorized_keys(site),
            ntp_servers=tuple(site.settings.ntp_servers),
            apt_proxy=site.settings.apt_proxy,
            phone_home_url=(
                f"{base}/phone-home/{host.name}/{session.boot_token.reveal()}"
                if settings.wait_booted
                else None
            ),
        )
        hint = host.root_disk or host.profile.root_disk
        # profiles.<p>.vars.root_mirror: RAID1 root over the two disks the hint selects
        mirror = bool(host.profile.vars.get("root_mirror"))
        if mirror and request.method == "image":
            raise InventoryError(
                f"{host.name}: a mirrored root is built only by --method autoinstall",
                key=f"profiles.{host.profile.name}.vars.root_mirror",
                hint="deploy this profile with --method autoinstall, or drop root_mirror")
        if request.method == "image":
            if self.image is None:
                raise DeployError("prepare() was called without image deploys; call it again")
            session.ipxe_script = ipxe.image_script(
                base_url=base,
                host=host.name,
                mac=res.mac,
                address=res.address,
                network=net.cidr,
                gateway=gateway,
                key=session.boot_key.reveal(),
            )
            session.seed = cloudinit.seed_files(seed)
            env = {
                "DEPLOY_TOKEN": session.token.reveal(),
                "CALLBACK_URL": f"{base}/callback/{host.name}",
                # ?host= gives the host its own FIFO ticket at the stream gate
                "IMAGE_URL": f"{self.image_url}?host={host.name}",
                # the ramdisk stops asking for a stream (with a clear report) before the
                # orchestrator stops waiting: the deploy timeout less PXE time and a minute
                "IMAGE_WAIT_S": str(int(self._image_wait_s(request.timeout_s))),
                # busybox wget cannot show a 503's Retry-After: hand the ramdisk its value
                "IMAGE_RETRY_S": str(settings.image_retry_after_s),
                # a broken or corrupt stream is streamed again from the running ramdisk
                "IMAGE_ATTEMPTS": str(settings.image_attempts),
                "IMAGE_SHA256": self.image.sha256,
                "ROOT_PART": str(self.image.root_partition or ""),
                "SEED_URL": f"{base}/deploy/{host.name}/seed",
                "HINT_ARGS": hint_args(hint),
                "IMAGE_SIZE": str(self.image.size_bytes),
                # peer serving: where this host serves its verified image, the key its
                # download tickets are checked with, and its long poll ("serve"/"leave")
                "PEER_PORT": str(session.peer_port) if session.peer_key else "",
                "PEER_KEY": session.peer_key.reveal() if session.peer_key else "",
                "PEER_URL": f"{base}/deploy/{host.name}/peer" if session.peer_key else "",
                "PEER_MAX_S": str(int(settings.peer_serve_max_s)),
                # kexec into the installed OS (no second POST), unless an earlier attempt's
                # kexec did not come up: then this host reboots through its firmware
                "NEXT_BOOT": KEXEC if settings.installed_boot == KEXEC
                and host.name not in self._no_kexec else REBOOT,
            }
            session.config_env = "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items())
        else:
            if settings.autoinstall is None:
                raise InventoryError(
                    "method autoinstall needs settings.embedded.autoinstall "
                    "(kernel_url, initrd_url, iso_url of Ubuntu's netboot files)",
                    file=str(site.path),
                    key="settings.embedded.autoinstall",
                )
            a = settings.autoinstall
            session.ipxe_script = ipxe.autoinstall_script(
                base_url=base,
                host=host.name,
                kernel_url=a.kernel_url,
                initrd_url=a.initrd_url,
                iso_url=a.iso_url,
                key=session.boot_key.reveal(),
                extra_args=a.extra_args,
            )
            cb = ai.CallbackSpec(
                base_url=f"{base}/callback/{host.name}",
                token=session.token.reveal(),
                pick_disk_url=f"{base}/static/pick-disk.sh",
            )
            session.autoinstall = {
                "user-data": ai.user_data(
                    seed, hint, cb,
                    data_disk_model=host.profile.disks.data_model if host.profile.disks else None,
                    mirror=mirror),
                "meta-data": cloudinit.meta_data(seed),
            }
        return session

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        """Install one host; never raises for a host-level failure (see DeployOutcome.reason)."""
        if self.server is None or self.dnsmasq is None or self.settings is None:
            raise DeployError("the embedded backend is not prepared: call prepare() first")
        name = request.host.name
        phases: dict[str, float] = {}
        session: HostSession | None = None
        try:
            if request.bmc is None:
                raise DeployError("no BMC to drive (the embedded backend powers hosts)")
            session = self._session(request)
            self.server.register(session, retry=request.attempt > 1)
            self.dnsmasq.add(self._reservation(request))
            return self._drive(request, session, progress, phases)
        except ProvisionerError as exc:
            log.warning("deploy of %s failed: %s", name, exc.message)
            if request.bmc is not None and session is not None:
                self._power_off_quietly(request)
            return DeployOutcome(
                host=name,
                ok=False,
                reason=exc.message,
                phases=phases,
                log=self._log_of(session) or (f"hint: {exc.hint}\n" if exc.hint else ""),
            )
        finally:
            # close() may already have run (an interrupted run): then there is nothing to undo
            dnsmasq, server = self.dnsmasq, self.server
            if session is not None and dnsmasq is not None and server is not None:
                dnsmasq.remove(session.mac)
                server.unregister(name)

    @staticmethod
    def _log_of(session: HostSession | None) -> str:
        if session is None:
            return ""
        for kind in (FAILED, FINISHED):
            if kind in session.reports:
                return session.reports[kind].log
        return ""

    @staticmethod
    def _power_off_quietly(request: DeployRequest) -> None:
        # a failed host is left off rather than looping through PXE or an unknown disk
        try:
            assert request.bmc is not None
            request.bmc.power(PowerAction.OFF)
        except ProvisionerError as exc:
            log.warning("could not power off %s after its failure: %s", request.host.name, exc)

    def _drive(
        self,
        request: DeployRequest,
        session: HostSession,
        progress: ProgressFn,
        phases: dict[str, float],
    ) -> DeployOutcome:
        assert self.settings is not None and request.bmc is not None
        bmc, name, st = request.bmc, request.host.name, self.settings
        deadline = time.monotonic() + request.timeout_s

        def left(cap: float) -> float:
            return max(1.0, min(cap, deadline - time.monotonic()))

        t = time.monotonic()
        progress(name, "pxe", "one-time PXE boot, power cycle")
        bmc.set_boot(BootTarget.PXE)
        bmc.power(PowerAction.CYCLE)
        report = session.wait_for((START, FAILED), left(st.callback_timeout_s))
        phases["pxe"] = time.monotonic() - t
        if report is None:
            raise DeployError(
                f"no 'started' report within {st.callback_timeout_s:.0f} s of the power "
                f"cycle: the host did not PXE-boot the deploy {request.method}",
                hint=f"check its console and the DHCP log for {session.mac}: "
                f"{self.dnsmasq.cfg.log_path if self.dnsmasq else ''}",
            )
        if report.kind == FAILED:
            raise DeployError(failure_reason(report.log))

        t = time.monotonic()
        progress(
            name, "install", "writing the image" if request.method == "image" else "installing"
        )
        # a host that got its whole image has all it needs: it reports within the callback
        # timeout or it is declared failed then, not at the end of the deploy timeout
        report = session.wait_for((FINISHED, FAILED), left(request.timeout_s),
                                  after_image_s=st.callback_timeout_s)
        phases["install"] = time.monotonic() - t
        if report is None:
            if session.image_sent_at is not None:
                raise DeployError(
                    f"the host got its whole image but did not report 'finished' within "
                    f"{st.callback_timeout_s:.0f} s (settings.embedded.callback_timeout_s)",
                    hint="check its console: the deploy ramdisk stopped after the image "
                    "(disk write, partition growth, seed)")
            raise DeployError(f"the install did not finish within {request.timeout_s:.0f} s")
        if report.kind == FAILED:
            raise DeployError(failure_reason(report.log))

        kexec = report.next_boot == KEXEC
        t = time.monotonic()
        if kexec:  # the ramdisk jumps into the installed kernel: no power action, no POST
            progress(name, "reboot", "installed; starting the installed OS by kexec")
        else:
            progress(name, "reboot", "installed; booting from disk")
            try:
                bmc.wait_power(PowerState.OFF, left(st.power_off_timeout_s))
            except ProvisionerError:
                bmc.power(PowerAction.OFF)  # the ramdisk/installer did not power off by itself
            bmc.set_boot(BootTarget.DISK)
            bmc.power(PowerAction.ON)
        phases["reboot"] = 0.0 if kexec else time.monotonic() - t
        if st.wait_booted:
            t = time.monotonic()
            progress(name, "firstboot", "waiting for the installed OS to phone home")
            # a kexec'd kernel has no POST to wait for: it phones home within the callback timeout
            limit = min(st.callback_timeout_s, request.timeout_s) if kexec else request.timeout_s
            if session.wait_for((BOOTED,), left(limit)) is None:
                raise self._not_booted(name, kexec)
            phases["firstboot"] = time.monotonic() - t
        return DeployOutcome(host=name, ok=True, phases=phases, log=self._log_of(session))

    def _not_booted(self, name: str, kexec: bool) -> DeployError:
        """Why the installed OS is declared not up; after a kexec, the host's retry reboots."""
        if not kexec:
            return DeployError(
                "the installed OS did not phone home (cloud-init) in time",
                hint="check the host's console: did it boot from the root disk?",
            )
        assert self.settings is not None
        with self._lock:
            self._no_kexec.add(name)
        return DeployError(
            f"the installed OS did not phone home within {self.settings.callback_timeout_s:.0f} s "
            "of the ramdisk's kexec (settings.embedded.callback_timeout_s)",
            hint="check the host's console; its retry boots the disk through the "
            "firmware instead (no kexec), or set installed_boot: reboot")

    # -- tear-down --------------------------------------------------------------------------
    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        """Nothing is held per host between runs; ``erase`` is refused (data disks stay)."""
        if erase:
            raise InputError(
                "the embedded backend does not erase disks: re-imaging overwrites the root "
                "disk only and never touches data disks"
            )
        if self.server is not None:
            self.server.unregister(request.host.name)
        if self.dnsmasq is not None:
            self.dnsmasq.remove(request.mac)

    def close(self) -> None:
        """Stop dnsmasq and the HTTP server (idempotent)."""
        with self._lock:
            if self.dnsmasq is not None:
                self.dnsmasq.stop()
                self.dnsmasq = None
            if self.server is not None:
                self.server.stop()
                self.server = None
