"""The per-VM sushy-emulator configuration and the lab's drive template."""

from __future__ import annotations

import json
from pathlib import Path

import flask

from provisioner.lab.bmc_emulators import storage_config, sushy_config
from provisioner.lab.bmc_server import TEMPLATES
from provisioner.lab.plan import LabPlan


def _settings(text: str) -> dict:
    scope: dict = {}
    exec(compile(text, "sushy.conf", "exec"), {}, scope)  # the file is Python, as sushy reads it
    return scope


def test_each_bmc_listens_on_its_address_with_its_own_tls_and_credentials():
    plan = LabPlan(netns="plabt", slot=2, disks=3)
    host = plan.host(2)
    conf = _settings(sushy_config(plan, host))
    bmc_dir = plan.bmc_dir(host)
    assert conf["SUSHY_EMULATOR_LISTEN_IP"] == str(host.bmc_address) == "198.19.32.12"
    assert conf["SUSHY_EMULATOR_LISTEN_PORT"] == 443
    assert conf["SUSHY_EMULATOR_SSL_CERT"] == str(bmc_dir / "tls.pem")
    assert conf["SUSHY_EMULATOR_SSL_KEY"] == str(bmc_dir / "tls.key")
    assert conf["SUSHY_EMULATOR_AUTH_FILE"] == str(bmc_dir / "htpasswd")
    assert conf["SUSHY_EMULATOR_ALLOWED_INSTANCES"] == [host.uuid, host.domain]
    assert conf["SUSHY_EMULATOR_FEATURE_SET"] == "full"
    other = _settings(sushy_config(plan, plan.host(1)))
    assert other["SUSHY_EMULATOR_AUTH_FILE"] != conf["SUSHY_EMULATOR_AUTH_FILE"]
    assert other["SUSHY_EMULATOR_ALLOWED_INSTANCES"][0] != host.uuid


def test_drives_carry_the_vm_disk_serials_and_sizes():
    plan = LabPlan(disks=3)
    host = plan.host(1)
    conf = _settings(sushy_config(plan, host))
    storage = conf["SUSHY_EMULATOR_STORAGE"][host.uuid][0]
    assert storage["Drives"] == ["Disk.1", "Disk.2", "Disk.3"]
    drives = conf["SUSHY_EMULATOR_DRIVES"][(host.uuid, "1")]
    assert [d["SerialNumber"] for d in drives] == list(host.disk_serials)
    sizes = {d["SerialNumber"]: d["CapacityBytes"] for d in drives}
    assert sizes[host.root_disk_serial] == 16 * 1024**3
    assert storage_config(plan, host)[1] == conf["SUSHY_EMULATOR_DRIVES"]


def test_the_drive_template_renders_the_real_serial_as_json():
    # sushy's own drive.json prints one fixed serial for every drive; ours must not.
    app = flask.Flask("t", template_folder=str(TEMPLATES))
    plan = LabPlan(disks=2)
    host = plan.host(1)
    drive = _settings(sushy_config(plan, host))["SUSHY_EMULATOR_DRIVES"][(host.uuid, "1")][1]
    with app.app_context():
        text = flask.render_template("drive.json", identity=host.uuid, storage_id="1", drive=drive)
    doc = json.loads(text)
    assert doc["SerialNumber"] == "PLAB-HOST01-DISK2"
    assert doc["CapacityBytes"] == 16 * 1024**3
    assert doc["@odata.id"] == f"/redfish/v1/Systems/{host.uuid}/Storage/1/Drives/Disk.2"
    assert Path(TEMPLATES, "drive.json").is_file()
