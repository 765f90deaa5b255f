"""The real peers of the Ironic backend tests: a real OpenStack Ironic (all-in-one, SQLite,
127.0.0.1, from its own venv), sushy-emulator over libvirt's in-process test:///default driver
as the BMC of several servers (TLS, basic auth), and a file server for kernels and ramdisks that
can refuse a file a given number of times (a deploy that fails, then succeeds on retry).
"""

from __future__ import annotations

import http.server
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provisioner.deploy.ironic.service import IronicConfig, IronicService, free_port, ironic_venv
from provisioner.exceptions import NotReady
from provisioner.testing.libvirt_bmc import EmulatedServer
from tests.support import machine

BMC_USER = "admin"
BMC_PASSWORD = "Ir0nic-bmc-Pa55"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEIQczXkVx9q test"


def start_ironic(state_dir: Path, **kwargs: Any) -> IronicService:
    """A started local Ironic; fails the test, naming the install step, when it is absent."""
    from provisioner.deploy.ironic.service import ironic_command

    try:
        ironic_command()
    except NotReady:
        machine.fail_if_missing([str(ironic_venv() / "bin" / "ironic")],
                                "scripts/deps/70-ironic.sh")
    # A test's nodes are abandoned when it ends: the conductor need not wait (60 s by default)
    # for a power sync still holding a node's lock before it exits.
    kwargs.setdefault("extra", {"conductor": {"graceful_shutdown_timeout": "5"}})
    service = IronicService(IronicConfig(state_dir=state_dir, port=free_port("127.0.0.1"),
                                         **kwargs))
    service.start()
    return service


@dataclass
class FileServer:
    """Serves a folder over HTTP on 127.0.0.1; ``refuse[path] = n`` answers 404 n times."""

    root: Path
    refuse: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    url: str = ""

    @contextmanager
    def running(self) -> Iterator[FileServer]:
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(outer.root), **kwargs)

            def do_GET(self) -> None:
                outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                if outer.refuse.get(self.path, 0) > 0:
                    outer.refuse[self.path] -= 1
                    self.send_error(404, "refused by the test")
                    return
                super().do_GET()

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def servers(n: int, prefix: str = "irh") -> list[EmulatedServer]:
    """``n`` servers, each with a provisioning and a data NIC and three disks (the second,
    the largest, is the root disk, as in the lab)."""
    out = []
    for i in range(1, n + 1):
        out.append(EmulatedServer(
            name=f"{prefix}{i:02d}", uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{prefix}{i}")),
            macs=(f"52:54:00:29:00:{i:02x}", f"52:54:00:29:01:{i:02x}"),
            disk_serials=tuple(f"IRH{i:02d}-DISK{k}" for k in (1, 2, 3)),
            disk_gib=(8, 16, 8)))
    return servers_checked(out)


def servers_checked(found: Sequence[EmulatedServer]) -> list[EmulatedServer]:
    assert len({s.uuid for s in found}) == len(found)
    return list(found)


def write_site(directory: Path, name: str, *, ironic: dict[str, Any],
               hosts: Sequence[dict[str, Any]], passwords: dict[str, str]) -> Path:
    """A site file for the Ironic backend: one rack of ``hosts``, BMC credentials by file."""
    directory.mkdir(parents=True, exist_ok=True)
    creds = {}
    for ref, password in passwords.items():
        pw = directory / f"{ref}.password"
        pw.write_text(password + "\n")
        pw.chmod(0o600)
        creds[ref] = {"username": BMC_USER, "password": {"file": str(pw)}}
    doc = {
        "site": name,
        "settings": {
            "deploy_backend": "ironic",
            "deploy_retries": 1,
            "deploy_timeout_s": 300,
            # the rack's hosts in one wave (a backend without an image gate waves by uplink)
            "uplink_gbps": 10 * max(1, len(hosts)) / 0.8,
            "ssh_authorized_keys": [SSH_KEY],
            "ntp_servers": ["198.18.200.1"],
            # A loaded 2-core CI machine has seen the all-in-one API answer a provision
            # action after 66 s: the per-request limit guards against a hang, not a pace.
            "ironic": {"http_timeout_s": 300, **ironic},
        },
        "networks": {"provisioning": {"cidr": "198.18.200.0/24", "gateway": "198.18.200.1",
                                      "reserved": ["198.18.200.1-198.18.200.9"]}},
        "credentials": creds,
        "profiles": {"node": {"provisioning_nic": {"mac_prefix": "52:54:00:29:00"},
                              "disks": {"count": 3}}},
        "racks": [{"name": "r01", "index": 1, "location": {"room": "hall-a"},
                   "defaults": {"profile": "node"}, "hosts": list(hosts)}],
    }
    path = directory / "site.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def host_entry(server: EmulatedServer, u: int, *, port: int, credentials: str = "bmc"
               ) -> dict[str, Any]:
    """A site host on ``server`` of the test BMC (its System chosen by UUID)."""
    return {"u": u, "name": server.name,
            "bmc": {"address": "127.0.0.1", "port": port, "credentials": credentials,
                    "system": server.uuid, "vendor": "generic"},
            "provisioning_mac": server.macs[0],
            "root_disk": {"serial": server.disk_serials[1]}}
