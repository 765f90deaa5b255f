"""The parsers behind the GPU-fabric roles (roles/*/filter_plugins), against the real lspci
recording in the corpus and the formats the scenarios replay. The roles themselves run under
molecule in tests/integration/roles/test_roles_molecule.py (every role with a scenario)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import corpus_path

REPO = Path(__file__).resolve().parents[3]


def _plugin(role: str, name: str) -> ModuleType:
    path = REPO / "roles" / role / "filter_plugins" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{role}_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


acs = _plugin("acs_disable", "acs_lspci")
disks = _plugin("zfs_raidz", "zfs_raidz_disks")
mft = _plugin("ofed", "ofed_firmware")
ZFS_STANDIN = REPO / "roles/zfs_raidz/molecule/default/standin"


def test_acs_parser_on_a_real_hgx_h100_lspci() -> None:
    text = corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv").read_text()
    devices = acs.acs_devices(text, ["0000:82:01.0"])
    assert len(devices) == 55  # every ACSCtl line of the recording
    bridges = [d for d in devices if d["bridge"]]
    assert len(bridges) == 50
    on = {d["address"]: d for d in bridges if d["acs_enabled"]}
    # The PMC-Sierra switch ports redirect P2P; two Intel ports only validate sources.
    assert sorted(on) == ["0000:00:0c.0", "0000:00:0e.0", "0000:82:00.0", "0000:82:01.0",
                          "0000:82:02.0", "0000:82:03.0"]
    assert on["0000:82:00.0"]["acs_enabled"] == ["CmpltRedir", "ReqRedir", "SrcValid", "UpstreamFwd"]
    assert on["0000:82:01.0"]["excluded"] and not on["0000:82:00.0"]["excluded"]
    # ConnectX-6 Dx functions carry ACS too, but they are endpoints, never touched.
    cx6 = next(d for d in devices if d["address"] == "0000:1b:00.0")
    assert not cx6["bridge"]


def test_acs_parser_reads_class_ids_of_lspci_nn() -> None:
    text = (REPO / "roles/acs_disable/molecule/default/standin/lspci-D-nn-vvv.hgx-h100.txt").read_text()
    devices = {d["address"]: d for d in acs.acs_devices(text)}
    assert devices["0000:17:00.0"]["bridge"]
    assert not devices["0000:1b:00.0"]["bridge"]  # Ethernet controller [0200]
    assert devices["0000:17:1f.0"]["acs_enabled"] == []


def _lsblk(layout: str) -> dict:
    return json.loads((ZFS_STANDIN / f"lsblk.{layout}.json").read_text())


BY_ID = (ZFS_STANDIN / "by-id.hgx-8nvme.txt").read_text() if ZFS_STANDIN.is_dir() else ""


def test_drive_selection_takes_data_nvme_by_id_and_never_the_md_boot_drives() -> None:
    report = disks.zfs_raidz_drives(_lsblk("hgx-8nvme"), BY_ID)
    assert [d["name"] for d in report["candidates"]] == [f"nvme{i}n1" for i in range(8)]
    # Model+serial names, not the EUI or the namespace "_1" aliases.
    assert all(d["by_id"].startswith("nvme-Micron_7450_") and not d["by_id"].endswith("_1")
               for d in report["candidates"])
    assert sorted(d["name"] for d in report["os"]) == ["nvme8n1", "nvme9n1"]
    assert [d["name"] for d in report["unusable"]] == ["sda"]  # BMC virtual media (USB)
    assert report["foreign"] == []


def test_drive_with_foreign_filesystem_is_refused_unless_forced_or_excluded() -> None:
    report = disks.zfs_raidz_drives(_lsblk("hgx-8nvme-foreign"), BY_ID)
    assert [d["summary"] for d in report["foreign"]] == [
        "/dev/disk/by-id/nvme-Micron_7450_MTFDKCC3T8TFS_2301E6A13F47 (nvme3n1) holds a gpt "
        "partition table, ext4 on nvme3n1p1"]
    forced = disks.zfs_raidz_drives(_lsblk("hgx-8nvme-foreign"), BY_ID, force=True)
    assert "nvme3n1" in [d["name"] for d in forced["candidates"]]
    excluded = disks.zfs_raidz_drives(_lsblk("hgx-8nvme-foreign"), BY_ID,
                                      exclude=["nvme-Micron_7450_MTFDKCC3T8TFS_2301E6A13F47"])
    assert [d["name"] for d in excluded["excluded"]] == ["nvme3n1"]
    assert excluded["foreign"] == []


def test_mounted_data_drive_is_never_used_even_forced() -> None:
    tree = _lsblk("hgx-8nvme")
    disk = next(d for d in tree["blockdevices"] if d["name"] == "nvme5n1")
    disk["children"] = [{"name": "nvme5n1p1", "type": "part", "fstype": "xfs",
                         "mountpoint": "/scratch", "pttype": "gpt"}]
    report = disks.zfs_raidz_drives(tree, BY_ID, force=True)
    assert [d["summary"] for d in report["mounted"]] == [
        "/dev/disk/by-id/nvme-Micron_7450_MTFDKCC3T8TFS_2301E6A13F5A (nvme5n1) mounted at /scratch"]


def test_lsblk_before_2_37_prints_booleans_as_strings() -> None:
    tree = _lsblk("hgx-8nvme")
    for d in tree["blockdevices"]:
        d["rota"], d["rm"] = ("1" if d["name"] == "nvme0n1" else "0"), "0"
    report = disks.zfs_raidz_drives(tree, BY_ID)
    assert "nvme0n1" in [d["name"] for d in report["unusable"]]
    assert "sda" in [d["name"] for d in report["unusable"]]  # still USB


@pytest.mark.parametrize(("count", "level"), [(2, None), (3, "raidz1"), (5, "raidz1"),
                                              (6, "raidz2"), (8, "raidz2"), (12, "raidz3")])
def test_raidz_level_from_drive_count(count: int, level: str | None) -> None:
    table = [{"min_drives": 3, "level": "raidz1"}, {"min_drives": 6, "level": "raidz2"},
             {"min_drives": 12, "level": "raidz3"}]
    assert disks.zfs_raidz_level_for(count, table) == level


ZPOOL_IMPORT = """\
   pool: data
     id: 15451357997522795478
  state: ONLINE
 status: The pool was last accessed by another system.
 action: The pool can be imported using its name or numeric identifier and
\tthe '-f' flag.
   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-EY
 config:

\tdata                                            ONLINE
\t  raidz2-0                                      ONLINE
\t    nvme-Micron_7450_MTFDKCC3T8TFS_2301E6A13F10  ONLINE

   pool: scratch
     id: 8771234
  state: UNAVAIL
 status: One or more devices are missing from the system.
 action: The pool cannot be imported. Attach the missing
\tdevices and try again.
 config:

\tscratch     UNAVAIL  insufficient replicas
"""


def test_zpool_import_listing() -> None:
    pools = disks.zpool_importable(ZPOOL_IMPORT)
    assert [(p["name"], p["id"], p["state"]) for p in pools] == [
        ("data", "15451357997522795478", "ONLINE"), ("scratch", "8771234", "UNAVAIL")]
    assert pools[0]["action"].endswith("numeric identifier and the '-f' flag.")
    assert pools[0]["status"] == "The pool was last accessed by another system."


def test_zpool_create_and_property_changes() -> None:
    argv = disks.zpool_create_argv("data", "raidz2", ["nvme-a", "nvme-b", "nvme-c"], ashift=12,
                                   properties={"compression": "zstd", "atime": False})
    assert argv == ["zpool", "create", "-o", "ashift=12", "-O", "compression=zstd", "-O",
                    "atime=off", "-m", "none", "data", "raidz2", "/dev/disk/by-id/nvme-a",
                    "/dev/disk/by-id/nvme-b", "/dev/disk/by-id/nvme-c"]
    wanted = disks.zfs_raidz_wanted("data", {"compression": "zstd"},
                                    [{"name": "data", "mountpoint": "/data",
                                      "properties": {"recordsize": "1M"}}])
    current = "data\tcompression\tzstd\ndata/data\tmountpoint\t/data\ndata/data\trecordsize\t128K\n"
    assert disks.zfs_property_changes(current, wanted) == [
        {"dataset": "data/data", "property": "recordsize", "value": "1M", "current": "128K"}]


def test_mlxfwmanager_and_flint_reports() -> None:
    text = (REPO / "roles/ofed/molecule/default/standin/mlxfwmanager-query.hgx.txt").read_text()
    devices = mft.mlxfwmanager_devices(text)
    assert [(d["device_type"], d["psid"], d["pci_device_name"], d["fw_version"]) for d in devices] == [
        ("ConnectX7", "MT_0000000838", "0000:1a:00.0", "28.39.1002"),
        ("ConnectX7", "MT_0000000838", "0000:40:00.0", "28.39.1002"),
        ("ConnectX6DX", "MT_0000000359", "0000:1b:00.0", "22.39.1002")]
    assert devices[0]["versions"]["UEFI"] == {"current": "14.32.0012", "available": None}
    query = mft.flint_query("Image type:            FS4\nFW Version:            22.30.1004\n"
                            "Rom Info:              type=UEFI version=14.23.17\n"
                            "                       type=PXE version=3.6.301\n"
                            "PSID:                  CIS0000000008\n")
    assert query["fw_version"] == "22.30.1004"
    assert query["psid"] == "CIS0000000008"
    assert query["rom_info"] == "type=UEFI version=14.23.17"
