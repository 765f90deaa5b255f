"""Ubuntu autoinstall user-data validated against subiquity's published JSON schema.

The schema and subiquity's own examples come from the real-system corpus (skipped when absent);
the examples check that the validator used here accepts what subiquity accepts and rejects its
deliberately invalid example.
"""

from __future__ import annotations

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
    assert autoinstall.match_spec(RootDiskHint(wwn="0x5000c5")) == {
        "path": "/dev/disk/by-id/wwn-0x5000c5"
    }
    assert autoinstall.match_spec(RootDiskHint(by_path="/dev/disk/by-path/pci-0-ata-1")) == {
        "id_path": "pci-0-ata-1"
    }
    assert autoinstall.match_spec(RootDiskHint(size_gb_max=1000)) == {"size": "smallest"}


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
