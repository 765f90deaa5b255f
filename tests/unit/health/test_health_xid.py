"""Xid/SXid kernel-log parser on real logs in three timestamp formats, and synthetic bad cases."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from provisioner.health.xid import (
    XidAction,
    classify_xid,
    parse_kernel_log,
    serials_from_kernel_log,
)
from tests.conftest import corpus_path

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
DMESG = ("pcie-gpu", "dmesg-nvrm-xid-gpud")


def _lines(*parts: str) -> list[str]:
    return corpus_path(*DMESG, *parts).read_text().splitlines()


def test_real_dmesg_T_xid_119_gsp_timeout():
    lines = _lines("dmesg-with-xid-119.log")
    events = parse_kernel_log(lines)
    assert [e.code for e in events] == [119] * 5
    assert {e.bus_id for e in events} == {"0000:9b:00.0"}
    assert events[0].action is XidAction.RESET_GPU
    assert serials_from_kernel_log(lines) == {"0000:9b:00.0": "1650124014249"}


def test_real_iso_dmesg_dbe_remap_contained():
    events = parse_kernel_log(_lines("dmesg.0.log"))
    counts = Counter(e.code for e in events)
    assert counts == {94: 9, 48: 1, 63: 1}
    assert {e.action for e in events if e.code in (48, 63)} == {XidAction.RESET_GPU}
    assert {e.action for e in events if e.code == 94} == {XidAction.WORKFLOW}


def test_real_decode_format_xid_13_is_an_application_fault():
    events = parse_kernel_log(_lines("dmesg.decode.iso.xid13.log"))
    assert {e.code for e in events} == {13, 43}
    assert all(e.action is XidAction.WORKFLOW for e in events)
    assert events[0].bus_id == "0000:38:00.0"


def test_real_fabric_manager_non_fatal_sxids():
    events = parse_kernel_log(_lines("fabric-manager.0.log"))
    assert events and all(e.kind == "sxid" and e.code == 12028 and not e.fatal for e in events)
    assert all(e.action is XidAction.IGNORE for e in events)


def test_real_kmsg_without_xid_has_no_event():
    assert parse_kernel_log(_lines("kmsg.1.log")) == []
    assert parse_kernel_log(_lines("kmsg.2.peermem.log")) == []


def test_synthetic_bad_host_log():
    lines = (FIX / "dmesg-iso.bad-host.log").read_text().splitlines()
    events = parse_kernel_log(lines)
    by_code = {e.code: e for e in events}
    assert by_code[64].action is XidAction.CONTACT_SUPPORT
    assert by_code[13].action is XidAction.WORKFLOW
    assert by_code[24007].kind == "sxid" and by_code[24007].fatal
    assert by_code[24007].action is XidAction.REBOOT
    assert serials_from_kernel_log(lines) == {"0000:2a:00.0": "1654922007777"}


def test_xid_79_needs_a_reboot():
    (e,) = parse_kernel_log((FIX / "dmesg-T.xid79.log").read_text().splitlines())
    assert e.code == 79 and e.action is XidAction.REBOOT


def test_xid_154_follows_the_drivers_stated_action_and_unknown_xids_are_flagged():
    events = parse_kernel_log((FIX / "kmsg.xid154.log").read_text().splitlines())
    assert events[0].action is XidAction.REBOOT
    assert events[1].action is XidAction.UNKNOWN
    assert classify_xid(154, "changed from 0x0 (None) to 0x1 (GPU Reset Required)")[1] is XidAction.RESET_GPU


def test_older_driver_format_without_pci_prefix():
    (e,) = parse_kernel_log(["[ 1234.5] NVRM: Xid (0000:3b:00): 79, GPU has fallen off the bus."])
    assert e.bus_id == "0000:3b:00.0" and e.code == 79
