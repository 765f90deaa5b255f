"""A throwaway PXE lab for the embedded backend's own test: one network namespace with a bridge,
a veth to the root namespace (where the deploy HTTP server runs), and one qemu VM (TCG) whose
power and boot device are driven through a small BMC over the qemu process.

Addresses are in 198.18.232.0/22, away from the shared lab's 198.18.0.0/24 and 198.18.254.0/24,
so this test can run while `provision lab up` is running.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.bmc.base import BootTarget, HostFacts, NicPort, PowerAction, PowerState
from provisioner.exceptions import BMCError

PROV_NET = "198.18.232"
LINK_HOST = "198.18.233.1"
LINK_NS = "198.18.233.2"


def die_with_parent() -> None:
    """preexec_fn for a VM: it dies with the test process, whatever ends that."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM a VM's qemu, then SIGKILL it if it is still there 10 s later."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpio_gz(tree: Path) -> bytes:
    """A gzipped newc cpio archive of ``tree``: an initramfs."""
    names = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*"))
    listing = "\n".join([".", *names]) + "\n"
    proc = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"], cwd=tree, input=listing.encode(),
        capture_output=True, check=True,
    )  # fmt: skip
    return gzip.compress(proc.stdout)


def busybox_initrd(tree: Path, init: str) -> bytes:
    """An initramfs of busybox alone (made under ``tree``) whose /init is the script ``init``."""
    busybox = shutil.which("busybox")
    assert busybox, "busybox not installed"
    (tree / "bin").mkdir(parents=True)
    shutil.copy(busybox, tree / "bin/busybox")
    (tree / "init").write_text(init)
    (tree / "init").chmod(0o755)
    return cpio_gz(tree)


@dataclass
class Netns:
    name: str
    bridge: str = "pdbr0"
    tap: str = "pdtap0"
    veth_host: str = ""
    veth_ns: str = "pdv-n"

    def up(self) -> None:
        self.veth_host = f"pdv{os.getpid() % 100000}"
        self.down()  # leftovers of a run that was killed
        sh("ip", "netns", "add", self.name)
        ns = ("ip", "-n", self.name)
        sh(*ns, "link", "set", "lo", "up")
        sh(*ns, "link", "add", self.bridge, "type", "bridge")
        sh(*ns, "addr", "add", f"{PROV_NET}.1/24", "dev", self.bridge)
        sh(*ns, "link", "set", self.bridge, "up")
        sh("ip", "netns", "exec", self.name, "ip", "tuntap", "add", self.tap, "mode", "tap")
        sh(*ns, "link", "set", self.tap, "master", self.bridge)
        sh(*ns, "link", "set", self.tap, "up")
        sh("ip", "link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns)
        sh("ip", "link", "set", self.veth_ns, "netns", self.name)
        sh("ip", "addr", "add", f"{LINK_HOST}/30", "dev", self.veth_host)
        sh("ip", "link", "set", self.veth_host, "up")
        sh(*ns, "addr", "add", f"{LINK_NS}/30", "dev", self.veth_ns)
        sh(*ns, "link", "set", self.veth_ns, "up")
        sh("ip", "netns", "exec", self.name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "route", "replace", f"{PROV_NET}.0/24", "via", LINK_NS)

    def down(self) -> None:
        sh("ip", "route", "del", f"{PROV_NET}.0/24", check=False)
        if self.veth_host:
            sh("ip", "link", "del", self.veth_host, check=False)
        sh("ip", "netns", "del", self.name, check=False)


@dataclass
class QemuVM:
    """A VM with a NIC on the namespace's tap and several disks, each with its own serial."""

    netns: Netns
    workdir: Path
    mac: str
    disks: list[tuple[str, str, Path]]  # (bus: virtio|scsi, serial, raw file)
    memory_mb: int = 768
    proc: subprocess.Popen[bytes] | None = None
    console: Path = field(init=False)

    def __post_init__(self) -> None:
        self.console = self.workdir / "console.log"

    def start(self, boot: str) -> None:
        argv = [
            "ip", "netns", "exec", self.netns.name,
            "qemu-system-x86_64", "-machine", "pc,accel=tcg", "-m", str(self.memory_mb),
            "-smp", "1", "-display", "none", "-monitor", "none", "-no-reboot",
            "-chardev", f"file,id=con,path={self.console},append=on", "-serial", "chardev:con",
            "-netdev", f"tap,id=n0,ifname={self.netns.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={self.mac}",
            "-device", "virtio-scsi-pci,id=scsi0",
            "-boot", f"order={boot}",
        ]  # fmt: skip
        for i, (bus, serial, path) in enumerate(self.disks):
            argv += ["-drive", f"if=none,id=d{i},file={path},format=raw,cache=unsafe"]
            if bus == "scsi":
                argv += ["-device", f"scsi-hd,drive=d{i},bus=scsi0.0,serial={serial}"]
            else:
                argv += ["-device", f"virtio-blk-pci,drive=d{i},serial={serial}"]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


class QemuProcessBMC:
    """The BMC protocol over a qemu process: power is the process, boot device its -boot order.

    Like a real one-time override, a boot target set here applies to the next power-on only.
    """

    def __init__(self, vm: QemuVM) -> None:
        self.vm = vm
        self.next_boot: BootTarget | None = None
        self.actions: list[str] = []

    def power_state(self) -> PowerState:
        return PowerState.ON if self.vm.running() else PowerState.OFF

    def _on(self) -> None:
        target, self.next_boot = self.next_boot, None
        self.vm.start("n" if target == BootTarget.PXE else "c")

    def power(self, action: PowerAction) -> None:
        self.actions.append(action.value)
        if action in (PowerAction.OFF, PowerAction.SHUTDOWN):
            self.vm.stop()
        elif action == PowerAction.ON:
            if not self.vm.running():
                self._on()
        else:  # restart, cycle
            self.vm.stop()
            self._on()

    def wait_power(self, state: PowerState, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.power_state() != state:
            if time.monotonic() > deadline:
                raise BMCError(f"VM did not reach {state} within {timeout_s:.0f} s")
            time.sleep(0.5)

    def set_boot(self, target: BootTarget, *, persistent: bool = False) -> None:
        self.actions.append(f"boot:{target.value}")
        self.next_boot = target

    def insert_media(self, image_url: str) -> None:
        raise BMCError("no virtual media on this test BMC")

    def eject_media(self) -> None:
        raise BMCError("no virtual media on this test BMC")

    def discover(self) -> HostFacts:
        # The VM's one NIC, cabled, as a BMC reports it: the workflow's NIC rule chooses it.
        return HostFacts(provisioning_mac=self.vm.mac, nics=[
            NicPort("vm0", self.vm.mac, link_up=True, onboard=True, location="embedded")])

    def close(self) -> None:
        pass
