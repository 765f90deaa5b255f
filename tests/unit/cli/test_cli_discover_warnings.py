"""`discover` prints each distinct warning once: the same 404 from every lab BMC is one line
naming how many hosts gave it, not one line per host; hosts that report one serial number are
flagged (#36 item 10)."""

from __future__ import annotations

import io

from rich.console import Console

from provisioner.cli.bmc_cmds import print_warnings
from provisioner.workflow.discover import DiscoveryResult

UUIDS = [f"{i:08x}-1c5e-4d1b-9a1e-5b2c0f3a7e{i:02x}" for i in range(40)]


def _render(results: list[DiscoveryResult]) -> list[str]:
    out = Console(file=io.StringIO(), width=200, color_system=None)
    print_warnings(out, results)
    return out.file.getvalue().splitlines()  # type: ignore[attr-defined,no-any-return]


def test_the_same_404_from_every_host_is_one_line() -> None:
    results = [DiscoveryResult(
        f"lab-host{i:02d}", warnings=[
            f"Storage collection /redfish/v1/Systems/{UUIDS[i]}/Storage not read: HTTP 404",
            f"lab-host{i:02d}: no SecureBoot resource",
        ]) for i in range(1, 31)]
    results.append(DiscoveryResult("lab-host31", warnings=["BIOS lacks PxeDev1EnDis"]))
    lines = _render(results)
    assert len(lines) == 3, lines
    assert lines[0] == (f"30 hosts (lab-host01, lab-host02, lab-host03 and 27 more) warning, "
                        f"as lab-host01 gave it: Storage collection /redfish/v1/Systems/"
                        f"{UUIDS[1]}/Storage not read: HTTP 404")
    assert lines[1].startswith("30 hosts (") and "no SecureBoot resource" in lines[1]
    assert lines[2] == "lab-host31 warning: BIOS lacks PxeDev1EnDis"


def test_different_warnings_stay_apart() -> None:
    lines = _render([DiscoveryResult("a", warnings=["firmware inventory not read: HTTP 404"]),
                     DiscoveryResult("b", warnings=["firmware inventory not read: HTTP 500"])])
    assert lines == ["a warning: firmware inventory not read: HTTP 404",
                     "b warning: firmware inventory not read: HTTP 500"]


def _read(host: str, serial: str) -> DiscoveryResult:
    from provisioner.bmc.base import HostFacts

    return DiscoveryResult(host, facts=HostFacts(
        manufacturer="QEMU", model="Standard PC", serial=serial, bmc_firmware="1.0",
        clock_skew_s=0.0, provisioning_mac="52:54:00:00:00:01", nics=[], drives=[]))


def test_two_hosts_with_one_serial_are_flagged() -> None:
    from provisioner.cli.bmc_cmds import print_duplicate_serials
    from provisioner.workflow.discover import duplicate_serials

    results = [_read("lab-host01", "VM-0001"), _read("lab-host02", "VM-0001"),
               _read("lab-host03", "VM-0003"), _read("lab-host04", "  ")]
    # lab-host05 was read before (its stored serial), lab-host01's stored one is this run's
    known = {"lab-host05": "VM-0003", "lab-host01": "OLD", "lab-host06": ""}
    dups = duplicate_serials(results, known)
    assert dups == {"VM-0001": ["lab-host01", "lab-host02"],
                    "VM-0003": ["lab-host03", "lab-host05"]}
    out = Console(file=io.StringIO(), width=300, color_system=None)
    print_duplicate_serials(out, dups)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0].startswith("lab-host01, lab-host02 warning: 2 hosts report serial VM-0001:")
    assert "check these hosts' BMC addresses" in lines[0]


def test_distinct_and_blank_serials_are_not_flagged() -> None:
    from provisioner.workflow.discover import duplicate_serials

    assert duplicate_serials([_read("a", "S1"), _read("b", "S2"), _read("c", ""),
                              _read("d", "")]) == {}
