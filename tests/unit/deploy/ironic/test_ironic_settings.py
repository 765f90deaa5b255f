"""settings.ironic: typed in the site schema (errors name file, line and key), credentials only
by reference, conductor groups from rack locations, root-disk hints in Ironic's syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.deploy.ironic.hints import matching_disks, root_device
from provisioner.deploy.ironic.inspection import compare
from provisioner.deploy.ironic.nodes import node_spec, update_ops
from provisioner.deploy.ironic.settings import conductor_group, ironic_settings
from provisioner.exceptions import InventoryError
from provisioner.inventory import Site, load_site
from provisioner.inventory.spec import RootDiskHint

SITE = Path(__file__).resolve().parents[3] / "fixtures" / "ironic" / "site" / "site.yml"


def site_with(tmp_path: Path, old: str, new: str) -> Site:
    text = SITE.read_text()
    assert old in text
    path = tmp_path / "site.yml"
    path.write_text(text.replace(old, new))
    return load_site(path)


def line_of(text: str) -> int:
    return 1 + SITE.read_text().splitlines().index(text)


def test_fixture_site_is_valid_and_groups_follow_the_rooms(monkeypatch):
    site = load_site(SITE)
    s = ironic_settings(site)
    assert (s.url, s.microversion, s.auth.type) == ("http://ironic.example.net:6385", "1.81",
                                                    "http_basic")
    groups = {h.name: conductor_group(site, h, s) for h in site.hosts}
    assert groups == {"gpu-a01-u03": "hall-a", "gpu-a01-u05": "hall-a", "gpu-b01-u03": "hall-b"}


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    microversion: \"1.81\"", "    microversion: \"1.46\"", "N >= 81"),
    ("    conductor_group: \"{room}\"", "    conductor_group: \"{building}\"",
     "unknown placeholder {building}"),
    ("    deploy_interface: direct", "    deploy_interface: iscsi", "deploy_interface"),
    ("    url: http://ironic.example.net:6385", "    url: ironic:6385", "is not a URL like"),
    ("    deploy_kernel: http://10.30.0.2:8080/ipa.kernel\n", "",
     "give both deploy_kernel and deploy_ramdisk"),
])
def test_bad_values_name_file_line_and_key(tmp_path, old, new, message):
    with pytest.raises(InventoryError, match=message.replace("{", r"\{").replace("}", r"\}")
                       ) as exc:
        site_with(tmp_path, old, new)
    assert f"{tmp_path / 'site.yml'}:" in str(exc.value)
    assert "[settings.ironic" in str(exc.value)


def test_a_password_written_in_clear_is_refused_without_repeating_it(tmp_path):
    with pytest.raises(InventoryError, match="never the secret itself") as exc:
        site_with(tmp_path, "      password: {env: IRONIC_PASSWORD}",
                  "      password: hunter2-plain")
    assert "hunter2-plain" not in str(exc.value)
    assert f":{line_of('      password: {env: IRONIC_PASSWORD}')} " in str(exc.value)


def test_a_rack_without_the_named_location_is_told_so(tmp_path):
    site = site_with(tmp_path, "    location: {room: hall-b, row: \"4\"}", "    location: {}")
    s = ironic_settings(site)
    with pytest.raises(InventoryError, match="rack 'b01' has no location 'room'"):
        conductor_group(site, site.host("gpu-b01-u03"), s)


def test_root_device_hints_in_ironic_syntax():
    assert root_device(RootDiskHint(serial="S6CK 1")) == {"serial": "s== S6CK 1"}
    assert root_device(RootDiskHint(wwn="naa.5000c500a1b2c3d4")) == {
        "wwn": "s== 0x5000c500a1b2c3d4"}
    # decimal GB widened to whole GiB: 400 GB = 372.5 GiB -> 372; 1000 GB = 931.3 -> 932
    assert root_device(RootDiskHint(model="DELLBOSS", size_gb_min=400, size_gb_max=1000)) == {
        "model": "<in> DELLBOSS", "size": "<range-in> [ 372 932 ]"}
    assert root_device(RootDiskHint(size_gb_min=0.5)) == {"size": ">= 1"}
    assert root_device(None) == {}


def test_the_hint_over_an_inspection_inventory():
    disks = [{"name": "sda", "serial": "A", "model": "DELLBOSS VD", "size": 480 * 10**9},
             {"name": "nvme0n1", "serial": "B", "model": "Dell NVMe", "size": 3840 * 10**9}]
    assert matching_disks(disks, RootDiskHint(model="dellboss")) == ["sda"]
    assert matching_disks(disks, RootDiskHint(size_gb_min=100)) == ["sda", "nvme0n1"]
    assert matching_disks(disks, RootDiskHint(serial="C")) == []


def test_inspection_differences_are_named(monkeypatch):
    monkeypatch.setenv("PROVISIONER_BMC_PASSWORD", "pw-123")
    site = load_site(SITE)
    host = site.host("gpu-a01-u05")  # root disk by serial S6CKNA0T300105, 9 disks expected
    inventory = {"inventory": {
        "interfaces": [{"name": "eno1", "mac_address": "B8:3F:D2:30:00:99"}],
        "disks": [{"name": "sda", "serial": "OTHER", "model": "DELLBOSS VD", "size": 480e9}],
        "memory": {"physical_mb": 2097152}, "cpu": {"count": 224}}}
    report = compare(host, "b8:3f:d2:30:00:05", inventory)
    assert report.notes == ["1 disk(s), the profile expects 9"]
    assert [b.split(" (")[0] for b in report.blocking] == [
        "the provisioning MAC b8:3f:d2:30:00:05 is not among the NICs Ironic found",
        "no disk matches the root-disk hint"]
    assert "2097152 MiB, 224 CPU(s)" in report.summary()


def test_node_fields_and_an_idempotent_update(monkeypatch):
    monkeypatch.setenv("PROVISIONER_BMC_PASSWORD", "pw-123")
    site = load_site(SITE)
    s = ironic_settings(site)
    spec = node_spec(site, site.host("gpu-b01-u03"), "B8:3F:D2:30:01:03", s)
    assert spec.mac == "b8:3f:d2:30:01:03"
    assert spec.driver_info["redfish_address"] == "https://10.31.1.103:8443"
    assert spec.driver_info["redfish_verify_ca"] == "/etc/ironic/bmc-ca.pem"
    assert "redfish_password" not in spec.driver_info  # only in the create body, as a Secret
    assert spec.create_body()["driver_info"]["redfish_password"].reveal() == "pw-123"
    assert spec.fields["automated_clean"] is False
    assert spec.fields["conductor_group"] == "hall-b"
    # a node Ironic shows back as it was created (password masked) needs no change
    shown = {**spec.fields, "name": spec.name, "provision_state": "active",
             "driver_info": {**spec.driver_info, "redfish_password": "******"}}
    assert update_ops(shown, spec, send_password=False) == ([], [])
    # interfaces of an active node are left alone; its BMC address is brought in line
    moved = {**shown, "deploy_interface": "ramdisk",
             "driver_info": {**shown["driver_info"], "redfish_address": "https://10.0.0.1"}}
    ops, changed = update_ops(moved, spec, send_password=False)
    assert changed == ["driver_info.redfish_address", "driver_info.redfish_password"]
    assert [o["path"] for o in ops] == ["/driver_info/redfish_address",
                                        "/driver_info/redfish_password"]


def test_an_ironic_site_without_the_block_fails_at_load(tmp_path):
    text = SITE.read_text()
    start = text.index("  ironic:\n")
    end = text.index("\nnetworks:")
    path = tmp_path / "site.yml"
    path.write_text(text[:start] + text[end:])
    with pytest.raises(InventoryError, match=r"deploy_backend ironic needs settings\.ironic"):
        load_site(path)
