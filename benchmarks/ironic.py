"""Ironic's API and conductor under a rack's worth of nodes, driven by our backend and poller.

A real OpenStack Ironic (all-in-one, SQLite, 127.0.0.1, its `fake-hardware` hardware type: no
BMC behind the nodes, so what is measured is Ironic's API, its conductor and our client) gets
N hosts (racks of 32): `provision ironic enroll` (create, ports, manage), then the rack runner
deploys them all (provide, deploy) through the Ironic backend, hosts in flight = --in-flight.
Figures per N: wall time of each stage, API requests in all and per host, list requests per
poll (pages) and node states each poll answered, and the CPU seconds Ironic's processes and
this one spent.

    .venv/bin/python benchmarks/ironic.py [--hosts 200 1000] [--in-flight 64]

Ends with one line: ``RESULT n200_enrol_s=... n200_deploy_s=... ...``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.deploy.ironic.backend import IronicBackend  # noqa: E402
from provisioner.deploy.ironic.service import IronicConfig, IronicService, free_port  # noqa: E402
from provisioner.deploy.ironic.site import enrol_hosts  # noqa: E402
from provisioner.inventory import load_site  # noqa: E402
from provisioner.state import StateStore  # noqa: E402
from provisioner.workflow.rack import HostResult, RackOptions, RackRunner  # noqa: E402

RACK = 32


class Quiet:
    def phase(self, host: str, phase: str, message: str) -> None:
        pass

    def finished(self, result: HostResult) -> None:
        pass


def site_file(directory: Path, url: str, n: int, poll_s: float) -> Path:
    """N fake-hardware hosts in racks of 32, all through the Ironic at ``url``."""
    pw = directory / "bmc.password"
    pw.write_text("bench-bmc-password\n")
    pw.chmod(0o600)
    racks = []
    for r in range((n + RACK - 1) // RACK):
        hosts = [{"u": u, "name": f"b{r:02d}u{u:02d}",
                  "provisioning_mac": f"52:54:01:{r // 256:02x}:{r % 256:02x}:{u:02x}",
                  "bmc": {"address": f"198.19.{r}.{u}", "credentials": "bmc"}}
                 for u in range(1, min(RACK, n - r * RACK) + 1)]
        racks.append({"name": f"r{r:02d}", "index": r + 1, "defaults": {"profile": "node"},
                      "hosts": hosts})
    doc = {
        "site": f"irbench{n}",
        "settings": {
            "deploy_backend": "ironic", "deploy_retries": 0, "uplink_gbps": 100000,
            "ssh_authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN bench"],
            "ironic": {"url": url, "driver": "fake-hardware", "boot_interface": "fake",
                       "deploy_interface": "fake", "inspect_interface": "fake",
                       "inspect": False, "interfaces": {"power": "fake", "management": "fake"},
                       "poll_interval_s": poll_s, "manage_timeout_s": 3600,
                       "provide_timeout_s": 3600},
        },
        "networks": {"provisioning": {"cidr": "10.40.0.0/16", "gateway": "10.40.0.1"}},
        "credentials": {"bmc": {"username": "admin", "password": {"file": str(pw)}}},
        "profiles": {"node": {"provisioning_nic": {"rule": "first-up"}}},
        "racks": racks,
    }
    path = directory / "site.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(n: int, in_flight: int, poll_s: float, root: Path) -> dict[str, float]:
    """Enrol and deploy ``n`` hosts on a fresh Ironic; the figures of both stages."""
    service = IronicService(IronicConfig(state_dir=root / "ironic", port=free_port("127.0.0.1"),
                                         api_max_limit=1000))
    service.start()
    try:
        os.environ["PROVISIONER_STATE_DIR"] = str(root / "state")
        site = load_site(site_file(root, service.url, n, poll_s))
        backend = IronicBackend(site)
        out: dict[str, float] = {}

        cpu0, own0, t0 = service.cpu_seconds(), time.process_time(), time.monotonic()
        enrolled = enrol_hosts(site, site.hosts, None, backend=backend)
        out["enrol_s"] = time.monotonic() - t0
        out["enrol_ironic_cpu_s"] = service.cpu_seconds() - cpu0
        out["enrol_failed"] = sum(1 for e in enrolled if e.error)
        for e in [e for e in enrolled if e.error][:3]:  # a figure with failures says why
            print(f"  enrol failed: {e.host}: {e.error}", file=sys.stderr, flush=True)
        calls0 = backend.client.calls

        store = StateStore.for_site(site)
        try:
            runner = RackRunner(site, store, backend, open_bmc=None, reporter=Quiet(),
                                options=RackOptions(configure=False, wait_ssh=False,
                                                    max_parallel=min(n, in_flight)))
            cpu1, t1 = service.cpu_seconds(), time.monotonic()
            result = runner.run(site.hosts)
            out["deploy_s"] = time.monotonic() - t1
            out["deploy_ironic_cpu_s"] = service.cpu_seconds() - cpu1
        finally:
            store.close()
        out["deploy_failed"] = len(result.failed)
        for r in result.failed[:3]:
            print(f"  deploy failed: {r.host}: {r.reason}", file=sys.stderr, flush=True)
        out["deploy_calls_per_host"] = (backend.client.calls - calls0) / n
        poller = backend.poller
        out["pages_per_poll"] = poller.pages / max(1, poller.polls)
        out["states_per_poll"] = poller.reads / max(1, poller.polls)
        out["polls"] = poller.polls
        out["calls"] = backend.client.calls
        out["own_cpu_s"] = time.process_time() - own0
        return out
    finally:
        service.stop()


def main() -> None:
    """Run the sizes and print the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--in-flight", type=int, default=64, help="hosts deployed at once "
                        "(256 against one all-in-one Ironic: its API answers actions after "
                        "more than 30 s on a loaded 2-core machine)")
    parser.add_argument("--poll", type=float, default=2.0, help="poll interval (s)")
    args = parser.parse_args()
    fields: list[str] = []
    for n in args.hosts:
        with tempfile.TemporaryDirectory(prefix=f"irbench{n}-") as tmp:
            figures = run(n, args.in_flight, args.poll, Path(tmp))
        print(f"{n} hosts: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in figures.items()), flush=True)
        fields += [f"n{n}_{k}={v:.3g}" for k, v in figures.items()]
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
