"""Vendor-neutral BIOS intents resolved against the BIOS attributes recorded from each vendor
family's servers (pure logic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.bmc.bios_intents import CATALOGUE, IntentError, check_written, resolve
from provisioner.bmc.bios_registry import AttributeDef, Registry

CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus" / "redfish"
BIOS = {
    "dell": "dell-idrac9-poweredge-r750-ib-libredfish/mockup/redfish/v1/Systems/"
            "System.Embedded.1/Bios/index.json",
    "hpe": "hpe-ilo6-proliant-dl380a-gen11-h100nvl-ilo-emulator/mockup/Systems/1/bios/"
           "index.json",
    "hpe-amd": "hpe-ilo5-proliant-xl675d-gen10plus-a100-csm/mockup/Systems/1/bios/index.json",
    "lenovo": "lenovo-xcc-sr670v2-libredfish/mockup/redfish/v1/Systems/1/Bios/index.json",
    "supermicro": "supermicro-sys-821ge-tnhr-hgx-h100-libredfish/mockup/redfish/v1/Systems/1/"
                  "Bios/index.json",
    "nvidia": "nvidia-dgx-h100-libredfish/mockup/redfish/v1/Systems/DGX/Bios/index.json",
}


def _attributes(which: str) -> dict[str, object]:
    return json.loads((CORPUS / BIOS[which]).read_text())["Attributes"]


@pytest.mark.parametrize(("which", "vendor", "intent", "value", "expected"), [
    ("dell", "dell", "sr-iov", "enabled", [("SriovGlobalEnable", "Enabled")]),
    ("hpe", "hpe", "sr-iov", True, [("Sriov", "Enabled")]),
    ("lenovo", "lenovo", "sr-iov", "enabled", [("DevicesandIOPorts_SRIOV", "Enabled")]),
    ("supermicro", "supermicro", "sr-iov", "enabled", [("SR_IOVSupport_0047", "Enabled")]),
    ("nvidia", "nvidia", "sr-iov", "enabled", [("SriovSupport", "Enabled")]),
    # Intel VT-d or AMD-Vi, whichever this HPE BIOS has.
    ("hpe", "hpe", "io-virtualization", "enabled", [("IntelProcVtd", "Enabled")]),
    ("hpe-amd", "hpe", "io-virtualization", "enabled", [("ProcAmdIoVt", "Enabled")]),
    # Supermicro spells this switch Enable/Disable and SR-IOV Enabled/Disabled.
    ("supermicro", "supermicro", "io-virtualization", "disabled",
     [("IntelVTforDirectedI_O_VT_d__1E32", "Disable")]),
    ("nvidia", "nvidia", "io-virtualization", "enabled", [("VTdSupport", "Enable")]),
    ("dell", "dell", "c-states", "disabled",
     [("ProcCStates", "Disabled"), ("ProcC1E", "Disabled")]),
    ("hpe-amd", "hpe", "numa-per-socket", 4,
     [("NumaMemoryDomainsPerSocket", "FourMemoryDomainsPerSocket")]),
    ("hpe", "hpe", "numa-per-socket", 1, [("SubNumaClustering", "Disabled")]),
    ("supermicro", "supermicro", "secure-boot", "disabled", [("SecureBootEnable_0122", False)]),
    ("lenovo", "lenovo", "power-profile", "performance",
     [("OperatingModes_ChooseOperatingMode", "MaximumPerformance")]),
])
def test_an_intent_names_each_vendors_attribute_and_spelling(which, vendor, intent, value,
                                                             expected) -> None:
    got = resolve(intent, value, vendor, _attributes(which), None)
    assert [(r.attribute, r.value) for r in got] == expected


def test_the_registry_chooses_the_spelling_the_firmware_takes() -> None:
    registry = Registry({"SR_IOVSupport_0047": AttributeDef(
        "SR_IOVSupport_0047", "Enumeration", values=("Disable", "Enable"))})
    got = resolve("sr-iov", "enabled", "supermicro", {}, registry)
    assert [(r.attribute, r.value) for r in got] == [("SR_IOVSupport_0047", "Enable")]


def test_a_vendor_without_a_mapping_is_an_error_naming_it() -> None:
    with pytest.raises(IntentError, match="no mapping for vendor hpe"):
        resolve("above-4g-decoding", "enabled", "hpe", _attributes("hpe"), None)
    with pytest.raises(IntentError, match="no mapping for vendor generic"):
        resolve("sr-iov", "enabled", "generic", {"Sriov": "Enabled"}, None)
    with pytest.raises(IntentError, match="has none of ProcTurbo, ProcAMDBoost"):
        resolve("turbo-boost", "enabled", "hpe", {"Sriov": "Enabled"}, None)


def test_every_intent_value_is_checked_where_it_is_written() -> None:
    assert check_written("sr-iov", "on") is None and check_written("sr-iov", True) is None
    assert check_written("numa-per-socket", 2) is None
    assert "takes enabled, disabled" in str(check_written("sr-iov", "maybe"))
    assert "unknown BIOS intent" in str(check_written("sriov-x", "enabled"))
    assert all("-" in name for name in CATALOGUE)  # never a Redfish attribute name
