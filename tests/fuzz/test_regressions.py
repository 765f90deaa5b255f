"""The crashes the fuzzer found, one test each, so that each stays fixed whatever the seed finds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cabling.csvio import parse_csv
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.discovery.lldp import parse_lldp
from cabling.discovery.nodemap import parse_node_name_map
from cabling.discovery.ufm import load_ufm_dir
from cabling.errors import CablingInputError
from cabling.manifest import load_manifest, parse_manifest
from cabling.ndt import load_ndt
from cabling.ports import natural_key, switch_port
from provisioner.bmc import redfish_parse as rp
from provisioner.deploy.maas.client import _parse
from provisioner.deploy.maas.models import BlockDevice
from provisioner.exceptions import ProvisionerError
from provisioner.health.deep_measure import parse_nvbandwidth
from provisioner.health.ib import parse_counters
from provisioner.health.nvlink import parse_nvlink_status
from provisioner.health.nvsmi import normalize_bus_id
from tests.fuzz.mutate import RandomChooser, mutate
from tests.fuzz.targets import Target, check

FIX = Path(__file__).resolve().parents[1] / "fixtures"
HUGE = "9" * 5000  # past int()'s 4,300-digit limit


def test_manifest_not_utf8_names_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_bytes(b"devices: []\nlinks: [\xff]\n")
    with pytest.raises(CablingInputError, match=r"m.yaml:2: manifest is not UTF-8 text: byte 0xff at column 9"):
        load_manifest(f)


def test_manifest_reader_error_is_typed() -> None:
    with pytest.raises(CablingInputError, match=r"<m>:2: not valid YAML: character U\+0001"):
        parse_manifest("devices: []\nlinks: [\x01]\n", "<m>")


def test_manifest_deep_nesting_is_typed() -> None:
    with pytest.raises(CablingInputError, match=r"not valid YAML|nested too deeply"):
        parse_manifest("[" * 60_000, "<m>")


def test_csv_extra_cells_are_an_error_naming_the_row() -> None:
    text = "a_device,a_port,b_device,b_port\nh1,mlx5_0,l1,1\nh2,mlx5_0,l1,2,oops\n"
    with pytest.raises(CablingInputError, match=r"<csv>:3: row has 1 more cell\(s\) than the header"):
        parse_csv(text)
    parse_csv(text.replace(",oops", ","))  # an empty trailing cell (spreadsheets) is fine


def test_csv_infinite_length() -> None:
    text = "a_device,a_port,b_device,b_port,length_m\nh1,mlx5_0,l1,1,1e999\n"
    with pytest.raises(CablingInputError, match=r"<csv>:2: bad value: length_m '1e999'"):
        parse_csv(text)


def test_ndt_negative_infinite_length_is_typed(tmp_path: Path) -> None:
    f = tmp_path / "f.ndt"
    f.write_text("#StartDevice,StartPort,EndDevice,EndPort,Cable Length\nsw1,Port 1,sw2,Port 2,-1e999\n")
    with pytest.raises(CablingInputError, match=r"f.ndt:2: Cable Length '-1e999' is not a length"):
        load_ndt([f])


def test_ports_with_4300_digits() -> None:
    assert switch_port(f"Port {HUGE}") is None
    assert sorted(["p10", f"p{HUGE}", "p9"], key=natural_key) == ["p9", "p10", f"p{HUGE}"]


def test_node_name_map_unclosed_quote_and_long_guid() -> None:
    with pytest.raises(CablingInputError, match=r"<n>:1: unbalanced quotes"):
        parse_node_name_map('H-0002c903000e0b72 "gpu01 mlx5_0\n', "<n>")
    with pytest.raises(CablingInputError, match=r"<n>:1: .* is not a GUID"):
        parse_node_name_map(f'0x{"f" * 40} "x"\n', "<n>")


def test_ibnetdiscover_huge_port_number_is_a_bad_line() -> None:
    text = (FIX / "corpus/ib/ufm-ndt-cabling-validation-dgx-a100-director/ibnetdiscover_director.txt").read_text()
    line = next(n for n, s in enumerate(text.splitlines(), 1) if s.startswith("["))
    lines = text.splitlines()
    lines[line - 1] = "[" + HUGE + lines[line - 1][lines[line - 1].index("]"):]
    with pytest.raises(CablingInputError, match=rf"<i>:{line}: cannot read port line"):
        parse_ibnetdiscover("\n".join(lines), "<i>")


def test_lldp_and_ufm_deep_json(tmp_path: Path) -> None:
    with pytest.raises(CablingInputError, match="nested too deeply"):
        parse_lldp("[" * 100_000, "h1", "<l>")
    for name in ("systems", "ports", "links"):
        (tmp_path / f"{name}.json").write_bytes((FIX / "cabling/ufm" / f"{name}.json").read_bytes())
    (tmp_path / "ports.json").write_bytes(b'[{"guid": ' + HUGE.encode() + b"}]")
    with pytest.raises(CablingInputError, match=r"ports\.json: UFM ports holds a number that is too large"):
        load_ufm_dir(tmp_path)


def test_health_parsers_with_huge_numbers() -> None:
    assert parse_counters(f"mlx5_0/1 symbol_error {HUGE}\nmlx5_0/1 link_downed 3\n") == {
        "mlx5_0/1": {"link_downed": 3}}
    assert parse_nvlink_status(f"GPU 0: H100 (UUID: GPU-1)\n\t Link {HUGE}: 26.562 GB/s\n") == {0: []}
    assert normalize_bus_id("PCI:0000") == "0000"
    matrix = "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n 0 1\n 0 N/A \ufffd(\n 1 390.1 N/A\n"
    assert parse_nvbandwidth(matrix) == {(1, 0): 390.1}


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "\u00b2", "9" * 40, 10**400, True, {}])
def test_redfish_numbers_and_types(value: object) -> None:
    drive = rp.parse_drive({"CapacityBytes": value, "Identifiers": value, "Id": "d"})
    assert drive.size_bytes is None or isinstance(drive.size_bytes, int)
    assert rp.parse_simple_storage({"Devices": [{"Status": value, "CapacityBytes": value}]})
    assert rp.function_port_link({"Links": value}) is None
    assert rp.reset_types_from_action_info({"Parameters": value}) is None
    assert rp.parse_device_function({"Ethernet": value, "Id": "f"}, {"AssociatedNetworkAddresses": value}, "a") is None


def test_maas_block_device_of_10_to_the_400_bytes_is_a_typed_error() -> None:
    with pytest.raises(ProvisionerError, match="unexpected BlockDevice"):
        _parse(BlockDevice, json.loads('{"id": 1, "size": 1' + "0" * 400 + "}"), "GET blockdevices")


def test_the_harness_reports_what_breaks_the_rule(tmp_path: Path) -> None:
    def crash(data: bytes, work: Path) -> None:
        raise KeyError("x")

    def typed(data: bytes, work: Path) -> None:
        raise CablingInputError("bad", file=str(work / "named.txt"))

    assert isinstance(check(Target("t", (), crash, (CablingInputError,)), b"", tmp_path), KeyError)
    assert check(Target("t", (), typed, (CablingInputError,), "named.txt"), b"", tmp_path) is None
    unnamed = check(Target("t", (), typed, (CablingInputError,), "other.txt"), b"", tmp_path)
    assert isinstance(unnamed, AssertionError)


def test_mutations_are_reproducible_and_change_the_input() -> None:
    seed = (FIX / "cabling/small-fabric.yaml").read_bytes()
    runs = [[mutate(RandomChooser(i), seed) for i in range(50)] for _ in range(2)]
    assert runs[0] == runs[1]
    assert sum(m != seed for m in runs[0]) >= 45


# -- #32: the deploy server and the image fetch -------------------------------------------------


@pytest.mark.parametrize("request_bytes", [
    # a chunked callback body whose chunk header is not hexadecimal (werkzeug: OSError)
    b"POST /callback/h1/failed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-token\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nf: !!float abc\n5\r\nhello\r\n0\r\n\r\n",
    b"POST /callback/h1/failed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-token\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n1e999\r\nhello\r\n0\r\n\r\n",
    # a Host header whose label idna cannot encode (over 63 characters)
    b"GET /files/images/test.raw?host=h1 HTTP/1.1\r\nHost: " + b"9" * 300 + b"\r\n\r\n",
])
def test_the_deploy_server_answers_malformed_requests_with_4xx(request_bytes: bytes,
                                                                tmp_path: Path) -> None:
    from tests.fuzz.targets import _deploy_http

    answer = _deploy_http(request_bytes, tmp_path)  # raises on a 500 or an error inside
    assert answer.startswith(b"HTTP/1.1 400"), answer[:80]


@pytest.mark.parametrize(("answer", "error"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: " + HUGE.encode() + b"\r\n\r\nx", "5000-digit size"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 84\r\n\r\nshort", "broke off after 5 bytes"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", "broke off"),
])
def test_an_image_answer_that_breaks_is_a_typed_error(answer: bytes, error: str,
                                                       tmp_path: Path) -> None:
    from tests.fuzz.targets import _image_fetch

    with pytest.raises(ProvisionerError, match=error):
        _image_fetch(answer, tmp_path)
    assert not (tmp_path / "image.bin").exists()
