"""The generated inventory/lab/site.yml loads with the foundation's loader, unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest
from netaddr import IPAddress

from provisioner.deploy.embedded.settings import EmbeddedSettings
from provisioner.exceptions import InputError
from provisioner.inventory import load_site
from provisioner.inventory.ansible_view import ansible_inventory
from provisioner.inventory.credentials import resolve_credentials
from provisioner.lab import sitegen
from provisioner.lab.plan import LabPlan


@pytest.fixture
def lab_site(tmp_path, write_lab_site):
    return write_lab_site(
        LabPlan(netns="plabt", hosts=3, disks=3, state_dir=tmp_path / "state", inventory_dir=tmp_path)
    )


def test_generated_site_loads_and_describes_each_vm(lab_site):
    plan = lab_site
    site = load_site("lab", inventory_dir=plan.inventory_dir)
    assert site.name == "lab"
    assert [h.name for h in site.hosts] == ["lab-host01", "lab-host02", "lab-host03"]
    host = site.host("lab-host02")
    lab_host = plan.host(2)
    assert host.rack == "lab1"
    assert host.bmc.address == str(lab_host.bmc_address)
    assert host.bmc.port == 443
    assert host.bmc.vendor == "generic"
    assert host.bmc.credentials == "lab-bmc-02"
    assert host.root_disk.serial == "PLAB-HOST02-DISK2"
    assert host.provisioning_mac is None  # discovery finds it through the NIC rule
    assert host.profile.provisioning_nic.mac_prefix == plan.mac_prefix
    assert host.profile.gpus == 0 and host.profile.ib_hcas == 0
    assert host.addresses["provisioning"] not in plan.provisioning_net[1:100]
    assert host.addresses["provisioning"] in plan.provisioning_net
    assert host.addresses["bmc"] == IPAddress("198.19.0.12")  # the plan agrees with the BMC
    assert host.vars["lab_console_log"] == str(plan.console_log(lab_host))
    assert site.resolve_path(site.settings.redfish.ca_bundle) == plan.ca_bundle_path
    assert site.settings.redfish.verify_tls is True
    assert site.settings.ntp_servers == ["198.18.254.1"]
    assert site.settings.ssh_private_key == str(plan.ssh_dir / "id_ed25519")


def test_lab_hosts_install_docker_from_the_debian_archive(lab_site):
    """The VMs reach only the Debian archive through the apt proxy, never download.docker.com:
    site.yml's docker role must take the distribution's docker.io there."""
    site = load_site("lab", inventory_dir=lab_site.inventory_dir)
    view = ansible_inventory(site)
    for name in ("lab-host01", "lab-host03"):
        groups = [g for g, body in view["groups"].items() if name in body["hosts"]]
        merged = {k: v for g in groups for k, v in view["groups"][g]["vars"].items()}
        merged.update(view["hostvars"][name])
        assert merged["docker_package_source"] == "distribution", groups


def test_each_bmc_has_its_own_credentials_from_files(lab_site):
    site = load_site("lab", inventory_dir=lab_site.inventory_dir)
    one = resolve_credentials(site, "lab-bmc-01")
    two = resolve_credentials(site, "lab-bmc-02")
    assert one.username == "admin"
    assert one.password.reveal() != two.password.reveal()
    assert one.password.reveal() == lab_site.password_file(lab_site.host(1)).read_text().strip()
    assert one.password.reveal() not in lab_site.site_path.read_text()


def test_embedded_settings_point_the_deploy_into_the_lab_namespace(lab_site):
    site = load_site("lab", inventory_dir=lab_site.inventory_dir)
    emb = EmbeddedSettings.model_validate(site.settings.embedded)
    assert emb.netns == "plabt"
    assert emb.interface == "provbr0"
    assert emb.server_address == "198.18.0.1"
    assert (emb.http_address, emb.http_port) == ("198.18.254.1", 8080)
    assert emb.log_dir == str(lab_site.state_dir / "deploy")
    # the lab deploys with peer serving and kexec (and a stream per host: nobody waits)
    assert (emb.max_image_streams, emb.peer_serving, emb.installed_boot) == (None, True, "kexec")


def test_rewriting_an_unchanged_site_keeps_the_file(lab_site):
    before = lab_site.site_path.stat().st_mtime_ns
    text = lab_site.site_path.read_text()
    sitegen.write_site(lab_site, text, lab_site.ca_bundle_path.read_bytes())
    assert lab_site.site_path.stat().st_mtime_ns == before


def test_remove_site_removes_only_what_the_lab_generated(lab_site, tmp_path):
    removed = sitegen.remove_site(lab_site)
    assert set(removed) == {lab_site.site_path, lab_site.ca_bundle_path}
    assert not lab_site.site_dir.exists()
    lab_site.site_dir.mkdir()
    lab_site.site_path.write_text("site: lab\n# written by hand\n")
    assert sitegen.remove_site(lab_site) == []
    assert lab_site.site_path.exists()


def test_another_labs_site_is_neither_overwritten_nor_removed(lab_site):
    other = replace(lab_site, netns="plabo")
    text = lab_site.site_path.read_text()
    with pytest.raises(InputError) as err:
        sitegen.write_site(other, "site: lab\n", b"")
    assert "lab 'plabt'" in str(err.value) and "PROVISIONER_INVENTORY" in str(err.value)
    assert sitegen.remove_site(other) == []
    assert lab_site.site_path.read_text() == text
    assert sitegen.site_owner(lab_site) == "plabt"
    lab_site.site_path.write_text("site: lab\n")
    with pytest.raises(InputError, match="no `generated by` line"):
        sitegen.check_site_writable(lab_site)
