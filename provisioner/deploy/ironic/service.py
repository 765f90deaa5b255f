"""A standalone OpenStack Ironic on this machine: API and conductor in one process (the
all-in-one ``ironic`` command), SQLite, no Keystone, no message bus, no Neutron.

This is the single-process set-up of docs/ironic.md, as Bifrost and Metal3 configure Ironic:
the tests, the benchmark and `provision lab up --backend ironic` start it. Ironic runs from its
own venv (scripts/deps/70-ironic.sh), never from the project's: its pins conflict with ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import requests

from provisioner.exceptions import NotReady, ProvisionerError

# Ironic 39 answers 4-6 s after start on an idle machine; a loaded 2-core CI box is slower.
START_TIMEOUT_S = 180.0
# SIGTERM can take a minute while the conductor waits on a BMC that is gone.
STOP_TIMEOUT_S = 90.0
SCHEMA_TIMEOUT_S = 300.0

HARDWARE_TYPES = ("redfish", "fake-hardware")
# Every interface the two hardware types need, each with at least one implementation enabled
# (Ironic refuses to start a conductor whose hardware type lacks one).
INTERFACES: dict[str, tuple[str, ...]] = {
    "bios": ("no-bios", "redfish", "fake"),
    "boot": ("ipxe", "redfish-virtual-media", "fake"),
    "console": ("no-console", "fake"),
    "deploy": ("direct", "ramdisk", "custom-agent", "fake"),
    "firmware": ("no-firmware", "redfish", "fake"),
    "inspect": ("redfish", "agent", "no-inspect", "fake"),
    "management": ("redfish", "fake"),
    "network": ("noop",),
    "power": ("redfish", "fake"),
    "raid": ("no-raid", "fake"),
    "rescue": ("no-rescue", "fake"),
    "storage": ("noop", "fake"),
    "vendor": ("no-vendor", "redfish", "fake"),
}


class IronicServiceError(ProvisionerError):
    """The local Ironic did not install, start or answer."""


def ironic_venv() -> Path:
    """The venv Ironic runs from: $PROVISIONER_IRONIC_VENV, else ``<project venv>-ironic``."""
    env = os.environ.get("PROVISIONER_IRONIC_VENV", "").strip()
    return Path(env) if env else Path(sys.prefix + "-ironic")


def ironic_command(name: str = "ironic") -> Path:
    """A command of the Ironic venv; NotReady naming the install step when it is absent."""
    path = ironic_venv() / "bin" / name
    if not os.access(path, os.X_OK):
        raise NotReady(
            f"OpenStack Ironic is not installed: {path} missing",
            hint="run scripts/install-deps (its hook scripts/deps/70-ironic.sh builds Ironic's "
            "venv), or point PROVISIONER_IRONIC_VENV at a venv with `pip install ironic sushy`",
        )
    return path


def free_port(host: str) -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class IronicConfig:
    """What the local Ironic listens on and keeps where."""

    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 6385
    # Where the conductor writes iPXE scripts and cached kernels/ramdisks, and the URL the
    # hosts fetch them from (a web server of the caller's serves http_root there).
    http_root: Path | None = None
    http_url: str | None = None
    # "noauth", or "http_basic" with an htpasswd file (bcrypt entries)
    auth_strategy: str = "noauth"
    htpasswd: Path | None = None
    conductor_group: str = ""
    # Seconds between the conductor's power-state syncs of every node (-1: never); each sync is
    # a BMC request per node, so a fake-hardware benchmark raises it and a real rack keeps it.
    sync_power_state_interval: int = 60
    deploy_callback_timeout: int = 1800
    hardware_types: Sequence[str] = HARDWARE_TYPES
    api_max_limit: int = 1000
    extra: dict[str, dict[str, str]] = field(default_factory=dict)  # more [section] key = value

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def conf_path(self) -> Path:
        return self.state_dir / "ironic.conf"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "ironic.log"

    @property
    def database(self) -> Path:
        return self.state_dir / "ironic.sqlite"


def render_conf(cfg: IronicConfig) -> str:
    """ironic.conf for the single-process set-up: cleaning off, no DHCP, no Neutron."""
    http_root = cfg.http_root or cfg.state_dir / "httpboot"
    sections: dict[str, dict[str, str]] = {
        "DEFAULT": {
            "auth_strategy": cfg.auth_strategy,
            "rpc_transport": "none",
            "host": "provisioner-ironic",
            "use_stderr": "false",
            "log_file": str(cfg.log_path),
            "debug": "false",
            "enabled_hardware_types": ",".join(cfg.hardware_types),
            "default_network_interface": "noop",
            "default_deploy_interface": "direct",
            "default_inspect_interface": "redfish",
            "default_boot_interface": "ipxe",
            "default_raid_interface": "no-raid",
            "default_bios_interface": "no-bios",
            "default_firmware_interface": "no-firmware",
            "default_vendor_interface": "no-vendor",
            "default_conductor_group": cfg.conductor_group,
            **{f"enabled_{k}_interfaces": ",".join(v) for k, v in INTERFACES.items()},
        },
        "api": {"host_ip": cfg.host, "port": str(cfg.port), "max_limit": str(cfg.api_max_limit),
                "api_workers": "1"},
        "conductor": {
            # Ironic's cleaning erases metadata on every disk: data disks and ZFS pools must
            # survive a re-image, so the engine never cleans on its own.
            "automated_clean": "false",
            "conductor_group": cfg.conductor_group,
            "sync_power_state_interval": str(cfg.sync_power_state_interval),
            "deploy_callback_timeout": str(cfg.deploy_callback_timeout),
            "bootloader": "",
        },
        "database": {"connection": f"sqlite:///{cfg.database}"},
        "dhcp": {"dhcp_provider": "none"},
        "deploy": {
            "http_root": str(http_root),
            "http_url": cfg.http_url or f"http://{cfg.host}:8088",
            "default_boot_option": "local",
            "erase_devices_priority": "0",
            "erase_devices_metadata_priority": "0",
        },
        "pxe": {"images_path": str(cfg.state_dir / "images"),
                "instance_master_path": str(cfg.state_dir / "master_images"),
                "tftp_root": str(cfg.state_dir / "tftpboot"),
                "tftp_master_path": str(cfg.state_dir / "tftpboot" / "master_images")},
        "oslo_concurrency": {"lock_path": str(cfg.state_dir / "locks")},
        "inventory": {"data_backend": "database"},
        "redfish": {"use_swift": "false"},
        "agent": {"deploy_logs_local_path": str(cfg.state_dir / "deploy-logs")},
    }
    if cfg.auth_strategy == "http_basic":
        if cfg.htpasswd is None:
            raise IronicServiceError("http_basic authentication needs an htpasswd file")
        sections["DEFAULT"]["http_basic_auth_user_file"] = str(cfg.htpasswd)
    for name, values in cfg.extra.items():
        sections.setdefault(name, {}).update(values)
    lines = ["# generated by provisioner (provisioner/deploy/ironic/service.py)"]
    for name, values in sections.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {v}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


class IronicService:
    """One local Ironic process; ``start`` creates the schema once, ``stop`` ends it."""

    def __init__(self, cfg: IronicConfig) -> None:
        self.cfg = cfg
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.cfg.url

    def write_conf(self) -> None:
        cfg = self.cfg
        for d in (cfg.state_dir, cfg.state_dir / "locks", cfg.state_dir / "images",
                  cfg.state_dir / "master_images", cfg.state_dir / "tftpboot",
                  cfg.state_dir / "deploy-logs", cfg.http_root or cfg.state_dir / "httpboot"):
            d.mkdir(parents=True, exist_ok=True)
        cfg.conf_path.write_text(render_conf(cfg))

    def create_schema(self) -> None:
        """``ironic-dbsync create_schema`` once per database (upgrade when it exists)."""
        verb = "upgrade" if self.cfg.database.exists() else "create_schema"
        argv = [str(ironic_command("ironic-dbsync")), "--config-file", str(self.cfg.conf_path),
                verb]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SCHEMA_TIMEOUT_S,
                              check=False)
        if done.returncode != 0:
            raise IronicServiceError(
                f"ironic-dbsync {verb} failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-800:]}",
                hint=f"read {self.cfg.conf_path}",
            )

    def start(self) -> str:
        """Write the config, create the schema, start Ironic; return its URL once it answers."""
        self.write_conf()
        self.create_schema()
        argv = [str(ironic_command()), "--config-file", str(self.cfg.conf_path)]
        out = (self.cfg.state_dir / "ironic.stdout").open("ab")
        with out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        self.wait_ready()
        return self.url

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until the API lists drivers (the conductor registered); raise naming the log."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise IronicServiceError(
                    f"Ironic exited with {self.proc.returncode} during start-up:\n"
                    f"{_tail(self.cfg.log_path)}",
                    hint=f"read {self.cfg.log_path}",
                )
            try:
                res = requests.get(f"{self.url}/v1/drivers", timeout=2,
                                   headers={"X-OpenStack-Ironic-API-Version": "1.1"})
                # 401 with http_basic: it answers; drivers appear once the conductor registered
                if res.status_code == 401 or (res.ok and res.json().get("drivers")):
                    return
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.5)  # polling a process that gives no other signal, under a deadline
        raise IronicServiceError(
            f"Ironic did not answer on {self.url} within {timeout_s:.0f}s:\n"
            f"{_tail(self.cfg.log_path)}",
            hint=f"read {self.cfg.log_path}",
        )

    def pids(self) -> list[int]:
        """The Ironic process and its workers (the launcher forks one)."""
        if self.proc is None:
            return []
        found = [self.proc.pid]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid in found:
                found.append(int(entry.name))
        return found

    def cpu_seconds(self) -> float:
        """User + system CPU time of Ironic's processes so far."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def stop(self) -> None:
        """SIGTERM Ironic's process group; SIGKILL after STOP_TIMEOUT_S."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def running_ironic(cfg: IronicConfig) -> Iterator[IronicService]:
    """Start a local Ironic for the block, stop it afterwards."""
    service = IronicService(cfg)
    try:
        service.start()
        yield service
    finally:
        service.stop()
