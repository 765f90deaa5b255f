"""The lab's servers: libvirt domains (qemu under TCG), their disks and storage pool.

libvirtd runs in the root namespace (sushy-emulator needs it there); each VM NIC is a macvtap
on a veth whose other end sits on a bridge inside the lab namespace, so the guest's frames
only ever appear on provbr0/provbr1 and nothing is bridged in the root namespace.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from provisioner.exceptions import NotReady, ProvisionerError
from provisioner.lab.plan import LabHost, LabPlan

# PCI slots of the disks on bus 0: above everything libvirt places automatically.
DISK_SLOT0 = 0x10


class LabVMError(ProvisionerError):
    """libvirt refused to create or remove one of the lab's VMs, pools or disks."""


def _libvirt() -> Any:
    try:
        import libvirt
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise NotReady(
            "the Python libvirt bindings are not installed",
            hint="run scripts/install-deps (installs libvirt-dev and the [lab] extra)",
        ) from exc
    # Without this, libvirt prints every expected "domain not found" to stderr.
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    return libvirt


@contextmanager
def connect(uri: str) -> Iterator[Any]:
    """An open libvirt connection (closed afterwards); NotReady when libvirtd is not there."""
    libvirt = _libvirt()
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise NotReady(
            f"cannot connect to libvirt at {uri}: {exc}",
            hint="`provision lab up` starts libvirtd; check /var/log/libvirt/ if it fails",
        ) from exc
    try:
        yield conn
    finally:
        conn.close()


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def domain_xml(plan: LabPlan, host: LabHost) -> str:
    """The libvirt domain definition of one lab server."""
    dom = ET.Element("domain", type="qemu")  # TCG: KVM hangs on these machines
    _sub(dom, "name", host.domain)
    _sub(dom, "uuid", host.uuid)
    _sub(dom, "title", f"provisioner lab {plan.netns}: {host.name}")
    _sub(dom, "memory", str(plan.memory_mib), unit="MiB")
    _sub(dom, "vcpu", "1")
    if plan.firmware == "uefi":
        os_el = _sub(dom, "os", firmware="efi")
        _sub(os_el, "type", "hvm", arch="x86_64", machine="q35")
        fw = _sub(os_el, "firmware")
        _sub(fw, "feature", enabled="no", name="secure-boot")
        _sub(fw, "feature", enabled="no", name="enrolled-keys")
        _sub(os_el, "nvram", str(plan.host_dir(host) / "OVMF_VARS.fd"))
    else:
        os_el = _sub(dom, "os")
        _sub(os_el, "type", "hvm", arch="x86_64", machine="pc")
        # SeaBIOS and iPXE print to the serial console, so the console log shows PXE.
        _sub(os_el, "bios", useserial="yes")
    features = _sub(dom, "features")
    _sub(features, "acpi")
    _sub(features, "apic")
    _sub(dom, "clock", offset="utc")
    _sub(dom, "on_poweroff", "destroy")
    _sub(dom, "on_reboot", "restart")
    _sub(dom, "on_crash", "destroy")
    devices = _sub(dom, "devices")
    # Two orders matter and must differ. libvirt keeps disks sorted by target name and
    # sushy's "Hdd" boot override numbers them in that order, while SeaBIOS boots only the
    # first of them: so the root disk gets target vda. The guest enumerates by PCI slot:
    # the root disk gets the last slot, so the OS sees it last (never /dev/vda when D > 1).
    order = sorted(range(1, plan.disks + 1), key=lambda k: k != plan.root_disk_index)
    for target, k in enumerate(order):
        serial = host.disk_serials[k - 1]
        disk = _sub(devices, "disk", type="file", device="disk")
        # A throwaway lab disk needs no flushes; "unsafe" makes image writes several times
        # faster under TCG on a loaded machine.
        _sub(disk, "driver", name="qemu", type="qcow2", discard="unmap", cache="unsafe")
        _sub(disk, "source", file=str(plan.disk_path(host, k)))
        _sub(disk, "target", dev=f"vd{chr(ord('a') + target)}", bus="virtio")
        _sub(disk, "serial", serial)
        if k == plan.root_disk_index:
            _sub(disk, "boot", order="2")
        slot = DISK_SLOT0 + (plan.disks + 1 if k == plan.root_disk_index else k)
        _sub(disk, "address", type="pci", domain="0x0000", bus="0x00", slot=f"0x{slot:02x}")
    prov = _sub(devices, "interface", type="direct")
    _sub(prov, "mac", address=host.provisioning_mac)
    _sub(prov, "source", dev=host.prov_veth_host, mode="bridge")
    _sub(prov, "model", type="virtio")
    _sub(prov, "boot", order="1")
    data = _sub(devices, "interface", type="direct")
    _sub(data, "mac", address=host.data_mac)
    _sub(data, "source", dev=host.data_veth_host, mode="bridge")
    _sub(data, "model", type="virtio")
    # No option ROM: this NIC can never PXE boot, like a data-plane port on a real server.
    _sub(data, "rom", enabled="no")
    log = str(plan.console_log(host))
    serial_el = _sub(devices, "serial", type="file")
    _sub(serial_el, "source", path=log, append="on")
    _sub(serial_el, "target", port="0")
    console = _sub(devices, "console", type="file")
    _sub(console, "source", path=log, append="on")
    _sub(console, "target", type="serial", port="0")
    rng = _sub(devices, "rng", model="virtio")
    _sub(rng, "backend", "/dev/urandom", model="random")
    _sub(devices, "memballoon", model="none")
    return ET.tostring(dom, encoding="unicode")


def pool_xml(plan: LabPlan) -> str:
    """A directory storage pool holding the lab's disks (sushy lists pool volumes as storage)."""
    pool = ET.Element("pool", type="dir")
    _sub(pool, "name", plan.pool_name)
    target = _sub(pool, "target")
    _sub(target, "path", str(plan.disk_dir))
    return ET.tostring(pool, encoding="unicode")


def volume_xml(name: str, size_gib: int) -> str:
    """An empty, sparse qcow2 disk (the deploy writes the OS onto it)."""
    vol = ET.Element("volume")
    _sub(vol, "name", name)
    _sub(vol, "capacity", str(size_gib), unit="GiB")
    _sub(vol, "allocation", "0")
    target = _sub(vol, "target")
    _sub(target, "format", type="qcow2")
    return ET.tostring(vol, encoding="unicode")


def ensure_pool(conn: Any, plan: LabPlan) -> Any:
    """Define, build and start the lab's storage pool if needed; return it."""
    libvirt = _libvirt()
    plan.disk_dir.mkdir(parents=True, exist_ok=True)
    try:
        pool = conn.storagePoolLookupByName(plan.pool_name)
    except libvirt.libvirtError:
        try:
            pool = conn.storagePoolDefineXML(pool_xml(plan), 0)
        except libvirt.libvirtError as exc:
            raise LabVMError(f"cannot define storage pool {plan.pool_name}: {exc}") from exc
    if not pool.isActive():
        pool.create(0)
    pool.refresh(0)
    return pool


def ensure_volumes(pool: Any, plan: LabPlan, host: LabHost) -> list[int]:
    """Create the host's disks that do not exist yet (existing disks are kept as they are);
    return the numbers of the disks created."""
    libvirt = _libvirt()
    created: list[int] = []
    for k in range(1, plan.disks + 1):
        name = plan.volume_name(host, k)
        try:
            pool.storageVolLookupByName(name)
        except libvirt.libvirtError:
            try:
                pool.createXML(volume_xml(name, plan.disk_size_gib(k)), 0)
            except libvirt.libvirtError as exc:
                raise LabVMError(f"cannot create disk {name} for {host.name}: {exc}") from exc
            created.append(k)
    return created


def ensure_domain(conn: Any, plan: LabPlan, host: LabHost) -> bool:
    """Define the host's domain if it is not defined; return True when it was created."""
    libvirt = _libvirt()
    plan.host_dir(host).mkdir(parents=True, exist_ok=True)
    try:
        conn.lookupByName(host.domain)
        return False
    except libvirt.libvirtError:
        pass
    try:
        conn.defineXML(domain_xml(plan, host))
    except libvirt.libvirtError as exc:
        raise LabVMError(f"cannot define VM {host.domain}: {exc}") from exc
    return True


def lab_domains(conn: Any, plan: LabPlan) -> list[str]:
    """Names of the defined domains that belong to this lab, by naming convention."""
    return sorted(d.name() for d in conn.listAllDomains(0) if plan.owns_domain(d.name()))


def power_states(conn: Any, plan: LabPlan) -> dict[str, str]:
    """Power state ("On"/"Off"/...) of each of the lab's domains."""
    libvirt = _libvirt()
    names = {
        libvirt.VIR_DOMAIN_RUNNING: "On",
        libvirt.VIR_DOMAIN_BLOCKED: "On",
        libvirt.VIR_DOMAIN_PAUSED: "Paused",
        libvirt.VIR_DOMAIN_SHUTDOWN: "PoweringOff",
        libvirt.VIR_DOMAIN_SHUTOFF: "Off",
        libvirt.VIR_DOMAIN_CRASHED: "Off",
    }
    out: dict[str, str] = {}
    for name in lab_domains(conn, plan):
        state, _reason = conn.lookupByName(name).state()
        out[name] = names.get(state, "Unknown")
    return out


def remove_domains(conn: Any, plan: LabPlan) -> list[str]:
    """Power off and undefine every domain of this lab (with its NVRAM); return their names."""
    libvirt = _libvirt()
    removed = []
    flags = (
        libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
        | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
        | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
    )
    for name in lab_domains(conn, plan):
        dom = conn.lookupByName(name)
        try:
            if dom.isActive():
                dom.destroy()
            dom.undefineFlags(flags)
        except libvirt.libvirtError as exc:
            raise LabVMError(f"cannot remove VM {name}: {exc}") from exc
        removed.append(name)
    return removed


def remove_pool(conn: Any, plan: LabPlan) -> bool:
    """Delete the lab's disks and storage pool; return True when a pool was there."""
    libvirt = _libvirt()
    try:
        pool = conn.storagePoolLookupByName(plan.pool_name)
    except libvirt.libvirtError:
        return False
    try:
        if pool.isActive():
            pool.refresh(0)
            for vol in pool.listAllVolumes(0):
                vol.delete(0)
            pool.destroy()
        pool.undefine()
    except libvirt.libvirtError as exc:
        raise LabVMError(f"cannot remove storage pool {plan.pool_name}: {exc}") from exc
    return True


def other_domains(conn: Any) -> int:
    """How many defined domains exist at all (to know whether libvirtd is still in use)."""
    return len(conn.listAllDomains(0))
