"""Build a manifest from bare links (CSV, NDT, discovery) by inferring the devices they name."""

from __future__ import annotations

from cabling.model import Device, Link, Location, Manifest
from cabling.ports import hca_of, is_switch_port, natural_key, port_number


def build_manifest(
    links: list[Link], locations: dict[str, Location] | None = None, devices: list[Device] | None = None
) -> Manifest:
    """A manifest holding ``links`` plus any device they name that ``devices`` does not declare.

    A device whose ports are numbers (or director ports) is a switch; one whose ports are
    names (HCAs) is a host. Switch radix is the highest port number used.
    """
    locations = locations or {}
    known = {d.name.casefold(): d for d in devices or []}
    ports: dict[str, set[str]] = {}
    names: dict[str, str] = {}
    for link in links:
        for ep in (link.a, link.b):
            key = ep.device.casefold()
            names.setdefault(key, ep.device)
            ports.setdefault(key, set()).add(ep.port)
    out = list(devices or [])
    for key, used in ports.items():
        if key in known:
            continue
        if all(is_switch_port(p) for p in used):
            nums = [n for n in (port_number(p) for p in used) if n is not None]
            out.append(Device(name=names[key], kind="switch", ports=max(nums) if nums else None,
                              location=locations.get(key)))
        else:
            out.append(Device(name=names[key], kind="host", hcas=sorted({hca_of(p) for p in used}, key=natural_key),
                              location=locations.get(key)))
    return Manifest(devices=out, links=links)
