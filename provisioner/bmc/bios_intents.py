"""Vendor-neutral BIOS intents: the settings engineers pin on GPU servers (SR-IOV, IOMMU,
above-4G decoding, C-states...), each mapped per vendor family to the attribute names and
values its firmware uses. A profile writes ``sr-iov: enabled`` once for a mixed fleet; each
host's BIOS decides which of the family's candidate names it has, and its registry which
spelling of the value it takes (Supermicro writes ``Enable`` for some switches and
``Enabled`` for others). Intent names hold a hyphen: a Redfish attribute name never does
(AttributeRegistry: ``^[A-Za-z][A-Za-z0-9_]+$``), so the two never collide.

The names below were read from recorded BIOS resources and registries (Dell iDRAC9 R750,
HPE iLO 5/6/7 Gen10 Plus-Gen12, Lenovo XCC SR670 V2, Supermicro SYS-821GE-TNHR, NVIDIA DGX
H100); a vendor without a known setting for an intent has no entry, and using the intent on
its hosts is an error naming the vendor."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.bmc.bios_registry import AttributeDef, Registry
from provisioner.bmc.bios_values import Value

ON = ("Enabled", "Enable", True)
OFF = ("Disabled", "Disable", False)
INTENT_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")


@dataclass(frozen=True)
class Setting:
    """One attribute an intent value may set (Supermicro's release suffix ``_XXXX`` on the
    name is matched), and candidate spellings of the value, index-aligned across the
    intent's values (``Enabled``/``Disabled`` vs ``Enable``/``Disable``)."""

    name: str
    values: tuple[Value, ...]


Group = tuple[Setting, ...]  # alternatives: the first whose attribute the BIOS has is set
Mapping_ = Mapping[str, tuple[Group, ...]]  # intent value -> one attribute per group


@dataclass(frozen=True)
class Intent:
    """A vendor-neutral setting and its mapping per vendor family."""

    name: str
    summary: str
    vendors: Mapping[str, Mapping_]

    @property
    def values(self) -> tuple[str, ...]:
        """The values the intent takes, as written in a profile."""
        out: dict[str, None] = {}
        for mapping in self.vendors.values():
            out.update(dict.fromkeys(mapping))
        return tuple(out)


def _switch(*names: str, on: tuple[Value, ...] = ON, off: tuple[Value, ...] = OFF) -> Mapping_:
    return {"enabled": (tuple(Setting(n, on) for n in names),),
            "disabled": (tuple(Setting(n, off) for n in names),)}


def _choice(name: str, **values: tuple[Value, ...]) -> Mapping_:
    return {key: ((Setting(name, spelled),),) for key, spelled in values.items()}


CATALOGUE: dict[str, Intent] = {i.name: i for i in (
    Intent("sr-iov", "PCIe SR-IOV (virtual functions for NICs and GPUs)", {
        "dell": _switch("SriovGlobalEnable"),
        "hpe": _switch("Sriov"),
        "lenovo": _switch("DevicesandIOPorts_SRIOV"),
        "supermicro": _switch("SR_IOVSupport"),
        "nvidia": _switch("SriovSupport"),
    }),
    Intent("io-virtualization", "the IOMMU: Intel VT-d / AMD-Vi (GPUDirect, passthrough)", {
        # iDRAC's Virtualization Technology switch covers VT-x and VT-d together.
        "dell": _switch("ProcVirtualization"),
        "hpe": _switch("IntelProcVtd", "ProcAmdIoVt"),
        "lenovo": _switch("DevicesandIOPorts_IntelVTforDirectedIOVTd"),
        "supermicro": _switch("IntelVTforDirectedI_O_VT_d_"),
        "nvidia": _switch("VTdSupport"),
    }),
    Intent("cpu-virtualization", "CPU virtualization: Intel VT-x / AMD-V", {
        "dell": _switch("ProcVirtualization"),
        "hpe": _switch("ProcVirtualization"),
        "lenovo": _switch("Processors_IntelVirtualizationTechnology"),
        "supermicro": _switch("IntelVirtualizationTechnology"),
        "nvidia": _switch("ProcessorVmxEnable"),
    }),
    Intent("above-4g-decoding", "64-bit MMIO above 4 GB (large GPU BARs)", {
        "dell": _switch("MmioAbove4Gb"),
        "lenovo": _switch("DevicesandIOPorts_PCI64BitResourceAllocation"),
        "supermicro": _switch("Above4GDecoding"),
    }),
    Intent("resizable-bar", "PCIe Re-Size BAR support", {
        "supermicro": _switch("Re_SizeBARSupport"),
    }),
    Intent("pcie-acs", "PCIe Access Control Services in the root ports (off for P2P)", {
        "lenovo": _switch("Processors_PCIeACSCTL"),
        "supermicro": _switch("PCIeACSCTL"),
    }),
    Intent("power-profile", "the firmware's system power/performance profile", {
        "dell": _choice("SysProfile", performance=("PerfOptimized",),
                        balanced=("PerfPerWattOptimizedDapc",), custom=("Custom",)),
        "hpe": _choice("WorkloadProfile", performance=("HighPerformanceCompute(HPC)",),
                       balanced=("GeneralPowerEfficientCompute",), custom=("Custom",)),
        "lenovo": _choice("OperatingModes_ChooseOperatingMode",
                          performance=("MaximumPerformance",),
                          balanced=("Efficiency_FavorPerformance",),
                          custom=("CustomMode",)),
    }),
    Intent("c-states", "processor idle C-states (off for steady GPU feeding latency)", {
        "dell": {"enabled": ((Setting("ProcCStates", ("Enabled",)),),),
                 "disabled": ((Setting("ProcCStates", ("Disabled",)),),
                              (Setting("ProcC1E", ("Disabled",)),))},
        "hpe": _choice("MinProcIdlePower", enabled=("C6",), disabled=("NoCStates",)),
        "lenovo": _choice("Processors_CStates", enabled=("Autonomous",),
                          disabled=("Disabled",)),
        "supermicro": {"disabled": ((Setting("EnhancedHaltState_C1E_", ("Disable",)),),
                                    (Setting("PackageCState", ("C0/C1 state",)),))},
        "nvidia": _choice("PackageCState", disabled=("C0/C1 state",)),
    }),
    Intent("numa-per-socket", "NUMA nodes per socket (AMD NPS, Intel sub-NUMA clusters)", {
        "dell": _choice("SubNumaCluster", **{"1": ("Disabled",), "2": ("2-Way",)}),
        "hpe": {"1": ((Setting("NumaMemoryDomainsPerSocket", ("OneMemoryDomainPerSocket",)),
                       Setting("SubNumaClustering", ("Disabled",))),),
                "2": ((Setting("NumaMemoryDomainsPerSocket", ("TwoMemoryDomainsPerSocket",)),
                       Setting("SubNumaClustering", ("Enabled",))),),
                "4": ((Setting("NumaMemoryDomainsPerSocket", ("FourMemoryDomainsPerSocket",)),
                       ),)},
        "lenovo": _choice("Processors_SNC", **{"1": ("Disabled",), "2": ("Enabled",)}),
    }),
    Intent("hyper-threading", "simultaneous multithreading (Intel HT, AMD SMT)", {
        "dell": _switch("LogicalProc"),
        "hpe": _switch("ProcHyperthreading", "ProcSMT"),
        "lenovo": _switch("Processors_HyperThreading"),
        "supermicro": _switch("Hyper_Threading_ALL_"),
    }),
    Intent("turbo-boost", "processor turbo (Intel Turbo Boost, AMD Core Performance Boost)", {
        "dell": _switch("ProcTurboMode"),
        "hpe": _switch("ProcTurbo", "ProcAMDBoost"),
        "lenovo": _switch("Processors_TurboMode"),
        "supermicro": _switch("TurboMode"),
        "nvidia": _switch("TurboMode"),
    }),
    Intent("boot-mode", "UEFI or legacy BIOS boot", {
        "dell": _choice("BootMode", uefi=("Uefi",), legacy=("Bios",)),
        "hpe": _choice("BootMode", uefi=("Uefi",), legacy=("LegacyBios",)),
        "lenovo": _choice("BootModes_SystemBootMode", uefi=("UEFIMode",),
                          legacy=("LegacyMode",)),
    }),
    Intent("secure-boot", "UEFI Secure Boot (off where unsigned GPU/OFED modules load)", {
        "dell": _switch("SecureBoot"),
        "lenovo": _switch("SecureBootConfiguration_SecureBootSetting"),
        "supermicro": _switch("SecureBootEnable", on=(True, "Enabled"), off=(False, "Disabled")),
        "nvidia": _switch("SecureBootSupport"),
    }),
)}

# YAML's booleans, and the words people write for a switch, mean enabled/disabled.
_WORDS = {True: "enabled", False: "disabled"}
_SYNONYMS = {**dict.fromkeys(("on", "true", "yes", "enable"), "enabled"),
             **dict.fromkeys(("off", "false", "no", "disable"), "disabled")}


def is_intent(name: str) -> bool:
    """Whether a baseline key is written as an intent (it holds a hyphen)."""
    return "-" in name


def intent_value(value: Any) -> str:
    """An intent's value as written: ``true``/``on`` read as enabled, numbers as text."""
    if isinstance(value, bool):
        return _WORDS[value]
    text = str(value).strip().lower()
    return _SYNONYMS.get(text, text)


class IntentError(ValueError):
    """An intent that cannot be resolved for one host; the message says why."""


@dataclass(frozen=True)
class Resolved:
    """One attribute an intent sets on a host, with the value spelt as its BIOS takes it."""

    intent: str
    attribute: str
    value: Value


def _name_in(candidate: str, names: set[str]) -> str | None:
    if candidate in names:
        return candidate
    suffixed = re.compile(re.escape(candidate) + r"_[0-9A-Fa-f]{4}")
    found = sorted(n for n in names if suffixed.fullmatch(n))
    return found[0] if found else None


def _spelling(setting: Setting, styles: Mapping[Any, int], info: AttributeDef | None,
              current: Any) -> Value:
    allowed = info.values if info else None
    if allowed:
        for candidate in setting.values:
            if isinstance(candidate, str) and candidate in allowed:
                return candidate
    if (info and info.kind == "Boolean") or isinstance(current, bool):
        flags = [v for v in setting.values if isinstance(v, bool)]
        if flags:
            return flags[0]
    # Without a registry, spell it the way the BIOS spells its current value.
    style = styles.get(current) if isinstance(current, str) else None
    if style is not None and style < len(setting.values):
        return setting.values[style]
    return next((v for v in setting.values if isinstance(v, str)), setting.values[0])


def _styles(mapping: Mapping_, attribute: str) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for groups in mapping.values():
        for group in groups:
            for setting in group:
                if setting.name == attribute or attribute.startswith(setting.name + "_"):
                    for i, v in enumerate(setting.values):
                        out.setdefault(v, i)
    return out


def resolve(name: str, value: Any, vendor: str, attributes: Mapping[str, Any],
            registry: Registry | None) -> list[Resolved]:
    """What intent ``name`` = ``value`` sets on a host of ``vendor`` whose BIOS reports
    ``attributes`` (and ``registry``); raises IntentError naming what is missing."""
    intent = CATALOGUE.get(name)
    if intent is None:
        raise IntentError(f"unknown intent {name!r}")
    wanted = intent_value(value)
    mapping = intent.vendors.get(vendor)
    if mapping is None:
        known = ", ".join(sorted(intent.vendors))
        raise IntentError(f"intent {name} has no mapping for vendor {vendor} (mapped for "
                          f"{known}): write the attribute by its name for these hosts")
    groups = mapping.get(wanted)
    if groups is None:
        raise IntentError(f"intent {name} has no value {wanted!r} on {vendor} (there: "
                          f"{', '.join(mapping)})")
    names = set(attributes) | set(registry.attributes if registry else ())
    out = []
    for group in groups:
        found = next(((s, n) for s in group if (n := _name_in(s.name, names))), None)
        if found is None:
            raise IntentError(f"intent {name}: this {vendor} BIOS has none of "
                              f"{', '.join(s.name for s in group)}")
        setting, attribute = found
        info = registry.get(attribute) if registry else None
        out.append(Resolved(name, attribute, _spelling(setting, _styles(mapping, attribute),
                                                       info, attributes.get(attribute))))
    return out


def check_written(name: str, value: Any) -> str | None:
    """Why a profile's ``name: value`` is not a known intent and value (None: it is)."""
    intent = CATALOGUE.get(name)
    if intent is None:
        return f"unknown BIOS intent {name!r}"
    if intent_value(value) not in intent.values:
        return (f"intent {name} takes {', '.join(intent.values)}, not "
                f"{intent_value(value)!r}")
    return None
