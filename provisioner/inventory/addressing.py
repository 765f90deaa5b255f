"""The address plan: a deterministic, collision-free address per host and network.

A host's address is the ``slot``-th free address of the network's pool, where
``slot = (rack.index - 1) * rack_stride + (u - 1)`` and the pool is the CIDR minus its network
and broadcast addresses, the gateway and the reserved ranges. The slot depends only on the host's
own rack and U, so adding a host (or a rack) never renumbers the others; changing the reserved
ranges or the stride does, and is a deliberate re-plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from netaddr import AddrFormatError, IPAddress, IPNetwork, IPRange, IPSet


class PlanError(ValueError):
    """A network cannot be planned; the loader turns it into an InventoryError with file:line."""


@dataclass(frozen=True)
class Pool:
    """The plannable addresses of one network, in order."""

    ranges: tuple[IPRange, ...]
    size: int

    def nth(self, n: int) -> IPAddress:
        """The n-th (0-based) address of the pool."""
        if n < 0 or n >= self.size:
            raise IndexError(n)
        for r in self.ranges:
            if n < r.size:
                return IPAddress(r.first + n, r.version)
            n -= r.size
        raise IndexError(n)  # pragma: no cover - guarded by the size check


def parse_range(text: str) -> IPSet:
    """``a.b.c.d``, ``a.b.c.d-a.b.c.e`` or a CIDR, as an IPSet."""
    text = text.strip()
    try:
        if "-" in text:
            first, last = (p.strip() for p in text.split("-", 1))
            return IPSet(IPRange(first, last))
        if "/" in text:
            return IPSet(IPNetwork(text))
        return IPSet([IPAddress(text)])
    except (AddrFormatError, ValueError) as exc:
        raise PlanError(f"{text!r} is not an address, range (a-b) or CIDR: {exc}") from None


def build_pool(cidr: IPNetwork, gateway: IPAddress | None, reserved: list[str]) -> Pool:
    """The ordered free addresses of ``cidr`` once reserved ranges and the gateway are removed."""
    usable = IPSet(cidr)
    if cidr.version == 4 and cidr.prefixlen <= 30:
        usable.remove(cidr.network)
        usable.remove(cidr.broadcast)
    if gateway is not None and gateway in usable:
        usable.remove(gateway)
    for item in reserved:
        rs = parse_range(item)
        if not rs.issubset(IPSet(cidr)):
            raise PlanError(f"reserved range {item!r} is not inside {cidr}")
        usable -= rs
    ranges = tuple(usable.iter_ipranges())
    return Pool(ranges=ranges, size=sum(r.size for r in ranges))


def slot_of(rack_index: int, u: int, rack_stride: int) -> int:
    """The pool index of the host at ``u`` in rack ``rack_index``."""
    if u > rack_stride:
        raise PlanError(
            f"U{u} does not fit a rack_stride of {rack_stride}: raise the network's rack_stride"
        )
    return (rack_index - 1) * rack_stride + (u - 1)


def smallest_prefix_for(addresses_needed: int, version: int = 4) -> int:
    """The longest prefix whose network holds ``addresses_needed`` hosts (plus net/broadcast)."""
    bits = 32 if version == 4 else 128
    for prefix in range(bits, -1, -1):
        if 2 ** (bits - prefix) - 2 >= addresses_needed:
            return prefix
    return 0
