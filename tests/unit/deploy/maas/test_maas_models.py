"""MAAS API 2.0 objects parsed from samples written in MAAS's format (tests/fixtures/maas/)."""

from __future__ import annotations

import json
from pathlib import Path

from provisioner.deploy.maas.models import BlockDevice, Machine
from provisioner.deploy.maas.status import LABELS, NodeStatus

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "maas"


def load(name: str):
    return json.loads((FIX / name).read_text())


def test_machine_sample_parses_with_the_fields_the_backend_reads():
    m = Machine.model_validate(load("machine.json"))
    assert m.system_id == "x7kq3m" and m.hostname == "gpu-m01-u03"
    assert m.node_status is NodeStatus.READY and m.status_name == NodeStatus.READY.label
    assert m.power_type == "redfish"
    assert m.macs == {"b8:3f:d2:10:00:03", "b8:3f:d2:10:00:83"}
    assert m.boot_disk is not None and m.boot_disk.model == "DELLBOSS VD"
    assert m.describe() == "gpu-m01-u03 (x7kq3m) in state 'Ready'"


def test_unknown_status_code_is_kept_but_not_guessed():
    raw = load("machine.json") | {"status": 99, "status_name": "Hibernating"}
    m = Machine.model_validate(raw)
    assert m.node_status is None and "Hibernating" in m.describe()


def test_block_devices_sample():
    devs = [BlockDevice.model_validate(d) for d in load("blockdevices.json")]
    assert [d.name for d in devs] == ["sda", "nvme0n1", "nvme1n1"]
    assert round(devs[0].size_gb) == 480
    assert "serial S6CKNA0T200123" in devs[1].describe()


def test_every_status_has_the_name_maas_shows():
    assert set(LABELS) == set(NodeStatus)
    assert NodeStatus(11).label == "Failed deployment"
    assert NodeStatus(2).label == "Failed commissioning"
    assert NodeStatus(14).label == "Disk erasing"
