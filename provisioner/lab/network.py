"""The lab's networks: a namespace with the provisioning, data and BMC segments and one veth
to the root namespace.

The namespace has no default route, so nothing a VM or BMC sends can leave the machine: the
only thing it reaches outside is the root namespace's end of the veth (the deploy server).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from provisioner.exceptions import NotReady
from provisioner.lab.netns import (
    NETNS_DIR,
    kill_netns_processes,
    netns_exists,
    run,
)
from provisioner.lab.plan import (
    BMC_LINK,
    DATA_BRIDGE,
    MAX_SLOT,
    NETNS_UPLINK,
    PROVISIONING_BRIDGE,
    LabHost,
    LabPlan,
)


class LabAddressConflict(NotReady):
    """Another lab or interface on this machine already uses the lab's addresses."""


def _ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    return run(argv, check=check, timeout=30).stdout


def root_links() -> list[str]:
    """Names of the links in the root namespace."""
    return [link["ifname"] for link in json.loads(_ip("-j", "link", "show") or "[]")]


def link_exists(name: str, netns: str | None = None) -> bool:
    res = run(
        ["ip", *(["-n", netns] if netns else []), "link", "show", name], check=False, timeout=30
    )
    return res.returncode == 0


def _sysctl_in_netns(netns: str, key: str, value: str) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    run(["ip", "netns", "exec", netns, "sh", "-c", f"echo {value} > {path}"], timeout=30)


def _disable_ipv6(link: str) -> None:
    # Keeps the root namespace from chattering (router solicitations) onto the lab segments.
    try:
        with open(f"/proc/sys/net/ipv6/conf/{link}/disable_ipv6", "w") as fh:
            fh.write("1")
    except OSError:
        pass


def check_conflicts(plan: LabPlan) -> None:
    """Refuse to build when another interface already routes or holds the lab's addresses."""
    for net in plan.routed_nets:
        routes = json.loads(_ip("-j", "route", "show", "exact", str(net)) or "[]")
        for route in routes:
            dev = route.get("dev")
            if dev and dev != plan.host_uplink:
                raise LabAddressConflict(
                    f"{net} is already routed via {dev}, so lab {plan.netns!r} cannot use it",
                    hint="another lab is up: run `provision lab down` for it, or give this one "
                    "its own addresses with PROVISIONER_LAB_SLOT=1..14 and its own "
                    "PROVISIONER_LAB_NETNS",
                )
    addrs = json.loads(_ip("-j", "addr", "show") or "[]")
    want = str(plan.host_uplink_address)
    for link in addrs:
        for info in link.get("addr_info", []):
            if info.get("local") == want and link.get("ifname") != plan.host_uplink:
                raise LabAddressConflict(
                    f"{want} is already assigned to {link.get('ifname')}",
                    hint="another lab is up on this machine: run `provision lab down` for it, "
                    "or use PROVISIONER_LAB_SLOT=1..14 with another PROVISIONER_LAB_NETNS",
                )


def free_slot(netns: str) -> int:
    """The highest address slot no interface on this machine uses (for throwaway labs in
    tests; people's own labs usually sit in the low slots)."""
    for slot in range(MAX_SLOT, 0, -1):
        try:
            check_conflicts(LabPlan(netns=netns, slot=slot))
        except LabAddressConflict:
            continue
        return slot
    raise LabAddressConflict(
        f"every lab address slot 1..{MAX_SLOT} is in use on this machine",
        hint="run `provision lab down` (with its PROVISIONER_LAB_NETNS) for labs not needed",
    )


def ensure_namespace(plan: LabPlan) -> None:
    """Create (or repair) the namespace, its bridges, the BMC segment and the uplink veth."""
    ns = plan.netns
    if not netns_exists(ns):
        _ip("netns", "add", ns)
    _ip("link", "set", "lo", "up", netns=ns)
    for bridge, address in (
        (PROVISIONING_BRIDGE, plan.server_address),
        (DATA_BRIDGE, plan.data_address),
    ):
        if not link_exists(bridge, ns):
            _ip("link", "add", bridge, "type", "bridge", "forward_delay", "0", netns=ns)
        _ip("addr", "replace", f"{address}/24", "dev", bridge, netns=ns)
        _ip("link", "set", bridge, "up", netns=ns)
    if not link_exists(BMC_LINK, ns):
        _ip("link", "add", BMC_LINK, "type", "bridge", netns=ns)  # no dummy driver here
    _ip("addr", "replace", f"{plan.bmc_gateway}/24", "dev", BMC_LINK, netns=ns)
    for host in plan.lab_hosts:
        _ip("addr", "replace", f"{host.bmc_address}/32", "dev", BMC_LINK, netns=ns)
    _ip("link", "set", BMC_LINK, "up", netns=ns)
    _sysctl_in_netns(ns, "net.ipv4.ip_forward", "1")
    _ensure_uplink(plan)


def _ensure_uplink(plan: LabPlan) -> None:
    ns, root = plan.netns, plan.host_uplink
    if link_exists(root) and not link_exists(NETNS_UPLINK, ns):
        _ip("link", "del", root)  # half of a pair left by a crash: rebuild it whole
    if not link_exists(root):
        _ip("link", "add", root, "type", "veth", "peer", "name", NETNS_UPLINK, "netns", ns)
    prefix = plan.uplink_net.prefixlen
    _ip("addr", "replace", f"{plan.host_uplink_address}/{prefix}", "dev", root)
    _ip("addr", "replace", f"{plan.netns_uplink_address}/{prefix}", "dev", NETNS_UPLINK, netns=ns)
    _ip("link", "set", root, "up")
    _ip("link", "set", NETNS_UPLINK, "up", netns=ns)
    check_macvtap(plan)
    for net in plan.routed_nets:
        _ip("route", "replace", str(net), "via", str(plan.netns_uplink_address), "dev", root)


def check_macvtap(plan: LabPlan) -> None:
    """Prove the kernel can stack a macvtap on the uplink veth, as libvirt will for each VM
    NIC at power-on: failing here names the cause, failing later only a VM that won't start."""
    probe = plan.macvtap_probe
    res = run(
        ["ip", "link", "add", "link", plan.host_uplink, "name", probe, "type", "macvtap"],
        check=False,
        timeout=30,
    )
    if res.returncode != 0:
        raise NotReady(
            f"this kernel cannot create macvtap devices ({res.stderr.strip() or 'no output'})",
            hint="the lab's VM NICs are macvtaps: use a kernel with CONFIG_MACVTAP "
            "(`modprobe macvtap`)",
        )
    _ip("link", "del", probe)


def ensure_host_links(plan: LabPlan, host: LabHost) -> None:
    """Create the veth pairs that put a VM's two NICs on provbr0 and provbr1."""
    ns = plan.netns
    for root, inner, bridge in (
        (host.prov_veth_host, host.prov_veth_ns, PROVISIONING_BRIDGE),
        (host.data_veth_host, host.data_veth_ns, DATA_BRIDGE),
    ):
        if link_exists(root) and not link_exists(inner, ns):
            _ip("link", "del", root)
        if not link_exists(root):
            _ip("link", "add", root, "type", "veth", "peer", "name", inner, "netns", ns)
        _ip("link", "set", inner, "master", bridge, netns=ns)
        _ip("link", "set", inner, "up", netns=ns)
        _disable_ipv6(root)
        _ip("link", "set", root, "up")


@dataclass
class NetworkTeardown:
    """What removing the lab's networks found and removed."""

    killed_pids: list[int]
    netns_removed: bool
    links_removed: list[str]


def remove_networks(plan: LabPlan) -> NetworkTeardown:
    """Kill everything inside the namespace, delete it, and delete the lab's root links."""
    killed: list[int] = []
    removed_ns = False
    if netns_exists(plan.netns):
        killed = kill_netns_processes(plan.netns)
        _ip("netns", "del", plan.netns)
        removed_ns = True
    elif (NETNS_DIR / plan.netns).is_symlink():
        (NETNS_DIR / plan.netns).unlink()
    links = [name for name in root_links() if plan.owns_link(name)]
    for name in links:
        _ip("link", "del", name, check=False)
    return NetworkTeardown(killed_pids=killed, netns_removed=removed_ns, links_removed=links)
