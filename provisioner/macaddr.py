"""The project's one MAC address type: netaddr's EUI, written lower-case and colon-separated.

Every MAC a peer or a site file gives (a BMC's JSON, a UEFI device path, the inventory) is
parsed here, so two spellings of one address always compare equal.
"""

from __future__ import annotations

import re

from netaddr import EUI, mac_unix_expanded

# The spellings real peers use: aa:bb:cc:dd:ee:ff, AA-BB-..., Cisco's aabb.ccdd.eeff, and the
# bare hex of UEFI device paths and XCC's AssociatedNetworkAddresses. netaddr accepts more
# (integers, unpadded "1:2:3:4:5:6"), which no peer sends: those are not MACs here.
_SHAPES = re.compile(
    r"[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}|[0-9a-f]{4}(\.[0-9a-f]{4}){2}|[0-9a-f]{12}",
    re.IGNORECASE)


def parse_mac(value: object) -> EUI | None:
    """The MAC ``value`` spells, or None when it spells none (or is not text)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not _SHAPES.fullmatch(text):
        return None
    return EUI(text, dialect=mac_unix_expanded)


def mac_text(mac: EUI) -> str:
    """``mac`` as the project writes it: ``aa:bb:cc:dd:ee:ff``."""
    return str(EUI(int(mac), dialect=mac_unix_expanded))


def canonical_mac(value: object) -> str | None:
    """The written form of the MAC ``value`` spells, or None."""
    mac = parse_mac(value)
    return mac_text(mac) if mac is not None else None


def locally_administered(mac: EUI) -> bool:
    """Whether ``mac`` is locally administered (IEEE 802: bit 1 of its first octet), as the
    MACs a BMC makes up for its USB host interface are."""
    return bool(int(mac) >> 40 & 0x02)
