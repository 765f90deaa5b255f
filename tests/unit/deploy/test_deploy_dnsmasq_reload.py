"""The running DHCP server follows the reservations: every add or remove rewrites the hosts file
with exactly the targeted MACs and makes the running dnsmasq re-read it (SIGHUP; dnsmasq logs
`read FILE` each time). Without the reload a host added mid-run is never answered and a host
withdrawn keeps booting; the lab test sees that in minutes, this one in seconds.

Real dnsmasq in a throwaway network namespace with one bridge; no DHCP client is needed, the
server's own log says when it re-read the file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from netaddr import IPAddress, IPNetwork

from provisioner.deploy.embedded.dnsmasq import DnsmasqConfig, DnsmasqService, Reservation
from tests.support import machine
from tests.support.waiting import wait_until

NET = "198.18.238"
A, B = "52:54:00:d1:00:0a", "52:54:00:d1:00:0b"


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DnsmasqService]:
    machine.require("root")
    machine.require_tools(["dnsmasq"], "scripts/deps/50-deploy.list")
    ns = f"pdrl{os.getpid() % 100000}"
    _ip("netns", "del", ns, check=False)
    _ip("netns", "add", ns)
    try:
        _ip("-n", ns, "link", "add", "rlbr0", "type", "bridge")
        _ip("-n", ns, "addr", "add", f"{NET}.1/24", "dev", "rlbr0")
        _ip("-n", ns, "link", "set", "rlbr0", "up")
        cfg = DnsmasqConfig(interface="rlbr0", server_address=f"{NET}.1",
                            network=IPNetwork(f"{NET}.0/24"), gateway=IPAddress(f"{NET}.1"),
                            dns=(), ipxe_boot_url="http://127.0.0.1/ipxe/boot.ipxe",
                            workdir=tmp_path / "dhcp")
        svc = DnsmasqService(cfg, netns=ns)
        svc.start()
        try:
            yield svc
        finally:
            svc.stop()
    finally:
        _ip("netns", "del", ns, check=False)


def _reads(svc: DnsmasqService) -> int:
    """How many times dnsmasq has read its hosts file so far (once at start, once per reload)."""
    return svc.cfg.log_path.read_text().count(f"read {svc.cfg.hosts_path}")


def _macs(svc: DnsmasqService) -> list[str]:
    return sorted(line.split(",")[0].lower() for line in svc.cfg.hosts_path.read_text().splitlines()
                  if line.strip() and not line.startswith("#"))


def test_each_change_of_reservations_is_reread_by_the_running_server(
        server: DnsmasqService) -> None:
    wait_until(lambda: _reads(server) == 1, "dnsmasq to read its hosts file at start")
    assert _macs(server) == []

    server.add(Reservation(A, IPAddress(f"{NET}.100"), "node-a"))
    wait_until(lambda: _reads(server) == 2, "dnsmasq to re-read its hosts file after add(A)")
    assert _macs(server) == [A]

    server.add(Reservation(B.upper(), IPAddress(f"{NET}.101"), "node-b"))
    wait_until(lambda: _reads(server) == 3, "dnsmasq to re-read its hosts file after add(B)")
    assert _macs(server) == [A, B]
    assert f"{NET}.101" in server.cfg.hosts_path.read_text()

    server.remove(A.upper())  # any case: MACs are compared lower-cased
    wait_until(lambda: _reads(server) == 4, "dnsmasq to re-read its hosts file after remove(A)")
    assert _macs(server) == [B]
    assert server.running()


def test_replacing_all_reservations_keeps_only_the_targeted_macs(
        server: DnsmasqService) -> None:
    wait_until(lambda: _reads(server) == 1, "dnsmasq to read its hosts file at start")
    server.set_reservations([Reservation(A, IPAddress(f"{NET}.100"), "node-a"),
                             Reservation(B, IPAddress(f"{NET}.101"), "node-b")])
    wait_until(lambda: _reads(server) == 2, "dnsmasq to re-read its hosts file")
    server.set_reservations([Reservation(B, IPAddress(f"{NET}.101"), "node-b")])
    wait_until(lambda: _reads(server) == 3, "dnsmasq to re-read its hosts file again")
    assert _macs(server) == [B]
    server.remove("52:54:00:d1:00:ff")  # not reserved: nothing else is withdrawn
    wait_until(lambda: _reads(server) == 4, "dnsmasq to re-read its hosts file once more")
    assert _macs(server) == [B]


def test_reservations_made_before_the_server_runs_are_only_written(tmp_path: Path) -> None:
    """Before start (or after stop) there is no process to signal: the hosts file is written
    and start() will read it."""
    cfg = DnsmasqConfig(interface="rlbr0", server_address=f"{NET}.1",
                        network=IPNetwork(f"{NET}.0/24"), gateway=None, dns=(),
                        ipxe_boot_url="http://127.0.0.1/ipxe/boot.ipxe", workdir=tmp_path)
    svc = DnsmasqService(cfg)
    svc.add(Reservation(A, IPAddress(f"{NET}.100"), "node-a"))
    svc.remove(B)
    assert _macs(svc) == [A]
    assert not svc.running()
