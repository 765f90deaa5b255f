"""The libvirt domain, pool and volume definitions of lab servers."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from provisioner.lab.plan import LabPlan
from provisioner.lab.vms import domain_xml, pool_xml, volume_xml


def _dom(plan: LabPlan, index: int = 1) -> ET.Element:
    return ET.fromstring(domain_xml(plan, plan.host(index)))


def test_bios_domain_is_tcg_with_pxe_first_then_the_root_disk():
    plan = LabPlan(disks=3)
    host = plan.host(1)
    dom = _dom(plan)
    assert dom.get("type") == "qemu"  # KVM hangs on these machines
    assert dom.findtext("name") == "provlab-host01"
    assert dom.findtext("uuid") == host.uuid
    assert dom.find("os/type").get("machine") == "pc"
    assert dom.find("os/bios").get("useserial") == "yes"
    disks = dom.findall("devices/disk")
    # libvirt's (and so sushy's Hdd boot) order: the root disk first, as target vda ...
    assert [d.findtext("serial") for d in disks] == [
        "PLAB-HOST01-DISK2",
        "PLAB-HOST01-DISK1",
        "PLAB-HOST01-DISK3",
    ]
    assert [d.find("target").get("dev") for d in disks] == ["vda", "vdb", "vdc"]
    # ... but the guest enumerates by PCI slot, where the root disk comes last.
    slots = {d.findtext("serial"): int(d.find("address").get("slot"), 16) for d in disks}
    assert max(slots, key=slots.__getitem__) == host.root_disk_serial
    assert len(set(slots.values())) == 3
    booting = [d for d in disks if d.find("boot") is not None]
    assert [d.findtext("serial") for d in booting] == ["PLAB-HOST01-DISK2"]
    assert booting[0].find("boot").get("order") == "2"
    assert {d.find("driver").get("cache") for d in disks} == {"unsafe"}
    assert disks[0].find("source").get("file") == str(plan.disk_path(host, 2))
    prov, data = dom.findall("devices/interface")
    assert prov.find("mac").get("address") == "52:54:00:18:00:01"
    assert prov.find("source").get("dev") == "provlab01p"
    assert prov.find("boot").get("order") == "1"
    assert data.find("mac").get("address") == "52:54:00:18:01:01"
    assert data.find("source").get("dev") == "provlab01d"
    assert data.find("rom").get("enabled") == "no"  # the data NIC can never PXE
    assert data.find("boot") is None
    log = str(plan.console_log(host))
    assert dom.find("devices/serial/source").get("path") == log
    assert dom.find("devices/console/source").get("path") == log


def test_uefi_domain_uses_ovmf_without_secure_boot_and_keeps_nvram_in_the_lab():
    plan = LabPlan(firmware="uefi")
    host = plan.host(2)
    dom = _dom(plan, 2)
    os_el = dom.find("os")
    assert os_el.get("firmware") == "efi"
    assert os_el.find("type").get("machine") == "q35"
    features = {f.get("name"): f.get("enabled") for f in os_el.findall("firmware/feature")}
    assert features == {"secure-boot": "no", "enrolled-keys": "no"}
    assert os_el.findtext("nvram") == str(plan.host_dir(host) / "OVMF_VARS.fd")
    assert os_el.find("bios") is None


def test_memory_follows_the_plan():
    dom = _dom(LabPlan(memory_mib=768))
    assert dom.find("memory").text == "768" and dom.find("memory").get("unit") == "MiB"
    assert dom.findtext("vcpu") == "1"


def test_pool_and_volume():
    plan = LabPlan(netns="plabt")
    pool = ET.fromstring(pool_xml(plan))
    assert pool.get("type") == "dir"
    assert pool.findtext("name") == "plabt-disks"
    assert pool.findtext("target/path") == str(plan.disk_dir)
    vol = ET.fromstring(volume_xml("lab-host01-disk2.qcow2", 16))
    assert vol.find("capacity").text == "16" and vol.find("capacity").get("unit") == "GiB"
    assert vol.find("target/format").get("type") == "qcow2"
