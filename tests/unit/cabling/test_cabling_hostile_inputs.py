"""Hostile and malformed inputs found by a probe: each gives a typed error (exit 2) naming the file,
line or JSON path and key, never a traceback. Every input here is written here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cabling.cli import cabling_app
from cabling.errors import CablingInputError
from cabling.manifest import load_manifest, parse_manifest
from cabling.model import normalize_guid
from tests.support import machine

runner = CliRunner()


def run(*args: str):
    return runner.invoke(cabling_app, list(args))


HEAD = "version: 1\ndevices:\n  - {name: h1, kind: host, hcas: [mlx5_0]}\n"


def _bad_input(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.output


# 1. GUIDs YAML or JSON read as numbers


def test_unquoted_hex_guid_in_yaml_is_that_guid(tmp_path):
    text = HEAD + "  - {name: l0, kind: switch, ports: 64, guid: 0x0002c90300000a01}\n" \
        "  - {name: h2, kind: host, hcas: [mlx5_0], hca_guids: {mlx5_0: 0x946dae0300000101}}\n" \
        "links:\n  - {a: 'h1:mlx5_0', b: 'l0:1'}\n"
    m = parse_manifest(text, "x.yaml")
    dev = m.device_map()
    assert dev["l0"].guid == "0002c90300000a01"
    assert dev["h2"].hca_guids == {"mlx5_0": "946dae0300000101"}
    path = tmp_path / "x.yaml"
    path.write_text(text)
    assert run("lint", str(path)).exit_code == 0
    assert run("diff", str(path), str(path)).exit_code == 0


def test_json_number_guid_is_that_guid(tmp_path):
    data = {"devices": [{"name": "l0", "kind": "switch", "ports": 64, "guid": 0x0002C90300000A01}], "links": []}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    assert load_manifest(path).devices[0].guid == "0002c90300000a01"


@pytest.mark.parametrize("value", [1 << 64, -1, True])
def test_guid_number_out_of_range_says_quote_it(value):
    with pytest.raises(ValueError, match="quoted text"):
        normalize_guid(value)


def test_guid_number_too_large_in_manifest_is_typed():
    text = HEAD + "  - {name: l0, kind: switch, guid: 0x1ffffffffffffffff}\nlinks: []\n"
    with pytest.raises(CablingInputError, match=r"x.yaml:4: .*devices.1.guid.*quoted text"):
        parse_manifest(text, "x.yaml")


# 2. outputs that cannot be written


@pytest.mark.parametrize("where", ["nodir/out.txt", "", "/dev/full"])
def test_unwritable_output_is_typed_naming_the_path(tmp_path, fixtures, where):
    target = where if where.startswith("/") else str(tmp_path / where)
    if where == "/dev/full":
        machine.require("dev-full")
    small = str(fixtures / "small-fabric.yaml")
    for args in (["lint", small, "-o", target], ["lint", small, "-f", "json", "-o", target],
                 ["lint", small, "--svg", target], ["convert", small, "-o", target],
                 ["schema", "-o", target], ["plan", "--hosts", "4", "-o", target]):
        out = _bad_input(run(*args))
        assert f"cannot write {target!r}" in out, (args, out)


# 3. plan --speed


def test_plan_unknown_speed_names_option_and_values():
    out = _bad_input(run("plan", "--hosts", "4", "--speed", "WARP"))
    assert "--speed 'WARP'" in out and "NDR" in out


# 4. repeated keys


@pytest.mark.parametrize(("text", "line", "key"), [
    # Two links blocks (two manifests pasted together): the first, with a port used twice, was dropped.
    (HEAD + "  - {name: l0, kind: switch, ports: 64}\nlinks:\n  - {a: 'h1:mlx5_0', b: 'l0:1'}\n"
     "  - {a: 'h1:mlx5_0', b: 'l0:2'}\nlinks:\n  - {a: 'h1:mlx5_0', b: 'l0:1'}\n", 8, "links"),
    # In one link line the fast path reads.
    (HEAD + "  - {name: l0, kind: switch, ports: 64}\nlinks:\n  - {a: 'h1:mlx5_0', b: 'l0:1', b: 'l0:2'}\n", 6, "b"),
    # In a block-mapped device the fast path reads.
    ("version: 1\ndevices:\n- name: h1\n  kind: host\n  name: h2\nlinks:\n  - {a: 'h1:mlx5_0', b: 'l0:1'}\n", 5, "name"),
    # In a flow-mapped device.
    (HEAD + "  - {name: l0, kind: switch, ports: 64, ports: 32}\nlinks:\n  - {a: 'h1:mlx5_0', b: 'l0:1'}\n", 4, "ports"),
])
def test_repeated_yaml_key_is_an_error_naming_line_and_key(text, line, key):
    with pytest.raises(CablingInputError) as exc:
        parse_manifest(text, "x.yaml")
    assert f"x.yaml:{line}: key {key!r} appears twice" in str(exc.value)


def test_yaml_merge_key_is_not_a_repeat():
    text = "version: 1\nx: &d {kind: host}\ndevices:\n  - {<<: *d, name: h1, kind: host}\nlinks: []\n"
    with pytest.raises(CablingInputError, match="'x'"):  # the unknown top-level key, not a repeat
        parse_manifest(text, "x.yaml")


def test_repeated_json_key_is_an_error_naming_path_and_key(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"devices": [{"name": "h1", "kind": "host", "name": "h2"}], "links": []}')
    with pytest.raises(CablingInputError, match=r"m.json:1: key 'name' appears twice in devices\[0\]"):
        load_manifest(path)
    path.write_text('{"devices": [],\n "links": [{"a": "h1:mlx5_0", "b": "l0:1"}],\n "links": []}')
    with pytest.raises(CablingInputError, match=r"m.json:3: key 'links' appears twice at the top level"):
        load_manifest(path)


# 5. CSV cable lists

CSV_HEAD = "cable,a_device,a_port,b_device,b_port\n"


@pytest.mark.parametrize(("body", "message"), [
    ("C1,gpu001,mlx5_0,,\n", r"x.csv:2: b_device \(column 4\) is empty"),
    ("C1,gpu001,mlx5_0,leaf1,1\nC2,,,leaf1,3\n", r"x.csv:3: a_device \(column 2\) is empty"),
    # An unclosed quote used to swallow the rest of the file into one cell and make a self-link.
    ('"C1,gpu001,mlx5_0\n', r"x.csv:2: a quoted cell is never closed"),
    ('C1,gpu001,mlx5_0,leaf1,1\n"C2,gpu002,mlx5_0,leaf1,2\nC3,gpu003,mlx5_0,leaf1,3\n', r"x.csv:3: a quoted cell"),
    # A record with a quoted line break is named by the line it starts on.
    ('"gpu\n001",gpu001,mlx5_0\n', r"x.csv:2: b_device \(column 4\) is empty"),
    ("", "header but no cable rows"),
])
def test_csv_rows_missing_cells_or_quotes_are_errors(body, message):
    from cabling.csvio import parse_csv

    with pytest.raises(CablingInputError, match=message):
        parse_csv(CSV_HEAD + body, "x.csv")


def test_csv_header_case_and_delimiter():
    from cabling.csvio import parse_csv

    m = parse_csv(CSV_HEAD.upper() + "C1,gpu001,mlx5_0,leaf1,1\n", "x.csv")
    assert str(m.links[0]) == "gpu001:mlx5_0 <-> leaf1:1"
    with pytest.raises(CablingInputError) as exc:
        parse_csv(CSV_HEAD.replace(",", ";") + "C1;gpu001;mlx5_0;leaf1;1\n", "x.csv")
    assert "separated by ';'" in str(exc.value)


# 6. spreadsheet formulas; 12. control characters in names


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0", "+HYPERLINK(1)", "-2+3", "@SUM(1)", "\tTAB", " h1",
                                  "h1\nerror CAB999 fake", "h\x1b[31m1", "h1\x00", "h\u202e1gpu"])
def test_device_name_that_is_a_formula_or_holds_controls_is_refused_at_load(name):
    text = HEAD + f"  - {{name: {json.dumps(name)}, kind: switch, ports: 64}}\nlinks: []\n"
    with pytest.raises(CablingInputError) as exc:
        parse_manifest(text, "x.yaml")
    message = str(exc.value)
    assert message.startswith("x.yaml:4: [devices.1.name]"), message
    assert "\x1b" not in message and "\x00" not in message and "\u202e" not in message
    assert "\n" not in message.split("\n  hint:")[0]


@pytest.mark.parametrize("end", ["=x:1", "h1:mlx5\x1b[2J", "h\u202e1:mlx5_0"])
def test_link_end_with_formula_device_or_control_characters_is_refused(end):
    text = HEAD + f"links:\n  - {{a: {json.dumps(end)}, b: 'l0:1'}}\n"
    with pytest.raises(CablingInputError, match=r"x.yaml:5: \[links.0.a\]"):
        parse_manifest(text, "x.yaml")


def test_csv_and_ndt_export_neutralise_formula_cells(tmp_path):
    from cabling.csvio import export_csv, parse_csv
    from cabling.ndt import export_ndt

    text = HEAD + "  - {name: l0, kind: switch, ports: 64, location: {rack: '-2+3'}}\n" \
        "links:\n  - {a: 'h1:mlx5_0', b: 'l0:1', cable: '=IMPORTXML(1)', type: '@SUM(1)'}\n" \
        "  - {a: 'h1:mlx5_0', b: 'l0:-1', cable: \"\\tC2\"}\n"
    m = parse_manifest(text, "x.yaml")
    csv_text = export_csv(m)
    assert "'=IMPORTXML(1)" in csv_text and "'@SUM(1)" in csv_text and "'-2+3" in csv_text
    assert "\n=" not in csv_text and ",=" not in csv_text and ",-" not in csv_text and ",@" not in csv_text
    back = parse_csv(csv_text, "x.csv")
    assert back.links[0].cable == "=IMPORTXML(1)" and back.links[0].type == "@SUM(1)"
    ndt = export_ndt(m)
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in ndt.splitlines() for cell in row.split(","))


def test_report_text_escapes_unprintable_characters():
    import io

    from rich.console import Console

    from cabling.findings import Finding, Report
    from cabling.report.text import render_text

    report = Report(title="lint", findings=[Finding(severity="error", kind="CAB001", message="link zz\x1b[31mRED\nerror x",
                                                    fix="fix \u202e", where="links[0]")])
    buf = io.StringIO()
    render_text(report, Console(file=buf, width=200, highlight=False))
    text = buf.getvalue()
    assert "\x1b" not in text and "\u202e" not in text
    assert "zz\\x1b[31mRED\\nerror x" in text
    err = CablingInputError("device 'a\x1bb' bad\nline", file="x.yaml", line=3)
    assert "\x1b" not in str(err) and "\n" not in str(err)


# 7-9. UFM REST exports (mutations of tests/fixtures/cabling/ufm, written here)


def _ufm_copy(fixtures, tmp_path, change) -> Path:
    data = {r: json.loads((fixtures / "ufm" / f"{r}.json").read_text()) for r in ("systems", "ports", "links")}
    change(data)
    for r, value in data.items():
        (tmp_path / f"{r}.json").write_text(json.dumps(value))
    return tmp_path


def test_ufm_repeated_or_reversed_link_counts_once(fixtures, tmp_path):
    from cabling.asbuilt import as_built
    from cabling.discovery.ufm import load_ufm_dir

    base = as_built(load_ufm_dir(fixtures / "ufm"))

    def repeat(d):
        lk = d["links"][0]
        d["links"].append(dict(lk))
        d["links"].append({**lk, "source_guid": lk["destination_guid"], "source_port": lk["destination_port"],
                           "destination_guid": lk["source_guid"], "destination_port": lk["source_port"]})

    m = as_built(load_ufm_dir(_ufm_copy(fixtures, tmp_path, repeat)))
    assert (len(m.devices), len(m.links)) == (len(base.devices), len(base.links)) == (8, 11)


def test_ufm_port_in_two_links_is_named_as_such(fixtures, tmp_path):
    from cabling.discovery.ufm import load_ufm_dir

    def twice(d):
        d["links"][1]["source_guid"], d["links"][1]["source_port"] = d["links"][0]["source_guid"], d["links"][0]["source_port"]

    path = _ufm_copy(fixtures, tmp_path, twice)
    guid, port = json.loads((path / "links.json").read_text())[0]["source_guid"], 1
    with pytest.raises(CablingInputError) as exc:
        load_ufm_dir(path)
    message = str(exc.value)
    assert "links.json: links[1] and links[0] both cable GUID" in message and f"0x{guid} port {port}" in message
    assert "duplicate guid" not in message


@pytest.mark.parametrize(("change", "file", "path"), [
    (lambda d: d["ports"][0].__setitem__("active_speed", "HDR100"), "ports.json", "ports[0].active_speed"),
    (lambda d: d["links"][2].__setitem__("source_guid", int(d["links"][2]["source_guid"], 16)), "links.json",
     "links[2].source_guid"),
    (lambda d: d["links"][0].__setitem__("destination_guid", "not-a-guid!"), "links.json", "links[0].destination_guid"),
    (lambda d: d["links"][0].__setitem__("source_port", "-1"), "links.json", "links[0].source_port"),
    (lambda d: d["links"][0].update(destination_guid=d["links"][0]["source_guid"],
                                    destination_port=d["links"][0]["source_port"]), "links.json", "links[0] links GUID"),
    (lambda d: d["systems"][0].__setitem__("guid", 5), "systems.json", "systems[0].guid"),
])
def test_ufm_bad_values_name_file_and_json_path(fixtures, tmp_path, change, file, path):
    from cabling.discovery.ufm import load_ufm_dir

    with pytest.raises(CablingInputError) as exc:
        load_ufm_dir(_ufm_copy(fixtures, tmp_path, change))
    assert f"{file}: {path}" in str(exc.value)


def test_ufm_all_empty_says_nothing_was_read(tmp_path):
    for r in ("systems", "ports", "links"):
        (tmp_path / f"{r}.json").write_text("[]")
    out = _bad_input(run("import", "--ufm-dir", str(tmp_path)))
    assert "nothing was read" in out


# 10-11. LLDP (lldpctl -f json shapes, written here)


def _nb(chassis: str, port: str, descr: str | None = None, caps: tuple[str, ...] = ("Bridge", "Router")) -> dict:
    body: dict = {"id": {"type": "mac", "value": "aa:bb:cc:00:00:01"},
                  "capability": [{"type": c, "enabled": True} for c in caps]}
    if descr:
        body["descr"] = descr
    return {"chassis": {chassis: body}, "port": {"id": {"type": "ifname", "value": port}}}


def test_lldp_two_neighbours_on_one_interface_is_a_warning_not_a_duplicate_guid():
    from cabling.discovery.lldp import parse_lldp

    text = json.dumps({"lldp": {"interface": [{"eno1": _nb("TOR-A", "Eth1/8/3")}, {"eno1": _nb("TOR-B", "Eth2/8/3")},
                                              {"eno2": _nb("TOR-A", "Eth1/9/3")}]}})
    fab = parse_lldp(text, "host5", "host5.json")
    assert [(lk.a_port, lk.b_guid, lk.b_port) for lk in fab.links] == [("eno2", "lldp:tor-a", "Eth1/9/3")]
    assert len(fab.warnings) == 1
    assert "host5 eno1 hears 2 LLDP neighbours (TOR-A Eth1/8/3, TOR-B Eth2/8/3)" in fab.warnings[0]


def test_lldp_hosts_advertising_bridge_router_are_hosts_seen_from_the_switch():
    from cabling.asbuilt import as_built
    from cabling.discovery.lldp import parse_lldp

    # Collected on a Cumulus leaf; Kubernetes GPU nodes forward IP, so lldpd says Bridge and Router.
    text = json.dumps({"lldp": {"interface": {
        "swp1": _nb("gpu001", "eth2", "Ubuntu 22.04.4 LTS Linux 5.15.0-105-generic"),
        "swp3": _nb("gpu002", "eth2"),
    }}})
    kinds = {d.name: d.kind for d in as_built(parse_lldp(text, "leaf01")).devices}
    assert kinds == {"leaf01": "switch", "gpu001": "host", "gpu002": "host"}


def test_lldp_switch_os_decides_over_capabilities_seen_from_a_host():
    from cabling.asbuilt import as_built
    from cabling.discovery.lldp import parse_lldp

    text = json.dumps({"lldp": {"interface": {
        "ens1np0": _nb("leaf01", "Ethernet120", "SONiC Software Version: SONiC.4.0 - Distribution: Debian 10.13"),
        "ens2np0": _nb("leaf02", "swp3", "Cumulus Linux version 5.9.1 running on NVIDIA SN5600", caps=("Station",)),
        "eth9": _nb("gpu009", "eth9", "Ubuntu 22.04", caps=("Bridge", "Router")),
    }}})
    kinds = {d.name: d.kind for d in as_built(parse_lldp(text, "gpu001")).devices}
    assert kinds == {"gpu001": "host", "leaf01": "switch", "leaf02": "switch", "gpu009": "host"}


# 13. diff names the file (OLD or NEW) of an input error


def test_diff_errors_name_the_file_and_a_self_link_as_such(tmp_path):
    devices = [{"name": "h1", "kind": "host", "hcas": ["mlx5_0"]}, {"name": "l0", "kind": "switch", "ports": 64}]
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"devices": devices, "links": [{"a": "h1:mlx5_0", "b": "l0:1"},
                                                               {"a": "h1:mlx5_0", "b": "l0:2"}]}))
    loop = tmp_path / "loop.json"
    loop.write_text(json.dumps({"devices": devices, "links": [{"a": "l0:1", "b": "l0:1"}]}))
    out = _bad_input(run("diff", str(twice), str(loop)))
    assert f"{twice}: the manifest plans 1 port(s) for two cables" in out
    out = _bad_input(run("diff", str(loop), str(twice)))
    assert f"{loop}: links[0]: l0:1 is cabled to itself" in out and "links[0] and links[0]" not in out
    out = _bad_input(run("diff", str(twice), str(twice)))
    assert f"{twice}:" in out


@pytest.mark.parametrize(("text", "key"), [
    ("version: true\n", "version"),
    ("devices:\n  - {name: s1, kind: switch, ports: true}\n", "devices.0.ports"),
    ("devices:\n  - {name: s1, kind: switch, ports: 1000000000000}\n", "devices.0.ports"),
    ("fabric: {rails: 1.0e30}\n", "fabric.rails"),
    ("devices:\n  - {name: s1, kind: switch, ports: 8}\n  - {name: h1, kind: host, hcas: [mlx5_0]}\n"
     "links:\n  - {a: 'h1:mlx5_0', b: 's1:1', length_m: .inf}\n", "links.0.length_m"),
])
def test_absurd_counts_and_lengths_are_refused(text, key):
    # Written here: YAML's true would count as 1, and a trillion ports or an infinite cable
    # is a typo, not a plan.
    with pytest.raises(CablingInputError, match=re.escape(f"[{key}]")):
        parse_manifest(text, "absurd.yaml")


# 10. Inputs larger than any real one of their kind, and numbers longer than any value (#32 item 10)


def _sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk: read whole, it would cost the runner the memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


@pytest.mark.parametrize(("name", "args", "cap", "what"), [
    ("fabric.yaml", ["lint", "{f}"], 32, "a manifest"),
    ("fabric.json", ["lint", "{f}"], 32, "a manifest"),
    ("cables.csv", ["lint", "{f}"], 32, "a CSV cable list"),
    ("fab.txt", ["validate", "-m", "{small}", "--ibnetdiscover", "{f}"], 128, "a fabric tool's output"),
    ("links.txt", ["validate", "-m", "{small}", "--iblinkinfo", "{f}"], 128, "a fabric tool's output"),
    ("lldp/h1.json", ["validate", "-m", "{small}", "--lldp", "{dir}"], 4, "one device's lldpctl output"),
    ("nnm.txt", ["validate", "-m", "{small}", "--ibnetdiscover", "{ibnet}", "--node-name-map", "{f}"], 16,
     "a node-name-map"),
    ("ibstat/h1.txt", ["validate", "-m", "{small}", "--ibnetdiscover", "{ibnet}", "--ibstat", "{dir}"], 1,
     "one host's ibstat output"),
])
def test_each_input_kind_over_its_cap_is_refused_unread_naming_the_cap(tmp_path, fixtures, name, args, cap, what):
    # Written here: a file 8 GiB long; reading it (as the old 1 GiB cap did for a manifest a
    # pull request adds) costs the CI runner its memory and minutes before any message.
    f = _sparse(tmp_path / name, 8 << 30)
    ibnet = fixtures / "real" / "junousi-ibtopotool-1.topo"
    filled = [a.format(f=f, dir=f.parent, small=fixtures / "small-fabric.yaml", ibnet=ibnet) for a in args]
    out = _bad_input(run(*filled))
    assert f"larger than {cap} MiB, the cap for {what}" in out, out
    assert f.name in out


def test_5000_digit_link_width_from_the_fabric_names_file_and_line(tmp_path, fixtures):
    digits = "4" * 5000
    link = tmp_path / "links.txt"
    text = (fixtures / "small-fabric.iblinkinfo").read_text().replace("( 2X ", f"( {digits}X ", 1)
    link.write_text(text)
    out = _bad_input(run("validate", "-m", str(fixtures / "small-fabric.yaml"), "--iblinkinfo", str(link)))
    assert f"{link}:4:" in out
    ibnet = tmp_path / "fab.txt"
    ibnet.write_text('Switch\t8 "S-0002c90300000a01"\t\t# "MF0;l0:MQM9700/U1" enhanced port 0 lid 1 lmc 0\n'
                     f'[1]\t"H-946dae0300000101"[1](946dae0300000101)\t\t# "h1 mlx5_0" lid 11 {digits}xNDR\n')
    out = _bad_input(run("validate", "-m", str(fixtures / "small-fabric.yaml"), "--ibnetdiscover", str(ibnet)))
    assert f"{ibnet}:2:" in out and "is not a link rate" in out
    assert "set_int_max_str_digits" not in out


@pytest.mark.parametrize(("text", "line"), [
    (HEAD + "  - {name: s1, kind: switch, ports: " + "1" * 5000 + "}\n", 4),
    (HEAD + "  - name: s1\n    kind: switch\n    ports: " + "1" * 5000 + "\n", 6),
    (HEAD + "  - {name: s1, kind: switch, ports: 8}\nlinks:\n  - {a: h1:mlx5_0, b: s1:1, length_m: "
     + "9" * 5000 + "}\n", 6),
    (HEAD + "  - {name: s1, kind: switch, ports: 8, guid: " + "1" * 5000 + "}\n", 4),
])
def test_5000_digit_yaml_integer_is_refused_naming_its_line(text, line):
    with pytest.raises(CablingInputError) as exc:
        parse_manifest(text, "big.yaml")
    assert f"big.yaml:{line}:" in str(exc.value)
    assert "5000 digits is too large" in str(exc.value)
    assert "set_int_max_str_digits" not in str(exc.value)


def test_5000_digit_json_integer_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "big.json"
    path.write_text('{"version": 1,\n "devices": [\n  {"name": "s1", "kind": "switch", "ports": '
                    + "1" * 5000 + "}],\n \"links\": []}\n")
    with pytest.raises(CablingInputError, match=re.escape(f"{path}:3:")):
        load_manifest(path)


@pytest.mark.parametrize("key", ["speed", "width"])
def test_5000_digit_speed_or_width_text_is_a_short_message_naming_the_key(key):
    text = HEAD + "  - {name: s1, kind: switch, ports: 8}\nlinks:\n  - {a: h1:mlx5_0, b: s1:1, " \
        + key + ': "' + "1" * 5000 + '"}\n'
    with pytest.raises(CablingInputError) as exc:
        parse_manifest(text, "big.yaml")
    message = str(exc.value)
    assert f"big.yaml:6: [links.0.{key}] Value error, unknown link {key}" in message
    assert len(message) < 300 and "5000 characters" in message


def test_large_json_manifest_error_is_named_by_json_path_without_a_yaml_pass(tmp_path, monkeypatch):
    # Written here: a 4,096-GPU plan as indented JSON with its last link's width mangled. Locating
    # the line would mean parsing all of it again as YAML (20 s and 1.2 GB for the 22 MiB JSON of
    # the largest plan); past the threshold (lowered here to the size of this file) the JSON path
    # names the key instead.
    import cabling.manifest
    from cabling.plan import PlanSpec, plan_fat_tree

    data = json.loads(plan_fat_tree(PlanSpec(hosts=512, hcas=8)).model_dump_json(exclude_none=True))
    data["links"][-1]["width"] = "3x"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data, indent=2))
    monkeypatch.setattr(cabling.manifest, "JSON_LINE_SEARCH_BYTES", 1 << 20)

    def no_yaml_pass(*_args):
        raise AssertionError("parsed again as YAML")

    monkeypatch.setattr(cabling.manifest, "parse_manifest", no_yaml_pass)
    with pytest.raises(CablingInputError) as exc:
        load_manifest(path)
    assert f"[links.{len(data['links']) - 1}.width]" in str(exc.value)
    assert "unknown link width '3x'" in str(exc.value)


def test_a_name_longer_than_any_host_or_node_description_is_refused():
    with pytest.raises(CablingInputError, match=r"is 300 characters long; names have at most 256"):
        parse_manifest(HEAD.replace("h1", "h" * 300), "long.yaml")
