"""Lab VM, pool and disk management against libvirt's in-process test driver (no daemon)."""

from __future__ import annotations

import pytest

from provisioner.exceptions import NotReady
from provisioner.lab import vms
from provisioner.lab.plan import LabPlan


@pytest.fixture
def conn(tmp_path):
    node = tmp_path / "node.xml"
    node.write_text("<node></node>")  # a fresh, empty hypervisor per test
    with vms.connect(f"test://{node}") as c:
        yield c


@pytest.fixture
def plan(tmp_path):
    return LabPlan(netns="plabt", hosts=2, disks=3, state_dir=tmp_path / "state")


def test_pool_disks_and_domains_are_created_once(conn, plan):
    pool = vms.ensure_pool(conn, plan)
    for host in plan.lab_hosts:
        vms.ensure_volumes(pool, plan, host)
        assert vms.ensure_domain(conn, plan, host) is True
    assert vms.ensure_pool(conn, plan).name() == "plabt-disks"
    for host in plan.lab_hosts:
        vms.ensure_volumes(pool, plan, host)
        assert vms.ensure_domain(conn, plan, host) is False
    assert sorted(pool.listVolumes()) == sorted(
        plan.volume_name(h, k) for h in plan.lab_hosts for k in (1, 2, 3)
    )
    root = pool.storageVolLookupByName(plan.volume_name(plan.host(1), 2))
    assert root.info()[1] == 16 * 1024**3
    assert vms.lab_domains(conn, plan) == ["plabt-host01", "plabt-host02"]


def test_power_states_and_sweeping_only_this_labs_domains(conn, plan):
    other = LabPlan(netns="plabo", state_dir=plan.state_dir.parent / "other")
    vms.ensure_domain(conn, plan, plan.host(1))
    vms.ensure_domain(conn, other, other.host(1))
    conn.lookupByName("plabt-host01").create()
    assert vms.power_states(conn, plan) == {"plabt-host01": "On"}
    assert vms.other_domains(conn) == 2
    assert vms.remove_pool(conn, plan) is False  # never created
    pool = vms.ensure_pool(conn, plan)
    vms.ensure_volumes(pool, plan, plan.host(1))
    assert vms.remove_pool(conn, plan) is True
    assert "plabt-disks" not in [p.name() for p in conn.listAllStoragePools(0)]


def test_a_domain_libvirt_refuses_is_reported_with_its_name(conn, plan):
    host = plan.host(1)
    # Someone else's domain already holds the UUID the lab would give this VM.
    xml = vms.domain_xml(plan, host).replace("<name>plabt-host01</name>", "<name>intruder</name>")
    conn.defineXML(xml)
    with pytest.raises(vms.LabVMError, match="cannot define VM plabt-host01"):
        vms.ensure_domain(conn, plan, host)


def test_remove_failure_names_the_vm(conn, plan):
    vms.ensure_domain(conn, plan, plan.host(1))
    # The test driver cannot drop NVRAM, as an old libvirt could not: the error names the VM.
    with pytest.raises(vms.LabVMError, match="cannot remove VM plabt-host01"):
        vms.remove_domains(conn, plan)


def test_unreachable_libvirt_is_not_ready():
    bad = "qemu+unix:///system?socket=/nonexistent/libvirt-sock"
    with pytest.raises(NotReady) as err, vms.connect(bad):
        pass
    assert "cannot connect to libvirt" in str(err.value) and "provision lab up" in str(err.value)
