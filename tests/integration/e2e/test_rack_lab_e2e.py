"""`provision rack` and `provision reimage` end to end on the virtual lab: real BMCs
(sushy-emulator over libvirt), real PXE (dnsmasq + iPXE), real qemu VMs installing from the
deploy ramdisk, real SSH and Ansible.

Three lab hosts with three disks each; the root disk is enumerated last. lab-host03's root-disk
hint is changed to a serial no disk has. Checked:
- `provision rack` interrupted (Ctrl-C) once site.yml runs on both host01 and host02 (each its
  wave, as they come up: Ansible reported a task result for each) leaves them installed
  (`deployed`); the next `provision rack` continues them with site.yml only (same boot ids, no
  PXE), their host keys read again;
- host01 and host02 deploy: the image lands on the disk the hint names (not the first one
  enumerated), the ramdisk starts the installed OS by kexec (the lab site's installed_boot;
  no second boot) after offering its image to peers, SSH works, `ansible -m ping` passes, and the whole of
  site.yml runs on them through the lab's apt proxy: chrony, Debian's docker.io (the lab's
  profile sets docker_package_source: distribution; pinned, held, running with the role's
  daemon.json) and node_exporter, the GPU/RDMA/PCIe/ZFS stages skipping;
- `provision health lab-host01 --capture-topology` (no GPUs) refuses and writes nothing, and
  Ansible then still reads the site as its inventory (`ansible -m ping`);
- `provision health` reports what applies and "not applicable" for GPU checks, and node_exporter
  on each host serves those verdicts from its textfile collector;
- host03 ends `failed` with the reason while the others finish;
- a marker on a data disk of host01 survives `provision reimage lab-host01`;
- during that re-image, host03 (not targeted) PXE-boots (`provision boot`/`power` on it work:
  the re-image locks host01 only) and never gets a DHCP offer (dnsmasq log), and `provision
  health lab-host02` runs to its end;
- host02 is not touched by the re-image (same boot id); `maintenance` then `--off` returns it to
  its state, and `provision rack` then leaves it alone;
- `provision rack` on a pseudo-terminal shows live progress: the image step before any host
  PXE-boots, the site.yml log's path when it opens (the file grows while the playbook runs),
  Ansible's tasks while they run, and "done" only after site.yml.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.deploy.embedded.dnsmasq import parse_ignored, parse_offers
from provisioner.lab.network import free_slot
from tests.support import machine
from tests.support.signals import terminal_signals
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
# A lab of its own (namespace, address slot, inventory and state dirs), so the test never
# touches a lab a person is using, and two runs on one machine do not collide.
NETNS = f"pe2e{os.getpid() % 10000}"
BAD_SERIAL = "NO-SUCH-DISK-SERIAL"
MARKER = "provisioner-e2e-marker: data disks survive re-image"


_T0 = time.monotonic()


def _phase(name: str) -> None:
    """Print how long the run has taken when a phase starts (shown with `pytest -s`; the suite's
    time is watched, and this says which phase to look at)."""
    print(f"[e2e {time.monotonic() - _T0:7.1f} s] {name}", file=sys.stderr, flush=True)


def _require() -> None:
    machine.require("root", "tun")
    machine.require_tools(["qemu-system-x86_64", "libvirtd", "dnsmasq", "debootstrap", "ssh"])


class Lab:
    """The e2e lab's environment and the commands run against it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {
            **os.environ,
            "PROVISIONER_LAB_NETNS": NETNS,
            "PROVISIONER_LAB_SLOT": str(free_slot(NETNS)),
            "PROVISIONER_INVENTORY": str(tmp / "inventory"),
            "PROVISIONER_STATE_DIR": str(tmp / "state"),
            "PROVISIONER_SITE": "lab",
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        }
        self.site_dir = tmp / "inventory" / "lab"

    def provision(self, *args: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [str(BIN / "provision"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"provision {' '.join(args)} -> {res.returncode}\n{res.stdout}\n{res.stderr}")
        return res

    def site(self) -> dict:
        import yaml

        return yaml.safe_load((self.site_dir / "site.yml").read_text())

    def address(self, host: str) -> str:
        res = self.provision("inventory", "show", "--json")
        return next(h["addresses"]["provisioning"] for h in json.loads(res.stdout)["hosts"] if h["name"] == host)

    def ssh(self, host: str, command: str, *, check: bool = True) -> str:
        site = self.site()
        key = site["settings"]["ssh_private_key"]
        user = site["settings"]["ssh_user"]
        res = subprocess.run(
            [
                "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
                "-i", key, f"{user}@{self.address(host)}", command,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )  # fmt: skip
        if check and res.returncode != 0:
            raise AssertionError(f"ssh {host} {command!r} -> {res.returncode}: {res.stderr}")
        return res.stdout.strip()

    def console(self, host: str) -> str:
        """The VM's serial console so far (appended across boots): the ramdisk logs there."""
        for rack in self.site()["racks"]:
            for h in rack["hosts"]:
                if h.get("name") == host:
                    return Path(h["vars"]["lab_console_log"]).read_text(errors="replace")
        raise AssertionError(f"{host} not in the lab site")

    def dnsmasq_log(self) -> Path | None:
        state = Path(self.env.get("PROVISIONER_LAB_STATE_DIR", f"/var/lib/provisioner-lab/{NETNS}"))
        logs = sorted(state.rglob("dnsmasq.log"))
        return logs[0] if logs else None


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require()
    lab = Lab(tmp_path_factory.mktemp("e2e"))
    lab.provision("lab", "down", check=False)  # leftovers of a crashed earlier run
    _phase("lab up")
    lab.provision("lab", "up", "--hosts", "3", "--disks", "3", timeout=900)
    site_file = lab.site_dir / "site.yml"
    text = site_file.read_text()
    assert "PLAB-HOST03-DISK2" in text
    site_file.write_text(text.replace("PLAB-HOST03-DISK2", BAD_SERIAL))
    try:
        yield lab
    finally:
        _phase("lab down")
        res = lab.provision("lab", "down", check=False)
        assert res.returncode == 0, res.stderr
        _phase("end")


def root_disk_serial(lab: Lab, host: str) -> str:
    # the serial of the disk holding / (virtio exposes it in sysfs)
    return lab.ssh(
        host,
        "src=$(findmnt -no SOURCE /); disk=$(lsblk -no PKNAME \"$src\" | head -1); "
        "echo \"$disk $(cat /sys/block/$disk/serial)\"",
    )


def data_disk(lab: Lab, host: str, serial: str) -> str:
    return lab.ssh(
        host,
        f"for d in /sys/block/vd*; do if [ \"$(cat $d/serial)\" = {serial} ]; then basename $d; fi; done",
    )


def test_rack_then_reimage(lab: Lab) -> None:
    _phase('provision rack, Ctrl-C once site.yml runs on both: the hosts stay installed')
    _rack_interrupted_in_site_yml(lab, ("lab-host01", "lab-host02"), "lab-host03")
    states = {s["host"]: s for s in json.loads(lab.provision("status", "--json").stdout)}
    for host in ("lab-host01", "lab-host02"):
        assert states[host]["state"] == "deployed", states[host]
    boots = {h: lab.ssh(h, "cat /proc/sys/kernel/random/boot_id") for h in ("lab-host01",
                                                                             "lab-host02")}

    _phase('provision rack again: site.yml only for the installed hosts, the third fails again')
    # no --playbook: the whole of site.yml, as `provision rack` runs it on a real rack; run on a
    # pseudo-terminal like a person would, so the live progress view is what it prints
    run = _rack_under_pty(lab, "lab-host01", "lab-host02", "lab-host03")
    assert run.returncode == 3, run.text
    by_host = {e["host"]: e for e in run.events if e["kind"] == "done"}
    assert by_host["lab-host01"]["data"]["status"] == "ok", by_host
    assert by_host["lab-host02"]["data"]["status"] == "ok", by_host
    assert by_host["lab-host01"]["message"] == "configured"
    assert by_host["lab-host03"]["data"]["status"] == "failed"
    assert BAD_SERIAL in by_host["lab-host03"]["message"]
    _assert_progress_was_live(run)
    for host in ("lab-host01", "lab-host02"):  # continued, not installed again
        phases = [e["phase"] for e in run.events if e["kind"] == "phase" and e["host"] == host]
        assert "resume" in phases and "pxe" not in phases, phases
        assert lab.ssh(host, "cat /proc/sys/kernel/random/boot_id") == boots[host]

    states = {s["host"]: s for s in json.loads(lab.provision("status", "--json").stdout)}
    assert states["lab-host01"]["state"] == "configured"
    assert states["lab-host03"]["state"] == "failed"
    assert BAD_SERIAL in (states["lab-host03"]["last_error"] or "")

    _phase('kexec into the installed OS; each host offered its image to peers')
    # the lab site: peer serving, installed_boot: kexec; a stream per host, so each host offers
    # its image, nobody waits, and the server lets it go at once (VM-to-VM downloads:
    # tests/integration/deploy/test_deploy_peer_qemu.py)
    consoles = {h: lab.console(h) for h in ("lab-host01", "lab-host02")}
    for host, text in consoles.items():
        assert "deploy: kexec: loaded " in text, host  # the ramdisk found the installed entry
        assert "deploy: done, starting the installed OS by kexec" in text, host
        assert "deploy: done, powering off" not in text, host
        assert "deploy: serving the image to peers on port 8081" in text, host
        assert "deploy: stopped serving peers after" in text, host
    from_peer = [h for h, t in consoles.items() if "the image came from peer" in t]
    for host in from_peer:  # the other host served it, from its own address
        other = ({"lab-host01", "lab-host02"} - {host}).pop()
        assert f"the image came from peer {lab.address(other)}:8081" in consoles[host]
    _phase(f'... images from a peer: {from_peer or "none"}')

    _phase('the image is on the hinted disk, which Linux enumerated last')
    for host in ("lab-host01", "lab-host02"):
        disk, serial = root_disk_serial(lab, host).split()
        assert serial == f"PLAB-{host.upper().replace('LAB-', '')}-DISK2"
        assert disk != "vda", "the OS landed on the first enumerated disk"

    _phase('--capture-topology on a GPU-less host writes nothing; Ansible still reads the site')
    capture = lab.provision("health", "lab-host01", "--capture-topology", check=False)
    assert capture.returncode != 0 and "has no GPUs" in capture.stderr, capture.stdout + capture.stderr
    assert not list(lab.site_dir.rglob("topology")), "a topology folder appeared in the inventory"

    _phase('Ansible reaches them through the site inventory')
    ping = subprocess.run(
        [str(BIN / "ansible"), "-i", str(lab.site_dir), "lab-host01:lab-host02", "-m", "ansible.builtin.ping"],
        env={**lab.env, "ANSIBLE_HOST_KEY_CHECKING": "False"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert ping.stdout.count("SUCCESS") == 2

    _phase("site.yml's base and container stages took effect")
    for host in ("lab-host01", "lab-host02"):
        info = json.loads(lab.ssh(host, "sudo docker info --format '{{json .}}'"))
        assert info["DockerRootDir"] == "/var/lib/docker"
        assert info["DefaultRuntime"] == "runc"  # no GPUs: no NVIDIA runtime
        assert info["CgroupDriver"] == "systemd" and info["LiveRestoreEnabled"] is True
        assert info["LoggingDriver"] == "json-file"
        held = lab.ssh(host, "dpkg-query -W -f '${Package} ${Status}\\n' docker.io containerd runc")
        assert held.splitlines() == [f"{p} hold ok installed" for p in ("containerd", "docker.io", "runc")]
        assert lab.ssh(host, "sudo systemctl is-active chrony docker").split() == ["active", "active"]

    _phase('health: what applies passes, GPU/IB checks say not applicable, node_exporter serves it')
    res = lab.provision("health", "lab-host01", "lab-host02", "--json", check=False)
    assert res.returncode in (0, 3), res.stdout + res.stderr
    docs = {d["host"]: d for d in map(json.loads, (x for x in res.stdout.splitlines() if x.startswith("{")))}
    for host in ("lab-host01", "lab-host02"):
        checks = {c["id"]: c["status"] for c in docs[host]["checks"]}
        assert checks["host.reachable"] == "pass"
        assert checks["gpu.count"] == "not_applicable"
        with urllib.request.urlopen(f"http://{lab.address(host)}:9100/metrics", timeout=30) as r:
            metrics = r.read().decode()
        assert f'node_health_check{{check="gpu.count",host="{host}",status="not_applicable"}} 1' in metrics

    _phase('a marker on a data disk of host01')
    dev = data_disk(lab, "lab-host01", "PLAB-HOST01-DISK1")
    assert dev
    lab.ssh(
        "lab-host01",
        f"sudo sh -ec 'mkfs.ext4 -q -F /dev/{dev}; mkdir -p /mnt/data; mount /dev/{dev} /mnt/data; "
        f"echo \"{MARKER}\" > /mnt/data/marker; umount /mnt/data'",
    )
    boot01 = lab.ssh("lab-host01", "cat /proc/sys/kernel/random/boot_id")
    boot02 = lab.ssh("lab-host02", "cat /proc/sys/kernel/random/boot_id")

    _phase('maintenance, then --off, then rack: host02 is left as it was')
    before = {s["host"]: s["state"] for s in json.loads(lab.provision("status", "--json").stdout)}
    lab.provision("maintenance", "lab-host02", "-r", "e2e: reseat a cable")
    off = lab.provision("maintenance", "lab-host02", "--off")
    assert f"lab-host02: maintenance -> {before['lab-host02']}" in off.stdout, off.stdout
    again = json.loads(lab.provision("rack", "lab-host02", "--json").stdout)
    assert again["hosts"][0]["status"] == "skipped", again
    assert again["hosts"][0]["reason"] == f"already {before['lab-host02']}"

    _phase('re-image host01 only, while host03 asks for DHCP and host02 is checked')
    log = lab.dnsmasq_log()
    offset = log.stat().st_size if log else 0
    reimage = subprocess.Popen(
        [str(BIN / "provision"), "reimage", "lab-host01", "--yes", "--skip-configure", "--json"],
        env=lab.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        # wait until the re-image's dnsmasq serves, then make host03 PXE-boot
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            log = lab.dnsmasq_log()
            if log and log.stat().st_size > offset and "started" in log.read_text()[offset:]:
                break
            time.sleep(2)
        else:
            pytest.fail("the re-image never started dnsmasq")
        _pxe_boot_untargeted(lab, "lab-host03")
        # per-host locks: the re-image holds host01 only, so host02's health runs meanwhile
        health = lab.provision("health", "lab-host02", "--json", check=False)
        assert health.returncode in (0, 3), health.stdout + health.stderr
        assert "in use by" not in health.stderr
        assert reimage.poll() is None, "the re-image ended before the health run: not at once"
        out, err = reimage.communicate(timeout=1800)
    finally:
        if reimage.poll() is None:
            reimage.kill()
    assert reimage.returncode == 0, out + err
    assert json.loads(out)["hosts"][0]["status"] == "ok"
    assert json.loads(out)["hosts"][0]["result"] == "deployed"  # --skip-configure: not configured

    text = log.read_text()[offset:] if log else ""
    host03_mac = _mac_of(lab, "lab-host03")
    assert host03_mac not in parse_offers(text), "an untargeted host got a DHCP offer"
    assert host03_mac in parse_ignored(text), "host03 never asked for DHCP: the check proved nothing"

    _phase('host01 is new, its data disk kept its marker, host02 was not touched')
    assert lab.ssh("lab-host01", "cat /proc/sys/kernel/random/boot_id") != boot01
    disk, serial = root_disk_serial(lab, "lab-host01").split()
    assert serial == "PLAB-HOST01-DISK2"
    dev = data_disk(lab, "lab-host01", "PLAB-HOST01-DISK1")
    got = lab.ssh(
        "lab-host01",
        f"sudo sh -ec 'mkdir -p /mnt/data; mount /dev/{dev} /mnt/data; cat /mnt/data/marker; umount /mnt/data'",
    )
    assert got == MARKER
    assert lab.ssh("lab-host02", "cat /proc/sys/kernel/random/boot_id") == boot02

    _phase('a second rack run changes nothing')
    again = lab.provision("rack", "lab-host01", "lab-host02", "--skip-configure", "--json")
    assert {h["status"] for h in json.loads(again.stdout)["hosts"]} == {"skipped"}

    _bios_baseline_on_the_vms(lab)


def _bios_baseline_on_the_vms(lab: Lab) -> None:
    """The lab profile's BIOS baseline (ProcTurboMode Disabled) against sushy-emulator's
    libvirt driver, which keeps each VM's attributes in its domain definition."""
    _phase("bios baseline")
    res = lab.provision("bios", "check", "--json", check=False)
    assert res.returncode == 3, res.stdout + res.stderr
    items = {r["host"]: r["items"] for r in json.loads(res.stdout)}
    assert items["lab-host03"] == [{"kind": "bios", "name": "ProcTurboMode",
                                    "entry": "ProcTurboMode", "have": "Enabled",
                                    "want": "Disabled", "status": "drift",
                                    "hint": "provision bios apply sets it (one reset)"}]
    # host01 is configured (in use): spared; host03 failed its deploy: reset, read back.
    res = lab.provision("bios", "apply", "lab-host01", "lab-host03", "--yes", "--json",
                        "--timeout", "300", check=False)
    assert res.returncode == 3, res.stdout + res.stderr
    got = {r["host"]: r for r in json.loads(res.stdout)}
    assert got["lab-host01"]["reason"] == "serving"
    assert got["lab-host03"]["ok"] and got["lab-host03"]["detail"] == \
        "applied ProcTurboMode=Disabled", got["lab-host03"]
    again = lab.provision("bios", "apply", "lab-host03", "--yes", "--json")
    assert json.loads(again.stdout)[0]["detail"] == "nothing to change"
    check = json.loads(lab.provision("bios", "check", "lab-host03", "--json").stdout)
    assert check[0]["compliant"] is True
    # A misspelt attribute is refused before anything is sent, with the right name offered.
    typo = lab.site_dir.parent / "lab-typo"
    shutil.copytree(lab.site_dir, typo)
    site_file = typo / "site.yml"
    site_file.write_text(site_file.read_text().replace("ProcTurboMode:", "ProcTurboMod:"))
    res = lab.provision("bios", "apply", "lab-host03", "--site", str(site_file), "--yes",
                        "--json", check=False)
    assert res.returncode == 3, res.stdout + res.stderr
    (refused,) = json.loads(res.stdout)
    assert refused["reason"] == "baseline refused"
    assert "did you mean 'ProcTurboMode'" in refused["error"]


def _rack_interrupted_in_site_yml(lab: Lab, in_site_yml: tuple[str, ...], *others: str) -> None:
    """`provision rack`, and Ctrl-C (SIGINT to its process group, ansible-playbook included, as a
    terminal sends it) once Ansible has reported a task result for each of ``in_site_yml``:
    every one of them is in a site.yml wave then, none still installing (an install cut by the
    Ctrl-C would start over, and the next run would not be the resume under test)."""
    hosts = (*in_site_yml, *others)
    events_file = lab.tmp / f"rack-interrupted-{time.monotonic_ns()}.jsonl"
    err = lab.tmp / "rack-interrupted.stderr"
    with err.open("w") as errf:
        proc = subprocess.Popen(
            [str(BIN / "provision"), "rack", *hosts, "--events", str(events_file)],
            env=lab.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf,
            start_new_session=True, preexec_fn=terminal_signals,  # Ctrl-C works as on a terminal
        )  # fmt: skip
    try:
        def all_in_site_yml() -> bool:
            assert proc.poll() is None, err.read_text()[-4000:]
            text = events_file.read_text() if events_file.exists() else ""
            # whole lines only: the run may be writing the last one
            seen = [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]
            # a host whose run ended before the others reached site.yml (its install failed, or
            # its site.yml ended first): no interrupt can catch them all in site.yml
            done = [f"{e['host']}: {e['message']}" for e in seen
                    if e.get("kind") == "done" and e.get("host") in in_site_yml]
            assert not done, f"ended before all of {in_site_yml} ran site.yml: {done}"
            reached = {e.get("host") for e in seen if e.get("kind") == "result"}
            return set(in_site_yml) <= reached

        wait_until(all_in_site_yml, f"a site.yml task result for each of {in_site_yml}",
                   limit_s=3600, poll_s=1.0)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=1800) == 130, err.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    interrupted = [json.loads(line) for line in events_file.read_text().splitlines()
                   if line.strip()]
    stopped = {e["host"] for e in interrupted if e["kind"] == "phase" and e["phase"] == "interrupted"}
    assert set(in_site_yml) <= stopped, (stopped, err.read_text()[-4000:])


@dataclass
class PtyRun:
    """What `provision rack` printed on a pseudo-terminal, with when, and its site.yml log."""

    returncode: int
    chunks: list[tuple[float, str]]  # (monotonic time, text without terminal control codes)
    log_sizes: list[tuple[float, int]]  # (monotonic time, size of the site.yml log) while it ran
    log: Path | None
    ended: float
    events: list[dict]

    @property
    def text(self) -> str:
        return "".join(c for _, c in self.chunks)

    def first(self, needle: str) -> float | None:
        """When ``needle`` first appeared on the terminal (None: never)."""
        seen = ""
        for t, chunk in self.chunks:
            seen += chunk
            if needle in seen:
                return t
        return None


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _rack_under_pty(lab: Lab, *hosts: str) -> PtyRun:
    """Run `provision rack` on a pseudo-terminal (200x50) while sampling its site.yml log."""
    events_file = lab.tmp / f"rack-events-{time.monotonic_ns()}.jsonl"
    logs_dir = Path(lab.env["PROVISIONER_STATE_DIR"]) / "lab-logs"
    before = set(logs_dir.glob("site-*.log")) if logs_dir.is_dir() else set()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen(
        [str(BIN / "provision"), "rack", *hosts, "--events", str(events_file)],
        env={**lab.env, "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"},
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    chunks: list[tuple[float, str]] = []
    sizes: list[tuple[float, int]] = []
    log: Path | None = None
    deadline = time.monotonic() + 3600
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    data = b""
                if not data and proc.poll() is not None:
                    break
                if data:
                    chunks.append((time.monotonic(), ANSI.sub("", data.decode(errors="replace"))))
            if log is None and logs_dir.is_dir():
                new = sorted(set(logs_dir.glob("site-*.log")) - before)
                log = new[0] if new else None
            if log is not None and proc.poll() is None:
                sizes.append((time.monotonic(), log.stat().st_size))
            if proc.poll() is not None and not ready:
                break
        else:
            pytest.fail("provision rack did not finish within an hour")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    ended = time.monotonic()
    returncode = proc.wait(timeout=60)
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    return PtyRun(returncode, chunks, sizes, log, ended, events)


def _assert_progress_was_live(run: PtyRun) -> None:
    text = run.text
    # the image step shows (built with its numbered stages, or found in the cache) before any
    # host is powered on for PXE
    image = run.first("lab OS image")
    pxe = run.first("one-time PXE boot")
    assert image is not None and pxe is not None and image < pxe, text[-4000:]
    stages = [e for e in run.events if e["kind"] == "stage" and e.get("data", {}).get("image")]
    built = [e for e in stages if "step" in e.get("data", {})]
    if built:  # a fresh cache: every build step was on the terminal while the build ran
        for e in built:
            assert e["message"][:30] in text, e
    # the site.yml log: its path is printed when it opens, it grows while the playbook runs
    assert run.log is not None, "no site.yml log appeared under the state dir while rack ran"
    shown = run.first(f"log: {run.log}")
    assert shown is not None and shown < run.ended, text[-4000:]
    growing = [s for t, s in run.log_sizes]
    assert len(growing) >= 2 and growing[0] < growing[-1], run.log_sizes[:5]
    assert max(growing) <= run.log.stat().st_size
    # Ansible's tasks appear on the terminal while site.yml runs, not only in the summary
    tasks = [e["message"] for e in run.events if e["kind"] == "task"]
    assert any(t.startswith("common : ") for t in tasks), tasks[:10]  # site.yml's first role
    last_sample = run.log_sizes[-1][0]
    live = [t for t in set(tasks) if (seen := run.first(t[:25])) is not None and seen < last_sample]
    assert live, f"no Ansible task was on the terminal while site.yml ran: {tasks[:10]}"
    # the summary says what state the hosts reached, and "done" is not said before site.yml
    done_at = [e["ts"] for e in run.events if e["kind"] == "phase" and e["phase"] == "done"]
    configure_at = [e["ts"] for e in run.events if e["kind"] == "phase" and e["phase"] == "configure"]
    assert done_at and configure_at and min(done_at) > min(configure_at)
    assert "configured" in text


def _mac_of(lab: Lab, host: str) -> str:
    status = json.loads(lab.provision("lab", "status", "--json", check=False).stdout)
    for vm in status.get("vms", status.get("hosts", [])):
        if vm.get("name") == host or vm.get("host") == host:
            return str(vm.get("provisioning_mac") or vm["macs"][0]).lower()
    raise AssertionError(f"lab status does not list {host}: {status}")


def _pxe_boot_untargeted(lab: Lab, host: str) -> None:
    # The re-image holds its own host's lock only: `provision boot/power` on another host of the
    # site work meanwhile.
    lab.provision("boot", "pxe", host)
    lab.provision("power", "cycle", host)
    # give its iPXE time to send a few DHCPDISCOVERs while the re-image runs
    log = lab.dnsmasq_log()
    mac = _mac_of(lab, host)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if log and mac in parse_ignored(log.read_text()):
            return
        time.sleep(3)
