"""A Redfish BMC for many servers without any VM: sushy-emulator over libvirt's in-process
``test:///default`` driver (the real sushy-emulator code path, the real libvirt API).

libvirt's test driver keeps its domains only while a connection to it is open in the process,
so this launcher opens one, defines the servers (name, UUID, MACs, disks, memory) and keeps it
for the emulator's lifetime. Drives report their own serials through the lab's drive template
(sushy's own hard-codes one serial for every drive). Run as
``python -m provisioner.testing.libvirt_bmc --config FILE --servers FILE``.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import provisioner
from provisioner.testing.redfish_peers import (
    VENV_BIN,
    TLSFiles,
    _process,
    emulator_access_lines,
    free_port,
)

# The lab's drive template (a file, read by the emulator's Jinja loader, not imported).
DRIVE_TEMPLATES = Path(provisioner.__file__).resolve().parent / "lab" / "templates"


@dataclass(frozen=True)
class EmulatedServer:
    """One server of the test driver: what its Redfish System will show."""

    name: str
    uuid: str
    macs: tuple[str, ...]
    disk_serials: tuple[str, ...]
    disk_gib: tuple[int, ...]
    memory_mib: int = 2048
    cpus: int = 2

    def domain_xml(self) -> str:
        dom = ET.Element("domain", type="test")
        ET.SubElement(dom, "name").text = self.name
        ET.SubElement(dom, "uuid").text = self.uuid
        ET.SubElement(dom, "memory", unit="KiB").text = str(self.memory_mib * 1024)
        ET.SubElement(dom, "vcpu").text = str(self.cpus)
        os_el = ET.SubElement(dom, "os")
        ET.SubElement(os_el, "type", arch="x86_64").text = "hvm"
        ET.SubElement(os_el, "boot", dev="hd")
        devices = ET.SubElement(dom, "devices")
        for k, serial in enumerate(self.disk_serials):
            disk = ET.SubElement(devices, "disk", type="file", device="disk")
            ET.SubElement(disk, "source", file=f"/guest/{self.name}-disk{k}")
            ET.SubElement(disk, "target", dev=f"vd{chr(ord('a') + k)}", bus="virtio")
            ET.SubElement(disk, "serial").text = serial
        for mac in self.macs:
            nic = ET.SubElement(devices, "interface", type="network")
            ET.SubElement(nic, "mac", address=mac)
            ET.SubElement(nic, "source", network="default")
        return ET.tostring(dom, encoding="unicode")


def emulator_settings(servers: Sequence[EmulatedServer]) -> dict[str, Any]:
    """sushy-emulator settings: the test driver, and each server's storage and drives."""
    storage: dict[str, Any] = {}
    drives: dict[Any, Any] = {}
    for s in servers:
        ids = [f"Disk.{k}" for k in range(1, len(s.disk_serials) + 1)]
        storage[s.uuid] = [{"Id": "1", "Name": "Local storage",
                            "StorageControllers": [{"MemberId": "0", "Name": "virtio-blk",
                                                    "SpeedGbps": 12}],
                            "Drives": ids}]
        drives[(s.uuid, "1")] = [
            {"Id": i, "Name": f"Disk {k}", "CapacityBytes": gib * 1024**3, "Protocol": "PCIe",
             "MediaType": "SSD", "Manufacturer": "QEMU", "Model": "QEMU VIRTIO DISK",
             "SerialNumber": serial}
            for k, (i, serial, gib) in enumerate(zip(ids, s.disk_serials, s.disk_gib,
                                                     strict=True), start=1)]
    return {"SUSHY_EMULATOR_LIBVIRT_URI": "test:///default",
            "SUSHY_EMULATOR_FEATURE_SET": "full",
            "SUSHY_EMULATOR_IGNORE_BOOT_DEVICE": False,
            "SUSHY_EMULATOR_STORAGE": storage,
            "SUSHY_EMULATOR_DRIVES": drives}


@contextmanager
def libvirt_test_bmc(directory: Path, servers: Sequence[EmulatedServer], *,
                     host: str = "127.0.0.1",
                     auth: tuple[str, str] | None = None,
                     tls: TLSFiles | None = None) -> Iterator[str]:
    """Run the emulator over the test driver with ``servers``; yields its base URL."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"{k} = {v!r}" for k, v in emulator_settings(servers).items()]
    lines.append(f"SUSHY_EMULATOR_STATE_DIR = {str(directory / 'state')!r}")
    lines += emulator_access_lines(directory, auth, tls)
    config = directory / "emulator.conf"
    config.write_text("\n".join(lines) + "\n")
    spec = directory / "servers.json"
    spec.write_text(json.dumps([asdict(s) for s in servers]))
    port = free_port(host)
    cmd = [str(VENV_BIN / "python"), "-m", "provisioner.testing.libvirt_bmc",
           "--servers", str(spec), "--config", str(config), "-i", host, "-p", str(port)]
    with _process(cmd, host, port, directory / f"emulator-{port}.log"):
        yield f"{'https' if tls else 'http'}://{host}:{port}"


def main(argv: list[str] | None = None) -> int:
    """Define the servers on a kept test-driver connection, then run sushy-emulator."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--servers", required=True)
    known, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    import libvirt
    from jinja2 import ChoiceLoader, FileSystemLoader
    from sushy_tools.emulator import main as sushy

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    keeper = libvirt.open("test:///default")  # kept open: the test driver's state lives in it
    for old in keeper.listAllDomains():
        if old.isActive():
            old.destroy()
        old.undefine()
    for raw in json.loads(Path(known.servers).read_text()):
        server = EmulatedServer(
            name=str(raw["name"]), uuid=str(raw["uuid"]), macs=tuple(raw["macs"]),
            disk_serials=tuple(raw["disk_serials"]), disk_gib=tuple(raw["disk_gib"]),
            memory_mib=int(raw["memory_mib"]), cpus=int(raw["cpus"]))
        keeper.defineXML(server.domain_xml())
    base = sushy.app.jinja_loader
    sushy.app.jinja_loader = ChoiceLoader(
        [FileSystemLoader(str(DRIVE_TEMPLATES))] + ([base] if base is not None else []))
    sys.argv = ["sushy-emulator", *rest]
    try:
        return int(sushy.main() or 0)
    finally:
        keeper.close()


if __name__ == "__main__":
    sys.exit(main())
