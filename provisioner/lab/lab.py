"""`provision lab up/down/status`: build, tear down and inspect the virtual rack."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from provisioner.exceptions import InputError, NotReady, SiteLocked
from provisioner.lab import aptproxy, daemons, network, pki, sitegen, vms
from provisioner.lab import bmc_emulators as bmc
from provisioner.lab.netns import netns_exists, netns_pids, pid_alive
from provisioner.lab.plan import STATE_ROOT, Firmware, LabHost, LabPlan
from provisioner.lab.purge import describe, leftovers, shared_leftovers
from provisioner.lab.purge import purge as purge_leftovers
from provisioner.state.locks import SiteLocks
from provisioner.state.states import NodeState
from provisioner.state.store import StateStore, default_state_dir

DEFAULTS: dict[str, Any] = {"hosts": 2, "disks": 3, "firmware": "bios", "memory_mib": 1024}
_KNOBS = ("hosts", "disks", "firmware", "memory_mib")
LOCK_DIR = Path("/run/lock")


def read_manifest(plan: LabPlan) -> dict[str, Any] | None:
    """The manifest of a lab that was brought up, or None."""
    try:
        data = json.loads(plan.manifest_path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def resolve_plan(
    *,
    hosts: int | None = None,
    disks: int | None = None,
    firmware: Firmware | None = None,
    memory_mib: int | None = None,
) -> LabPlan:
    """The plan for `lab up`: the asked knobs, else the running lab's, else the defaults.

    A running lab can grow, but not shrink or change its disks/firmware in place, because
    that would destroy VMs and disks the user did not ask to remove.
    """
    base = LabPlan.from_env()
    current = read_manifest(base) or {}
    asked = {"hosts": hosts, "disks": disks, "firmware": firmware, "memory_mib": memory_mib}
    knobs: dict[str, Any] = {}
    for key in _KNOBS:
        have, want = current.get(key), asked[key]
        if want is None:
            knobs[key] = have if have is not None else DEFAULTS[key]
            continue
        knobs[key] = want
        if have is None or have == want:
            continue
        if key == "hosts" and want > have:
            continue
        flag = {"memory_mib": "--memory"}.get(key, f"--{key}")
        raise InputError(
            f"lab {base.netns!r} is up with {flag} {have}; it cannot change to {want} in place",
            hint="run `provision lab down` first (this deletes the lab's VMs and disks), "
            "or leave the option out to keep the running lab",
        )
    return replace(base, **knobs)


@dataclass
class HostStatus:
    """One lab host as `lab status` reports it."""

    name: str
    domain: str
    power: str
    bmc_url: str
    bmc_pid: int | None
    bmc_answers: bool
    provisioning_mac: str
    data_mac: str
    root_disk_serial: str
    console_log: str


@dataclass
class LabStatus:
    """What runs of the lab: namespace, daemons, VMs and BMCs."""

    netns: str
    netns_exists: bool
    uplink: bool
    libvirtd: bool
    site: str | None
    apt_proxy: str | None = None  # its URL while it runs and answers
    hosts: list[HostStatus] = field(default_factory=list)
    netns_processes: dict[int, str] = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)

    @property
    def up(self) -> bool:
        """Whether everything the lab needs is there and answering."""
        return (
            self.netns_exists
            and self.uplink
            and self.libvirtd
            and self.site is not None
            and self.apt_proxy is not None
            and bool(self.hosts)
            and all(h.power != "Missing" and h.bmc_answers for h in self.hosts)
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["up"] = self.up
        data["netns_processes"] = {str(k): v for k, v in self.netns_processes.items()}
        return data


def _manifest(plan: LabPlan) -> dict[str, Any]:
    return {
        "netns": plan.netns,
        "slot": plan.slot,
        "hosts": plan.hosts,
        "disks": plan.disks,
        "firmware": plan.firmware,
        "memory_mib": plan.memory_mib,
        "state_dir": str(plan.state_dir),
        "site": str(plan.site_path),
        "ca_bundle": str(plan.ca_bundle_path),
        "provisioning_net": str(plan.provisioning_net),
        "bmc_net": str(plan.bmc_net),
        "uplink": {"host": str(plan.host_uplink_address), "link": plan.host_uplink},
        "lab_hosts": [
            {
                "name": h.name,
                "domain": h.domain,
                "uuid": h.uuid,
                "provisioning_mac": h.provisioning_mac,
                "data_mac": h.data_mac,
                "bmc_url": f"https://{h.bmc_address}:{h.bmc_port}",
                "disk_serials": list(h.disk_serials),
                "root_disk_serial": h.root_disk_serial,
                "console_log": str(plan.console_log(h)),
            }
            for h in plan.lab_hosts
        ],
    }


def _write_manifest(plan: LabPlan, data: dict[str, Any]) -> None:
    tmp = plan.manifest_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(plan.manifest_path)


@contextmanager
def lab_lock(plan: LabPlan) -> Iterator[None]:
    """Hold the lab's lock: two `lab up`/`lab down` at once would fight over the same VMs."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    path = LOCK_DIR / f"provisioner-lab-{plan.netns}.lock"
    while True:
        fh = open(path, "a")  # noqa: SIM115 - held across the yield below
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise SiteLocked(
                f"another `provision lab` command is running for lab {plan.netns!r}",
                hint="wait for it to finish; the lock is released when it exits",
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        fh.close()  # the holder before us removed this file: lock the new one
    try:
        yield
    finally:
        # Removed while held, so no lock file outlives the command.
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fh.close()


@contextmanager
def _whole_site(command: str) -> Iterator[None]:
    """Hold the lab site whole: rebuilding or removing its VMs and rewriting its site file
    under a `provision rack` (or health, power...) of the lab would pull hosts from under it."""
    lease = SiteLocks(default_state_dir(), sitegen.SITE_NAME).acquire(command, site_wide=True)
    try:
        yield
    finally:
        lease.release()


def up(plan: LabPlan) -> LabStatus:
    """Build the lab described by ``plan``, or repair it; a second call changes nothing."""
    daemons.require_tools(plan.firmware)
    with lab_lock(plan), _whole_site("provision lab up"):
        # Both refusals come before anything is built, so a refused lab leaves nothing.
        network.check_conflicts(plan)
        sitegen.check_site_writable(plan)
        _up(plan)
    return status(plan)


def _up(plan: LabPlan) -> None:
    daemons.ensure_daemons()
    plan.state_dir.mkdir(parents=True, exist_ok=True)
    # qemu runs as libvirt-qemu and must reach the disks and console logs below.
    os.chmod(plan.state_dir, 0o755)
    if plan.state_dir.parent == STATE_ROOT:
        os.chmod(STATE_ROOT, 0o755)
    # Written first so that `lab down` after a crash half-way knows the lab's knobs.
    _write_manifest(plan, {**_manifest(plan), "complete": False})
    network.ensure_namespace(plan)
    for host in plan.lab_hosts:
        network.ensure_host_links(plan, host)
    aptproxy.ensure(plan)  # listens on the uplink's root end, which exists from here on
    ca_cert, ca_key = pki.ensure_ca(plan.pki_dir, plan.netns)
    ssh_key, ssh_pub = pki.ensure_ssh_key(plan.ssh_dir, f"provisioner-lab-{plan.netns}")
    blank: list[LabHost] = []
    with vms.connect(plan.libvirt_uri) as conn:
        pool = vms.ensure_pool(conn, plan)
        for host in plan.lab_hosts:
            if plan.root_disk_index in vms.ensure_volumes(pool, plan, host):
                blank.append(host)
            vms.ensure_domain(conn, plan, host)
        pool.refresh(0)
    started: list[tuple[LabHost, int]] = []
    for host in plan.lab_hosts:
        changed = bmc.prepare_bmc(plan, host, ca_cert, ca_key)
        running = bmc.bmc_process(plan, host).pid()
        if running is not None and not changed:
            continue
        if running is not None:
            bmc.stop_bmc(plan, host)
        started.append((host, bmc.start_bmc(plan, host)))
    for host, pid in started:
        bmc.wait_ready(plan, host, ca_cert, pid)
    doc = sitegen.site_document(plan, ssh_public_key=ssh_pub, ssh_private_key=ssh_key)
    sitegen.write_site(plan, sitegen.render_site(doc, plan), ca_cert.read_bytes())
    forget_installs(plan, blank)
    _write_manifest(plan, {**_manifest(plan), "complete": True})


def forget_installs(plan: LabPlan, hosts: list[LabHost]) -> list[str]:
    """Send hosts whose root disk was just created back to ``enrolled`` in the site's state
    store, so `provision rack` installs them again; return the names moved.

    The store outlives `lab down` (it is the site's history); without this, a lab rebuilt
    from blank disks would be skipped as "already validated"."""
    if not hosts:
        return []
    moved: list[str] = []
    store = StateStore.for_site(sitegen.SITE_NAME)
    try:
        known = {r.name: r.state for r in store.all()}
        for host in hosts:
            if known.get(host.name, NodeState.ENROLLED) == NodeState.ENROLLED:
                continue
            store.transition(
                host.name, NodeState.ENROLLED, force=True,
                reason=f"lab {plan.netns!r}: VM rebuilt with blank disks by `provision lab up`",
            )  # fmt: skip
            moved.append(host.name)
    finally:
        store.close()
    return moved


def _knobs_plan() -> LabPlan:
    """The plan of the lab named by the environment, with the knobs it was built with."""
    base = LabPlan.from_env()
    current = read_manifest(base) or {}
    knobs = {k: current[k] for k in _KNOBS if k in current}
    try:
        return replace(base, **knobs)
    except InputError:
        return base


def status(plan: LabPlan | None = None) -> LabStatus:
    """Inspect the lab: namespace, uplink, libvirtd, each VM's power and BMC."""
    plan = plan or _knobs_plan()
    manifest = read_manifest(plan) or {}
    st = LabStatus(
        netns=plan.netns,
        netns_exists=netns_exists(plan.netns),
        uplink=network.link_exists(plan.host_uplink),
        libvirtd=bool(daemons.find_pids("libvirtd")) and daemons.SOCKET.exists(),
        site=str(plan.site_path) if plan.site_path.exists() else None,
        knobs={k: manifest.get(k) for k in _KNOBS} if manifest else {},
    )
    if not manifest:
        return st
    proxy = aptproxy.apt_proxy(plan)
    if aptproxy.running_pid(proxy) is not None and aptproxy.answers(proxy):
        st.apt_proxy = proxy.url
    powers: dict[str, str] = {}
    if st.libvirtd:
        with vms.connect(plan.libvirt_uri) as conn:
            powers = vms.power_states(conn, plan)
    ca = plan.ca_bundle_path if plan.ca_bundle_path.exists() else plan.pki_dir / "ca.pem"
    for host in plan.lab_hosts:
        pid = bmc.bmc_process(plan, host).pid()
        answers = False
        if pid is not None and plan.password_file(host).exists():
            answers = bmc.probe(host, ca, pki.ensure_password(plan.password_file(host)))
        st.hosts.append(
            HostStatus(
                name=host.name,
                domain=host.domain,
                power=powers.get(host.domain, "Missing"),
                bmc_url=f"https://{host.bmc_address}:{host.bmc_port}",
                bmc_pid=pid,
                bmc_answers=answers,
                provisioning_mac=host.provisioning_mac,
                data_mac=host.data_mac,
                root_disk_serial=host.root_disk_serial,
                console_log=str(plan.console_log(host)),
            )
        )
    for pid in netns_pids(plan.netns):
        try:
            st.netns_processes[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
    return st


@dataclass
class DownReport:
    """What `lab down` removed."""

    domains: list[str] = field(default_factory=list)
    pool: bool = False
    killed_pids: list[int] = field(default_factory=list)
    netns: bool = False
    links: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    daemons: list[str] = field(default_factory=list)
    purged: list[str] = field(default_factory=list)  # with --purge: state, logs, image cache
    kept: list[str] = field(default_factory=list)  # without: what stays, one line per kind
    shared: list[str] = field(default_factory=list)  # kept even with --purge: other sites use it

    @property
    def nothing(self) -> bool:
        return not (
            self.purged
            or self.domains
            or self.pool
            or self.killed_pids
            or self.netns
            or self.links
            or self.files
            or self.daemons
        )


def _libvirt_has_leftovers(plan: LabPlan) -> bool:
    """Whether libvirt's persistent config still holds this lab's domains or pool."""
    qemu = Path("/etc/libvirt/qemu")
    if qemu.is_dir() and any(plan.owns_domain(p.stem) for p in qemu.glob("*.xml")):
        return True
    return Path(f"/etc/libvirt/storage/{plan.pool_name}.xml").exists()


def _processes_using(path: Path) -> list[int]:
    """Pids whose command line mentions ``path`` (BMCs or captures left outside the netns)."""
    # The trailing slash keeps lab "plab" from matching lab "plabit"'s files.
    needle = (str(path).rstrip("/") + "/").encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def down(plan: LabPlan | None = None, *, purge: bool = False) -> DownReport:
    """Remove every VM, disk, BMC, process, link, namespace and file of the lab.

    Works from the manifest when there is one and by naming convention otherwise, so it also
    cleans up after a crashed or interrupted `lab up`. The lab site's state database and logs
    and the lab OS image cache stay unless ``purge`` (see lab/purge.py).
    """
    plan = plan or _knobs_plan()
    daemons.require_tools()
    with lab_lock(plan), _whole_site("provision lab down"):
        report = _down(plan)
        if purge:
            report.purged = describe(purge_leftovers(plan))
        else:
            report.kept = describe(leftovers(plan))
        report.shared = describe(shared_leftovers())
        return report


def _down(plan: LabPlan) -> DownReport:
    report = DownReport()
    libvirt_up = bool(daemons.find_pids("libvirtd")) and daemons.SOCKET.exists()
    if not libvirt_up and _libvirt_has_leftovers(plan):
        daemons.ensure_daemons()
        libvirt_up = True
    if libvirt_up:
        with vms.connect(plan.libvirt_uri) as conn:
            report.domains = vms.remove_domains(conn, plan)
            report.pool = vms.remove_pool(conn, plan)
    for host in plan.lab_hosts:
        pid = bmc.stop_bmc(plan, host)
        if pid is not None:
            report.killed_pids.append(pid)
    pid = aptproxy.stop(plan)
    if pid is not None:
        report.killed_pids.append(pid)
    teardown = network.remove_networks(plan)
    report.killed_pids += teardown.killed_pids
    report.netns = teardown.netns_removed
    report.links = teardown.links_removed
    for pid in _processes_using(plan.state_dir):
        os.kill(pid, signal.SIGKILL)
        report.killed_pids.append(pid)
    report.files = [str(p) for p in sitegen.remove_site(plan)]
    report.files += _remove_state_dir(plan)
    # Only the lab whose VMs just went stops the daemons a lab started, and only when no VM
    # at all is left: someone else's domains keep libvirtd running.
    if libvirt_up and (report.domains or report.pool) and daemons.started_by_lab():
        with vms.connect(plan.libvirt_uri) as conn:
            idle = vms.other_domains(conn) == 0
        if idle:
            report.daemons = daemons.stop_lab_daemons()
    _remove_state_root_if_empty()
    return report


_STATE_ENTRY = re.compile(
    r"^(manifest\.(json|tmp)|disks|pki|ssh|deploy|aptproxy|bmc-\d\d(\.password)?|lab-host\d\d)$"
)


def _remove_state_dir(plan: LabPlan) -> list[str]:
    """Delete what the lab put in its state dir, and the dir if that empties it.

    Only the lab's own entries go: $PROVISIONER_LAB_STATE_DIR may point somewhere that holds
    other files too, and those are never the lab's to delete.
    """
    if not plan.state_dir.is_dir():
        return []
    if plan.state_dir == STATE_ROOT / plan.netns:  # the default: the whole dir is the lab's
        shutil.rmtree(plan.state_dir)
        return [str(plan.state_dir)]
    removed = []
    for entry in sorted(plan.state_dir.iterdir()):
        if not _STATE_ENTRY.match(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(str(entry))
    if not any(plan.state_dir.iterdir()):
        plan.state_dir.rmdir()
        removed.append(str(plan.state_dir))
    return removed


def _remove_state_root_if_empty() -> None:
    if not STATE_ROOT.is_dir():
        return
    left = list(STATE_ROOT.iterdir())
    if left == [daemons.MARKER] and not daemons.started_by_lab():
        daemons.MARKER.unlink()
        left = []
    if not left:
        STATE_ROOT.rmdir()


def console_log(name: str, plan: LabPlan | None = None) -> Path:
    """The serial console log of lab host ``name`` (``lab-host01`` or its domain name)."""
    plan = plan or _knobs_plan()
    for host in plan.lab_hosts:
        if name in (host.name, host.domain):
            path = plan.console_log(host)
            if not path.exists():
                raise NotReady(
                    f"{host.name} has no console log yet ({path})",
                    hint="it appears when the VM first powers on (through its BMC)",
                )
            return path
    known = ", ".join(h.name for h in plan.lab_hosts)
    raise InputError(f"lab {plan.netns!r} has no host {name!r}", hint=f"its hosts: {known}")


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a console log, control characters removed."""
    text = path.read_bytes()[-max(lines, 1) * 400 :].decode(errors="replace")
    clean = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]", "", text)
    return clean.splitlines()[-lines:] if lines > 0 else []
