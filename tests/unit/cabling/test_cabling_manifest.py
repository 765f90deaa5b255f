"""Manifest model, YAML loading with file:line errors, CSV cable lists, JSON schema."""

from __future__ import annotations

import json

import pytest
import yaml

from cabling.csvio import export_csv, parse_csv
from cabling.errors import CablingInputError, ExitCode
from cabling.manifest import (
    dump_manifest,
    load_manifest,
    manifest_schema,
    parse_manifest,
    schema_text,
)
from cabling.model import Endpoint, Fabric, normalize_guid, parse_ratio
from cabling.speeds import normalize_speed, normalize_width, parse_ibnet_rate, speed_from_lane_gbps


def test_load_small_fabric(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    assert len(m.devices) == 8 and len(m.links) == 12
    assert m.links[0].a == Endpoint(device="h1", port="mlx5_0")
    assert m.links[0].b.port == "1"
    assert m.where_link(0).endswith("small-fabric.yaml:14")
    assert m.where_device("l0").endswith("small-fabric.yaml:9")
    assert m.device_map()["h1"].hca_guids == {"mlx5_0": "946dae0300000101"}


def test_yaml_error_names_line_and_key():
    text = "devices:\n  - name: a\n    kind: host\n  - name: b\n    kind: swich\nlinks: []\n"
    with pytest.raises(CablingInputError) as exc:
        parse_manifest(text, "plan.yaml")
    assert "plan.yaml:5" in str(exc.value) and "devices.1.kind" in str(exc.value)
    assert exc.value.exit_code == ExitCode.BAD_INPUT


def test_yaml_syntax_error_has_line():
    with pytest.raises(CablingInputError, match=r"plan.yaml:3: not valid YAML"):
        parse_manifest("devices:\n  - name: a\n  kind: [\n", "plan.yaml")


def test_manifest_must_be_mapping():
    with pytest.raises(CablingInputError, match="mapping with 'devices' and 'links'"):
        parse_manifest("- a\n- b\n", "x.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(CablingInputError, match="cannot read manifest"):
        load_manifest(tmp_path / "nope.yaml")


@pytest.mark.parametrize("bad", ["gpu042", ":17", "gpu042:"])
def test_endpoint_text_needs_device_and_port(bad):
    with pytest.raises(CablingInputError, match="must be 'device:port'"):
        parse_manifest(f"links:\n  - a: '{bad}'\n    b: 'l:1'\n", "x.yaml")


def test_endpoint_object_form_and_int_port():
    m = parse_manifest("links:\n  - a: {device: h, port: mlx5_0/1}\n    b: {device: l, port: 3}\n"
                       "  - {a: 'h:mlx5_1/1', b: 'd:L1/U2/3'}\n  - {a: 'h:mlx5_2/2', b: 'l:4'}\n")
    assert str(m.links[0].b) == "l:3" and m.links[0].b.key == ("l", "3")
    # Port 1 of an HCA is the HCA itself; port 2 and director ports keep their form.
    assert [str(lk.a) for lk in m.links] == ["h:mlx5_0", "h:mlx5_1", "h:mlx5_2/2"]
    assert str(m.links[1].b) == "d:L1/U2/3"


def test_dump_roundtrip(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    again = parse_manifest(dump_manifest(m))
    assert again.model_dump() == m.model_dump()


def test_speed_and_width_names():
    assert normalize_speed("ndr") == "NDR" and normalize_speed(200) == "HDR" and normalize_speed("200000") == "HDR"
    assert normalize_speed("400G") == "NDR" and normalize_speed(None) is None
    assert normalize_width("IB_4X") == "4x" and normalize_width(2) == "2x" and normalize_width("") is None
    assert parse_ibnet_rate("4xHDR") == ("4x", "HDR") and parse_ibnet_rate("junk") is None
    assert speed_from_lane_gbps("106.25") == "NDR" and speed_from_lane_gbps("25.78") == "EDR"
    assert speed_from_lane_gbps("7.5") is None and speed_from_lane_gbps("n/a") is None
    with pytest.raises(ValueError, match="unknown link speed"):
        normalize_speed("fast")
    with pytest.raises(ValueError, match="unknown link width"):
        normalize_width("3x")


def test_guid_and_ratio_validation():
    assert normalize_guid("S-0002C903000E0B72") == "0002c903000e0b72"
    assert normalize_guid("0x2c9") == "00000000000002c9"
    with pytest.raises(ValueError, match="not a GUID"):
        normalize_guid("0xnothex")
    assert parse_ratio("3:1") == (3, 1)
    with pytest.raises(ValueError, match="down:up"):
        Fabric(blocking="1-1")


def test_bad_speed_in_yaml_names_key():
    with pytest.raises(CablingInputError, match=r"links.0.speed.*unknown link speed"):
        parse_manifest("links:\n  - {a: 'h:m', b: 'l:1', speed: warp}\n", "x.yaml")


def test_schema_is_published_and_current(repo_root):
    published = (repo_root / "docs" / "cabling-manifest.schema.json").read_text()
    assert published == schema_text(), "regenerate with: provision cabling schema -o docs/cabling-manifest.schema.json"


def test_schema_accepts_the_fixture(fixtures):
    import jsonschema
    data = yaml.safe_load((fixtures / "small-fabric.yaml").read_text())
    jsonschema.validate(data, manifest_schema())
    data["links"][0]["a"] = "no-port"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, manifest_schema())


def test_csv_roundtrip(fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    text = export_csv(m)
    assert text.splitlines()[0].startswith("cable,a_device,a_port,a_rack")
    back = parse_csv(text, "cables.csv")
    assert [(str(lk.a), str(lk.b), lk.cable, lk.speed) for lk in back.links] == [
        (str(lk.a), str(lk.b), lk.cable, "NDR") for lk in m.links]
    kinds = {d.name: d.kind for d in back.devices}
    assert kinds["h1"] == "host" and kinds["l0"] == "switch"
    assert back.device_map()["l0"].location.rack == "r01"
    # With a YAML base, devices (and their rails) come from it.
    based = parse_csv(text, "cables.csv", base=m)
    assert based.device_map()["l1"].rail == 1 and based.fabric.blocking == "2:1"


def test_csv_errors_name_line():
    with pytest.raises(CablingInputError, match="lacks column"):
        parse_csv("a_device,a_port\nh,1\n", "c.csv")
    bad = "a_device,a_port,b_device,b_port,speed\nh1,mlx5_0,l0,1,NDR\nh2,mlx5_0,l0,2,warp\n"
    with pytest.raises(CablingInputError, match=r"c.csv:3: \[speed\]"):
        parse_csv(bad, "c.csv")
    with pytest.raises(CablingInputError, match=r"c.csv:2: bad value"):
        parse_csv("a_device,a_port,b_device,b_port,length_m\nh1,mlx5_0,l0,1,long\n", "c.csv")


def test_schema_text_is_json():
    assert json.loads(schema_text())["title"].startswith("provisioner cabling")


def test_json_manifest_fast_path_and_error_lines(tmp_path, fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    good = tmp_path / "m.json"
    good.write_text(m.model_dump_json(indent=1))
    assert load_manifest(good).model_dump() == m.model_dump()
    data = json.loads(good.read_text())
    data["devices"][1]["kind"] = "router"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data, indent=1))
    with pytest.raises(CablingInputError, match=r"bad.json:\d+: \[devices.1.kind\]"):
        load_manifest(bad)
