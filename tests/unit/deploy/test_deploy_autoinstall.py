"""Ubuntu autoinstall user-data validated against subiquity's published JSON schema.

The schema and subiquity's own examples come from the real-system corpus (skipped when absent);
the examples check that the validator used here accepts what subiquity accepts and rejects its
deliberately invalid example.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from netaddr import IPAddress, IPNetwork

from provisioner.deploy import autoinstall, cloudinit
from provisioner.exceptions import InputError
from provisioner.inventory.spec import RootDiskHint
from tests.conftest import corpus_path

AI = ("autoinstall", "subiquity-autoinstall-schema-and-examples")


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(corpus_path(*AI, "autoinstall-schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


SEED = cloudinit.SeedSpec(
    hostname="gpu-r01-u03",
    instance_id="gpu-r01-u03-abc",
    mac="b8:3f:d2:00:00:03",
    address=IPAddress("10.10.0.67"),
    network=IPNetwork("10.10.0.0/21"),
    gateway=IPAddress("10.10.0.1"),
    dns=("10.10.0.2",),
    ssh_authorized_keys=("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake provision@laptop",),
    ntp_servers=("10.10.0.2",),
    apt_proxy="http://10.10.0.3:3142",
    phone_home_url="http://10.10.0.3:8080/phone-home/gpu-r01-u03/BOOTTOKEN",
)
CB = autoinstall.CallbackSpec(
    base_url="http://10.10.0.3:8080/callback/gpu-r01-u03",
    token="CALLBACKTOKEN",
    pick_disk_url="http://10.10.0.3:8080/static/pick-disk.sh",
)


def _doc(hint: RootDiskHint | None) -> dict:
    text = autoinstall.user_data(SEED, hint, CB)
    assert text.startswith("#cloud-config\n")
    return yaml.safe_load(text)["autoinstall"]


@pytest.mark.parametrize(
    "hint",
    [
        RootDiskHint(serial="S6XXNX0T123456"),
        RootDiskHint(model="Dell BOSS-N1", size_gb_min=400, size_gb_max=1000),
        RootDiskHint(wwn="0x5000c500a1b2c3d4"),
        RootDiskHint(by_path="/dev/disk/by-path/pci-0000:03:00.0-ata-1"),
        RootDiskHint(size_gb_min=400),
    ],
)
def test_generated_user_data_validates_against_subiquity_schema(hint: RootDiskHint) -> None:
    doc = _doc(hint)
    errors = sorted(validator().iter_errors(doc), key=str)
    assert not errors, "\n".join(e.message for e in errors)


def test_user_data_content() -> None:
    doc = _doc(RootDiskHint(serial="S6XXNX0T123456"))
    assert doc["storage"] == {"layout": {"name": "direct", "match": {"serial": "*S6XXNX0T123456"}}}
    assert doc["proxy"] == "http://10.10.0.3:3142"
    assert doc["user-data"]["ntp"] == {"enabled": True, "servers": ["10.10.0.2"]}
    assert doc["network"]["ethernets"]["prov0"]["match"] == {"macaddress": "b8:3f:d2:00:00:03"}
    assert doc["ssh"]["authorized-keys"] == list(SEED.ssh_authorized_keys)
    assert doc["shutdown"] == "poweroff"
    assert "identity" not in doc  # no password anywhere: users come from user-data
    # phone home: started first, the disk guard next, finished/failed with the log and the token
    early = doc["early-commands"]
    assert "callback/gpu-r01-u03/started" in early[0]
    guard = early[1][2]
    assert "pick-disk.sh --serial S6XXNX0T123456" in guard
    assert "callback/gpu-r01-u03/failed" in guard and "exit 1" in guard
    late = doc["late-commands"][0][2]
    assert "Authorization: Bearer CALLBACKTOKEN" in late
    assert late.rstrip().endswith("callback/gpu-r01-u03/finished || true")
    assert "callback/gpu-r01-u03/failed" in doc["error-commands"][0][2]


def test_match_specs() -> None:
    # subiquity has no wwn key and matches `path` against the kernel path: the guard pins it.
    assert autoinstall.match_spec(RootDiskHint(wwn="0x5000c5")) == {
        "path": autoinstall.ROOT_DISK_PLACEHOLDER
    }
    assert autoinstall.match_spec(RootDiskHint(by_path="/dev/disk/by-path/pci-0-ata-1")) == {
        "id_path": "pci-0-ata-1"
    }
    # size bounds only: "size: smallest" would take any smaller disk (a USB stick): pinned too
    assert autoinstall.match_spec(RootDiskHint(size_gb_max=1000)) == {
        "path": autoinstall.ROOT_DISK_PLACEHOLDER
    }


def test_no_hint_is_refused() -> None:
    with pytest.raises(InputError, match="root-disk hint"):
        autoinstall.user_data(SEED, None, CB)


def _examples(folder: str) -> list[Path]:
    return sorted(corpus_path(*AI, folder).glob("*.yaml"))


def test_subiquity_examples_behave_under_this_validator() -> None:
    v = validator()
    valid, invalid = [], []
    for path in _examples("examples-autoinstall"):
        doc = yaml.safe_load(path.read_text())
        doc = doc.get("autoinstall", doc) if isinstance(doc, dict) else doc
        (invalid if list(v.iter_errors(doc)) else valid).append(path.name)
    assert "invalid.yaml" in invalid
    assert {"most-options.yaml", "short.yaml", "user-data.yaml"} <= set(valid)


def test_invalid_example_is_rejected_for_the_right_reason() -> None:
    doc = yaml.safe_load(corpus_path(*AI, "examples-autoinstall", "invalid.yaml").read_text())
    messages = [e.message for e in validator().iter_errors(doc)]
    assert any("layou" in m for m in messages), messages


def test_quickstart_user_data_wrapper_validates() -> None:
    text = corpus_path(*AI, "nocloud-user-data.from-quickstart").read_text()
    assert text.startswith("#cloud-config")
    assert not list(validator().iter_errors(yaml.safe_load(text)["autoinstall"]))


# --- the match against the installer's own udev properties -----------------------------------

UDEV = Path(__file__).resolve().parents[2] / "fixtures" / "udev"


def udev_db() -> dict[str, dict[str, str]]:
    """Every disk of tests/fixtures/udev as ``udevadm info -q property`` prints it."""
    out = {}
    for f in sorted(UDEV.glob("*.properties")):
        props = dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line)
        out[props["DEVNAME"]] = props
    return out


def installer_picks(match: dict, db: dict[str, dict[str, str]]) -> list[str]:
    """The disks a subiquity match selects: each key a case-sensitive glob on its udev property
    (``path`` on the kernel path), all keys must hold. Written from subiquity's documented
    semantics (models/storage.py _make_matchers), not copied."""
    prop = {"serial": "ID_SERIAL", "model": "ID_MODEL", "id_path": "ID_PATH", "vendor": "ID_VENDOR"}
    picked = []
    for dev, p in db.items():
        ok = all(fnmatch.fnmatchcase(dev if k == "path" else p.get(prop[k], ""), v)
                 for k, v in match.items() if k != "size")
        if ok:
            picked.append(dev)
    return picked


@pytest.mark.parametrize(
    ("hint", "want"),
    [
        (RootDiskHint(serial="21142D3A1B2C"), "/dev/sda"),  # ATA: ID_SERIAL is model_serial
        (RootDiskHint(serial="S64HNE0T100001"), "/dev/nvme1n1"),  # NVMe: model with spaces
        (RootDiskHint(serial="lab-root-01"), "/dev/vda"),  # virtio: the bare serial
        (RootDiskHint(model="Micron 5300 MTFDDAK480TDS"), "/dev/sda"),  # sysfs spelling
        (RootDiskHint(model="Micron_5300_MTFDDAK480TDS"), "/dev/sda"),  # udev spelling
        (RootDiskHint(model="ST4000NM0295"), "/dev/sdb"),
        (RootDiskHint(by_path="/dev/disk/by-path/pci-0000:3b:00.0-sas-phy0-lun-0"), "/dev/sdb"),
        (RootDiskHint(by_path="pci-0000:42:00.0-nvme-1"), "/dev/nvme1n1"),
    ],
)
def test_match_selects_the_hinted_disk_by_the_installers_udev_properties(hint, want) -> None:
    assert installer_picks(autoinstall.match_spec(hint), udev_db()) == [want]


def test_nvme_model_with_spaces_fits_both_data_disks_and_the_deploy_check_refuses_it() -> None:
    hint = RootDiskHint(model="SAMSUNG MZQL23T8HCLS-00A07")
    assert installer_picks(autoinstall.match_spec(hint), udev_db()) == ["/dev/nvme0n1", "/dev/nvme1n1"]
    with pytest.raises(InputError, match="also fits the data disks"):
        autoinstall.user_data(SEED, hint, CB, data_disk_model="SAMSUNG MZQL23T8HCLS-00A07")
    narrowed = RootDiskHint(model="SAMSUNG MZQL23T8HCLS-00A07", serial="S64HNE0T100000")
    autoinstall.user_data(SEED, narrowed, CB, data_disk_model="SAMSUNG MZQL23T8HCLS-00A07")


def test_wwn_match_selects_nothing_until_the_guard_pins_the_resolved_disk() -> None:
    match = autoinstall.match_spec(RootDiskHint(wwn="0x5000c500a1b2c3d4"))
    db = udev_db()
    assert installer_picks(match, db) == []  # fails closed without the guard
    assert installer_picks({**match, "path": "/dev/sdb"}, db) == ["/dev/sdb"]
    guard = _doc(RootDiskHint(wwn="0x5000c500a1b2c3d4"))["early-commands"][1][2]
    assert "--pin /autoinstall.yaml --placeholder /dev/provisioner-root-disk" in guard


def test_glob_characters_in_a_hint_match_only_themselves() -> None:
    match = autoinstall.match_spec(RootDiskHint(serial="AB[12]*?"))
    assert fnmatch.fnmatchcase("Model_AB[12]*?", match["serial"])
    assert not fnmatch.fnmatchcase("Model_AB1XY", match["serial"])


def test_deploy_time_storage_check_rejects_a_tampered_match() -> None:
    hint = RootDiskHint(serial="21142D3A1B2C")
    doc = autoinstall.autoinstall_dict(SEED, hint, CB)
    autoinstall.check_storage(doc, hint)
    doc["storage"]["layout"]["match"] = {"path": "/dev/disk/by-id/wwn-0x500a07512d3a1b2c"}
    with pytest.raises(InputError, match="is not the hint's"):
        autoinstall.check_storage(doc, hint)
    doc["storage"] = {"config": [{"type": "disk", "id": "d0", "path": "/dev/nvme0n1"}]}
    with pytest.raises(InputError, match="single layout"):
        autoinstall.check_storage(doc, hint)


def test_mirrored_root_config_validates_and_names_only_the_two_resolved_disks() -> None:
    hint = RootDiskHint(model="MTFDDAV480TDU", size_gb_max=1000)
    text = autoinstall.user_data(SEED, hint, CB, mirror=True)
    doc = yaml.safe_load(text)["autoinstall"]
    assert not sorted(validator().iter_errors(doc), key=str)
    config = doc["storage"]["config"]
    assert [a["path"] for a in config if a["type"] == "disk"] == list(autoinstall.MIRROR_DISKS)
    raid = next(a for a in config if a["type"] == "raid")
    assert raid["raidlevel"] == 1 and raid["devices"] == ["md-part-0", "md-part-1"]
    assert "--count 2 --pin /autoinstall.yaml --placeholder /dev/provisioner-root-disk-" in (
        doc["early-commands"][1][2])
    # A data disk slipped into the config, or an action pointing nowhere: refused.
    config.append({"type": "disk", "id": "data", "path": "/dev/nvme0n1", "wipe": "superblock"})
    with pytest.raises(InputError, match="exactly the two root disks"):
        autoinstall.check_storage(doc, hint, mirror=True)
    config.pop()
    config.append({"type": "format", "id": "f", "volume": "nowhere", "fstype": "xfs"})
    with pytest.raises(InputError, match="does not define"):
        autoinstall.check_storage(doc, hint, mirror=True)
