"""Peer serving between real VMs: three deploy ramdisks (qemu, TCG) on one bridge pass the image
from host to host, then each boots its installed kernel by kexec.

The network is a private namespace made by the test (a bridge, one tap per VM, the deploy
server's address), with no link to anything outside it. The real DeployServer runs in this
process, its listening socket opened inside the namespace (a thread that entered it with setns),
so the test reads the sessions, the gate and the server's log directly. It has one image stream,
held requests of a few seconds and a PeerPool; each host gets the configuration the embedded
backend builds (NEXT_BOOT=kexec, PEER_*, a root-disk hint by serial), and the VMs boot the built
ramdisk with ``-kernel``/``-initrd`` and the deploy_* parameters iPXE would hand them.

Peers are made to serve, deterministically: the test takes the server's one stream before the
VMs boot and gives it back once all three are queued; the moment the first host is admitted, the
test queues a held request of its own ahead of every host (a preferred ticket), so the stream
comes back to the test when that host is done. The other two hosts can then only get the image
from peers: the second from the first, the third from whichever peer is free.

The image is small but complete: the lab image's layout (MBR, a FAT /boot with SYSLINUX,
systemd-boot and a BLS entry, an ext4 root last), its kernel the ramdisk's own, its initrd a
busybox whose /init prints a marker and powers off: the marker on a console shows that the
kexec'd kernel ran.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
from netaddr import IPAddress, IPNetwork

from provisioner.deploy import cloudinit
from provisioner.deploy.embedded.backend import hint_args
from provisioner.deploy.embedded.gate import Hold
from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.peers import PeerPool
from provisioner.deploy.embedded.sessions import FINISHED, KEXEC, VERIFIED, HostSession
from provisioner.deploy.images import builder as images
from provisioner.deploy.ramdisk import Ramdisk, build_ramdisk
from provisioner.inventory.spec import RootDiskHint
from provisioner.secrets import Secret
from tests.support import machine
from tests.support.qemu_lab import busybox_initrd, die_with_parent, sh, stop_process

pytestmark = [pytest.mark.lab, pytest.mark.slow]

T = TypeVar("T")
TOOLS = ("qemu-system-x86_64", "ip", "busybox", "cpio", "mkfs.vfat", "syslinux", "mcopy", "mmd",
         "sfdisk", "mkfs.ext4", "debugfs")
NET = "198.18.240"  # inside the test's own namespace only
SERVER_IP = f"{NET}.1"
PEER_PORT = 8081
IMAGE_NAME = "images/peer-test.raw"
BOOT_MB = 20  # the lab image's /boot, smaller: the kernel, the tiny initrd, the boot loaders
ROOT_DISK_MB = 128
MARKER = b"PROVISIONER-DATA-MARKER-do-not-touch\n"
OS_UP = "INSTALLED-OS-UP by kexec"
LIMIT_S = 300.0  # every VM boots, deploys and kexecs within this (a hung test stops here)
INSTALLED_INIT = f"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc
/bin/busybox mount -t proc proc /proc
/bin/busybox echo "{OS_UP}: cmdline=[$(/bin/busybox cat /proc/cmdline)]"
/bin/busybox poweroff -f
"""
_CLONE_NEWNET = 0x40000000


@pytest.fixture(scope="module")
def ramdisk() -> Ramdisk:
    machine.require("root", "tun")
    machine.require_tools([*TOOLS, str(images.SYSTEMD_BOOT)])
    return build_ramdisk()


# -- the image ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    path: Path
    sha256: str
    size: int
    root_uuid: str


def _build_image(tmp: Path, rd: Ramdisk, monkeypatch: pytest.MonkeyPatch) -> Image:
    """The lab image's layout (images._boot_partition, images._assemble), made without loop
    devices: /boot holds the ramdisk's kernel and the reporting initrd, the ext4 root is last."""
    kver = rd.kernel_version
    kernels = tmp / "kernels"  # what _boot_partition copies to /boot
    (kernels / "boot").mkdir(parents=True)
    shutil.copy(rd.kernel, kernels / f"boot/vmlinuz-{kver}")
    (kernels / f"boot/initrd.img-{kver}").write_bytes(
        busybox_initrd(tmp / "tiny", INSTALLED_INIT))
    root = tmp / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=debian\nNAME=peer-test\n")
    root_uuid = str(uuid.uuid4())
    work = tmp / "work"
    work.mkdir()
    monkeypatch.setattr(images, "BOOT_MB", BOOT_MB)
    boot = images._boot_partition(kernels, kver, root_uuid, work)
    rootfs = tmp / "root.ext4"
    sh("mkfs.ext4", "-q", "-U", root_uuid, "-d", str(root), str(rootfs), "8M")
    path = tmp / "image.raw"
    images._assemble(boot, rootfs, path)
    data = path.read_bytes()
    return Image(path, hashlib.sha256(data).hexdigest(), len(data), root_uuid)


def _partitions(disk: Path) -> list[dict[str, object]]:
    """The disk's partitions as sfdisk shows them, less their node names (the file's)."""
    out = sh("sfdisk", "-J", str(disk)).stdout
    parts: list[dict[str, object]] = json.loads(out)["partitiontable"]["partitions"]
    return [{k: v for k, v in p.items() if k != "node"} for p in parts]


# -- the network ----------------------------------------------------------------------------


def _netns_up(name: str, taps: list[str]) -> None:
    sh("ip", "netns", "add", name)
    ns = ("ip", "-n", name)
    sh(*ns, "link", "set", "lo", "up")
    sh(*ns, "link", "add", "br0", "type", "bridge")
    sh(*ns, "addr", "add", f"{SERVER_IP}/24", "dev", "br0")
    sh(*ns, "link", "set", "br0", "up")
    for tap in taps:
        sh("ip", "netns", "exec", name, "ip", "tuntap", "add", tap, "mode", "tap")
        sh(*ns, "link", "set", tap, "master", "br0")
        sh(*ns, "link", "set", tap, "up")


def _in_netns(name: str, fn: Callable[[], T]) -> T:
    """``fn()`` in a thread that entered the namespace: the sockets it opens (and the threads it
    starts) live there, while the rest of this process stays where it is."""
    out: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns into {name}: {os.strerror(e)}")
            finally:
                os.close(fd)
            out.append(fn())
        except BaseException as exc:  # handed to the caller
            err.append(exc)

    t = threading.Thread(target=run, name=f"in-{name}")
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


# -- the VMs --------------------------------------------------------------------------------


@dataclass
class VM:
    host: str
    ip: str
    mac: str
    tap: str
    workdir: Path
    root: Path = field(init=False)
    data: Path = field(init=False)
    console: Path = field(init=False)
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True)
        self.root = self.workdir / "root.raw"
        self.data = self.workdir / "data.raw"
        self.console = self.workdir / "console.log"
        with self.root.open("wb") as f:
            f.truncate(ROOT_DISK_MB << 20)
        with self.data.open("wb") as f:
            f.truncate(8 << 20)
            f.write(MARKER)

    @property
    def root_serial(self) -> str:
        return f"PQ-ROOT-{self.host[-1]}"

    def start(self, netns: str, rd: Ramdisk, append: str) -> None:
        argv = [
            "ip", "netns", "exec", netns,
            "qemu-system-x86_64", "-machine", "pc,accel=tcg", "-m", "512", "-smp", "1",
            "-display", "none", "-monitor", "none", "-no-reboot",
            "-kernel", str(rd.kernel), "-initrd", str(rd.initrd), "-append", append,
            "-chardev", f"file,id=con,path={self.console}", "-serial", "chardev:con",
            "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={self.mac}",
            # the data disk first (vda): the hint, not the order, picks the root disk
            "-drive", f"if=none,id=d0,file={self.data},format=raw,cache=unsafe",
            "-device", f"virtio-blk-pci,drive=d0,serial=PQ-DATA-{self.host[-1]}",
            "-drive", f"if=none,id=d1,file={self.root},format=raw,cache=unsafe",
            "-device", f"virtio-blk-pci,drive=d1,serial={self.root_serial}",
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        stop_process(self.proc)

    def log(self) -> str:
        if not self.console.exists():
            return ""
        return self.console.read_text(errors="replace").replace("\r", "")


def _tails(vms: list[VM]) -> str:
    return "".join(f"\n--- {vm.host} console ---\n{vm.log()[-2500:]}" for vm in vms)


def _wait(cond: Callable[[], bool], what: str, vms: list[VM], deadline: float,
          *, all_running: bool = True) -> None:
    # polls for a state the VMs reach on their own; the deadline only stops a hung test
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}{_tails(vms)}"
        if all_running:
            gone = [vm.host for vm in vms if not vm.running()]
            assert not gone, f"{gone} stopped while waiting for {what}{_tails(vms)}"
        time.sleep(0.05)


# -- the hosts' sessions --------------------------------------------------------------------


class _Host(HostSession):
    """A HostSession that tells the test the moment the server admits one of its streams."""

    on_admitted: Callable[[HostSession], None] | None = None

    def image_admitted(self) -> None:
        super().image_admitted()
        if self.on_admitted is not None:
            self.on_admitted(self)


def _session(server: DeployServer, vm: VM, image: Image) -> _Host:
    """The session the embedded backend makes for an image deploy (backend._session)."""
    s = _Host(host=vm.host, mac=vm.mac, method="image", ipxe_script="", address=vm.ip,
              locality="r1", peer_key=Secret(uuid.uuid4().hex + uuid.uuid4().hex),
              peer_port=PEER_PORT)
    assert s.peer_key is not None
    s.seed = cloudinit.seed_files(cloudinit.SeedSpec(
        hostname=vm.host, instance_id=f"{vm.host}-{uuid.uuid4().hex[:12]}", mac=vm.mac,
        address=IPAddress(vm.ip), network=IPNetwork(f"{NET}.0/24"),
        ssh_authorized_keys=("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPeerTestKeyOnly peer@test",)))
    base = f"http://{SERVER_IP}:{server.port}"
    env = {
        "DEPLOY_TOKEN": s.token.reveal(),
        "CALLBACK_URL": f"{base}/callback/{vm.host}",
        "IMAGE_URL": f"{base}/files/{IMAGE_NAME}?host={vm.host}",
        "IMAGE_WAIT_S": str(int(LIMIT_S)),
        "IMAGE_RETRY_S": str(server.retry_after_s),
        "IMAGE_ATTEMPTS": "2",
        "IMAGE_SHA256": image.sha256,
        "ROOT_PART": "2",
        "SEED_URL": f"{base}/deploy/{vm.host}/seed",
        "HINT_ARGS": hint_args(RootDiskHint(serial=vm.root_serial)),
        "IMAGE_SIZE": str(image.size),
        "PEER_PORT": str(s.peer_port),
        "PEER_KEY": s.peer_key.reveal(),
        "PEER_URL": f"{base}/deploy/{vm.host}/peer",
        "PEER_MAX_S": "120",
        "NEXT_BOOT": KEXEC,
    }
    s.config_env = "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items())
    server.register(s)
    return s


def _append(server: DeployServer, vm: VM, s: HostSession) -> str:
    """The kernel command line the host's iPXE script gives the ramdisk (ipxe.image_script)."""
    return (f"console=ttyS0 panic=-1 quiet deploy_host={vm.host} deploy_mac={vm.mac} "
            f"deploy_ip={vm.ip}/24 deploy_server=http://{SERVER_IP}:{server.port} "
            f"deploy_key={s.boot_key.reveal()}")


# -- the test -------------------------------------------------------------------------------


def test_three_vms_pass_the_image_from_peer_to_peer_and_boot_it_by_kexec(
        ramdisk: Ramdisk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    t0 = time.monotonic()
    caplog.set_level(logging.DEBUG, logger="provisioner")
    image = _build_image(tmp_path, ramdisk, monkeypatch)
    pool = PeerPool(linger_s=60, serve_max_s=120)
    server = DeployServer(bind=SERVER_IP, port=0, public_url="", max_image_streams=1,
                          retry_after_s=1, hold_s=3, peers=pool)
    server.files[IMAGE_NAME] = image.path
    server.gated_files.add(IMAGE_NAME)
    gate = server.gate
    assert gate is not None
    vms = [VM(f"pq-host{i}", f"{NET}.{10 + i}", f"52:54:00:f0:00:1{i}", f"pqtap{i}",
              tmp_path / f"pq-host{i}") for i in (1, 2, 3)]
    netns = f"pdpq-{uuid.uuid4().hex[:8]}"
    first: list[HostSession] = []
    holds: list[Hold] = []
    back = threading.Event()  # the server's stream came back to the test after the first host
    lock = threading.Lock()

    def admitted(s: HostSession) -> None:
        # in the server's request thread, before a byte of the stream is sent
        with lock:
            if first:
                return
            first.append(s)
            gate.prefer("test")
            holds.append(gate.hold("test", back.set))  # ahead of every host, behind this stream

    try:
        _netns_up(netns, [vm.tap for vm in vms])
        _in_netns(netns, server.start)
        sessions = [_session(server, vm, image) for vm in vms]
        for s in sessions:
            s.on_admitted = admitted
        # the server's only stream is busy until all three hosts want the image
        assert gate.try_admit("blocker").admitted
        booted = time.monotonic()
        for vm, s in zip(vms, sessions, strict=True):
            vm.start(netns, ramdisk, _append(server, vm, s))
        deadline = booted + LIMIT_S
        hosts = {f"host {vm.host}" for vm in vms}
        _wait(lambda: hosts <= set(gate.waiting()), "all three hosts to queue for the image",
              vms, deadline)
        queued = time.monotonic()
        gate.release("blocker")

        def deployed() -> bool:
            # a failed download from a peer drops it; with the server's stream kept by the test
            # the hosts still waiting would wait out the deadline: fail at once
            assert pool.dropped == 0, (
                f"a host's download from a peer failed (the gate dropped the peer){_tails(vms)}")
            return all(not vm.running() for vm in vms)

        _wait(deployed, "every VM to deploy and kexec", vms, deadline, all_running=False)
        done = time.monotonic()
    finally:
        for vm in vms:
            vm.stop()
        server.stop()
        sh("ip", "netns", "del", netns, check=False)
    logs = {vm.host: vm.log() for vm in vms}
    ips = {vm.host: vm.ip for vm in vms}
    print(f"\nimage {image.size >> 20} MiB; all queued {queued - booted:.0f} s after boot, "
          f"all done {done - booted:.0f} s after boot; test {time.monotonic() - t0:.0f} s; "
          f"{gate.stats()}")

    # every host verified, finished with kexec, and the kexec'd kernel ran
    for vm, s in zip(vms, sessions, strict=True):
        log = logs[vm.host]
        assert VERIFIED in s.reports and FINISHED in s.reports, f"{s!r}{_tails([vm])}"
        assert s.reports[FINISHED].next_boot == KEXEC
        assert f"sha256 verified: {image.sha256}" in log
        assert "root disk: /dev/vdb" in log  # by its serial, not the first disk (vda)
        assert (f"kexec: loaded /vmlinuz + /initrd.img (BLS loader/entries/provisioner.conf on "
                f"/dev/vdb1; kexec -s) root=UUID={image.root_uuid} ro") in log, log[-3000:]
        assert log.index("deploy: done, starting the installed OS by kexec") < log.index(OS_UP)
        assert f"{OS_UP}: cmdline=[root=UUID={image.root_uuid} ro console=tty0" in log

    # the first host streamed from the server, then the stream went back to the test: the
    # other two got the image from peers, each from a peer that served it then
    assert len(first) == 1 and back.is_set()
    assert holds[0].admission is not None and holds[0].admission.admitted
    source = first[0].host
    assert "came from peer" not in logs[source]
    stats = gate.stats()
    assert stats.peer_admitted == 2 and stats.peers == 0
    served: set[str] = set()
    for vm in vms:
        if vm.host == source:
            continue
        log = logs[vm.host]
        peer = next((h for h, ip in ips.items()
                     if f"deploy: the image came from peer {ip}:{PEER_PORT}\n" in log), None)
        assert peer is not None and peer != vm.host, log[-3000:]
        served.add(peer)
    assert source in served  # the second host could only be served by the first
    for host in served:
        log = logs[host]
        start = log.index(f"deploy: serving the image to peers on port {PEER_PORT}")
        stop = log.index("deploy: stopped serving peers after")
        assert start < stop < log.index("deploy: done, starting the installed OS by kexec")
        assert log[stop:].split("\n", 1)[0].endswith("(leave)")
    server_log = caplog.text
    assert server_log.count("handed to peer") == 2

    # the disks: the image's boot code, table entry and /boot exactly; the root partition grown
    # in place and seeded; the data disk untouched
    img = image.path.read_bytes()
    want = _partitions(image.path)
    for vm, s in zip(vms, sessions, strict=True):
        disk = vm.root.read_bytes()
        parts = _partitions(vm.root)
        assert disk[:440] == img[:440]
        assert parts[0] == want[0] and parts[1]["start"] == want[1]["start"]
        assert parts[1]["size"] == (ROOT_DISK_MB << 11) - int(str(want[1]["start"]))
        b0, bn = int(str(want[0]["start"])) * 512, int(str(want[0]["size"])) * 512
        assert disk[b0:b0 + bn] == img[b0:b0 + bn], f"{vm.host}: /boot differs from the image"
        r0 = int(str(parts[1]["start"])) * 512
        part = vm.workdir / "rootpart.ext4"
        part.write_bytes(disk[r0:])
        meta = sh("debugfs", "-R", "cat /var/lib/cloud/seed/nocloud/meta-data", str(part))
        assert meta.stdout == s.seed["meta-data"], meta.stderr
        with vm.data.open("rb") as f:
            assert f.read(len(MARKER)) == MARKER

    # no peer key, ticket or token in any console or in the server's log
    secrets = [s.token.reveal() for s in sessions]
    for s in sessions:
        assert s.peer_key is not None
        secrets.append(s.peer_key.reveal())
        secrets += [s.peer_ticket(vm.ip) for vm in vms]
    boot_keys = [s.boot_key.reveal() for s in sessions]  # on the kernel command line
    for where, text in [*logs.items(), ("the server's log", server_log)]:
        leaked = [x[:8] + "..." for x in secrets if x in text]
        if where == "the server's log":
            leaked += [x[:8] + "..." for x in boot_keys if x in text]
        assert not leaked, f"{where} shows secrets {leaked}"
