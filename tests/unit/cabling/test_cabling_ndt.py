"""UFM NDT import, and UFM's own cable-validation test set as an acceptance test of validate."""

from __future__ import annotations

import json
import re

import pytest

from cabling.diff import validate
from cabling.discovery.ibnetdiscover import load_ibnetdiscover
from cabling.errors import CablingInputError
from cabling.manifest import load_manifest
from cabling.ndt import export_ndt, load_ndt
from cabling.resolve import resolve
from tests.conftest import corpus_path

SET = ("ib", "ufm-ndt-cabling-validation-dgx-a100-director")


def _ndt(*parts: str):
    return corpus_path(*SET, "ndt", *parts)


def test_positive_ndts_import():
    m = load_ndt([_ndt("positive", "switch_to_host_topo1.ndt"), _ndt("positive", "switch_to_switch_topo2.ndt")])
    dm = m.device_map()
    host = dm["sat111092710053"]
    assert host.kind == "host" and host.hcas[:2] == ["ibp11s0f0", "ibp21s0f0"]
    assert dm["sat11-0101-0927-20ib0"].kind == "switch"
    assert str(m.links[0]) == "SAT111092710053:ibp11s0f0 <-> SAT11-0101-0927-20IB0:1"
    director_ports = {lk.b.port for lk in m.links if lk.b.device == "SAT11-0101-0903-01IB1-A"}
    assert "L16/U2/20" in director_ports
    # switch_to_switch lists cables from both ends; each cable is kept once.
    assert len(m.links) == 2223 + 3195
    assert m.where_link(0).endswith("switch_to_host_topo1.ndt:2")
    assert m.where_link(len(m.links) - 1).endswith("switch_to_switch_topo2.ndt:6352")


@pytest.mark.parametrize(("name", "line", "text"), [
    ("garbage.ndt", 1, "not a UFM NDT file"),
    ("incorrect_columns.ndt", 1, "lacks column(s) StartPort"),
    ("incorrect_ports.ndt", 2, "cannot read StartPort 'abra'"),
])
def test_negative_ndts_give_line_numbers(name, line, text):
    with pytest.raises(CablingInputError) as exc:
        load_ndt([_ndt("negative", name)])
    assert f"{name}:{line}:" in str(exc.value) and text in str(exc.value)


def test_site_survey_spreadsheets():
    m = load_ndt([_ndt("other", "ndt.csv")])
    lk = m.links[0]
    assert str(lk) == "DSM07-0101-0806-01IB0:21 <-> DSM07-0101-0806-01IB1:L1/U1/1"
    assert lk.speed == "HDR" and lk.length_m == 10
    assert m.device_map()["dsm07-0101-0806-01ib0"].location.rack == "F01C04-DR426"
    h2s = load_ndt([_ndt("other", "ndth2s.csv")])
    assert h2s.device_map()["server 1 ib port 1"].kind == "host"
    assert len(h2s.links) == 320


def test_ndt_errors(tmp_path):
    empty = tmp_path / "empty.ndt"
    empty.write_text("\n\n")
    with pytest.raises(CablingInputError, match="empty NDT file"):
        load_ndt([empty])
    header_only = tmp_path / "h.ndt"
    header_only.write_text("#StartDevice,StartPort,EndDevice,EndPort,LinkType\n")
    with pytest.raises(CablingInputError, match="header but no links"):
        load_ndt([header_only])
    no_dev = tmp_path / "d.ndt"
    no_dev.write_text("#StartDevice,StartPort,EndDevice,EndPort\n,Port 1,sw,Port 2\n")
    with pytest.raises(CablingInputError, match=r"d.ndt:2: StartDevice and EndDevice must not be empty"):
        load_ndt([no_dev])
    bad_speed = tmp_path / "s.ndt"
    bad_speed.write_text("#StartDevice,StartPort,EndDevice,EndPort,Speed\nsw1,Port 1,sw2,Port 2,fast\n")
    with pytest.raises(CablingInputError, match=r"s.ndt:2: unknown link speed"):
        load_ndt([bad_speed])
    with pytest.raises(CablingInputError, match="cannot read NDT file"):
        load_ndt([tmp_path / "none.ndt"])


def _ufm_link(text: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """'DEV/PORT - DEV/PORT' of UFM's report, as two (device, port) pairs in our naming."""
    left, right = text.split(" - ")
    out = []
    for side in (left, right):
        dev, _, port = side.partition("/")
        port = port[len(dev) + 1:] if port.casefold().startswith(dev.casefold() + " ") else port
        out.append((dev.casefold(), port.casefold()))
    return out[0], out[1]


def test_validate_finds_what_ufm_expected_report_lists():
    manifest = load_ndt([_ndt("positive", "switch_to_host_topo1.ndt"), _ndt("positive", "switch_to_switch_topo2.ndt")])
    fab = load_ibnetdiscover(corpus_path(*SET, "ibnetdiscover_director.txt"))
    report = validate(manifest, resolve(fab, manifest))
    expected = json.loads(corpus_path(*SET, "expected_report.json").read_text())["report"]
    kinds = report.by_kind()
    # UFM's 2 missing_in_ufm are both cables of one switch the fabric does not answer for at all:
    # that switch is named once, as the root cause, and its 2 cables follow under it.
    assert kinds == {"device_down": 1, "moved": 2, "missing": 2, "unexpected": 107}
    root = next(f for f in report.findings if f.kind == "device_down")
    assert root.data["device"] == "SAT11-0102-0903-05IB0" and root.data["absent"]
    assert [f.data.get("cause") for f in report.findings if f.kind == "missing"] == [root.data["root"]] * 2

    def ep(text: str) -> tuple[str, str]:
        dev, _, port = text.rpartition(":")
        return dev.casefold(), port.casefold()

    # miss_wired: the planned link and the discovered link of each entry are our move's two states.
    ours = set()
    for f in report.findings:
        if f.kind == "moved":
            fixed, old, new = ep(f.data["fixed"]), ep(f.data["from"]), ep(f.data["to"])
            ours.add(frozenset((frozenset((fixed, old)), frozenset((fixed, new)))))
    theirs = {frozenset(frozenset(_ufm_link(e[k])) for k in ("expected", "actual")) for e in expected["miss_wired"]}
    assert ours == theirs
    assert any(f.fix == "move the cable at SAT111090201019 ibp213s0f0 from SAT11-0101-0902-01IB0 port 16 "
               "to SAT11-0101-0902-01IB0 port 17" for f in report.findings)

    missing = {frozenset(ep(e) for e in f.endpoints) for f in report.findings if f.kind == "missing"}
    assert missing == {frozenset(_ufm_link(t)) for t in expected["missing_in_ufm"]}

    # missing_in_ndt: UFM names unnamed HCAs by their vendor string; the switch end identifies each link.
    switch = re.compile(r"ib\d|ufm", re.IGNORECASE)

    def switch_end(pair) -> tuple[str, str]:
        return next(p for p in pair if switch.search(p[0]) and p[1].isdigit())

    extra = {switch_end([ep(e) for e in f.endpoints]) for f in report.findings if f.kind == "unexpected"}
    assert extra == {switch_end(_ufm_link(t)) for t in expected["missing_in_ndt"]}


def _pairs(m) -> set[frozenset[tuple[str, str]]]:
    return {frozenset((lk.a.key, lk.b.key)) for lk in m.links}


def test_ndt_export_roundtrip(tmp_path, fixtures):
    m = load_manifest(fixtures / "small-fabric.yaml")
    text = export_ndt(m)
    assert text.splitlines()[:2] == ["#StartDevice,StartPort,EndDevice,EndPort,LinkType",
                                     "h1,h1 mlx5_0,l0,Port 1,Data"]
    out = tmp_path / "plan.ndt"
    out.write_text(text)
    assert _pairs(load_ndt([out])) == _pairs(m)


def test_ndt_export_of_the_director_set(tmp_path):
    m = load_ndt([_ndt("positive", "switch_to_switch_topo2.ndt")])
    out = tmp_path / "s2s.ndt"
    out.write_text(export_ndt(m))
    assert "Blade 16_Port 2/20" in out.read_text()
    assert _pairs(load_ndt([out])) == _pairs(m)
