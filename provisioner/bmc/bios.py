"""Reading a host's BIOS settings over Redfish: current values, pending values, and the
attribute registry that says which names and values the firmware accepts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.errors import BMCNotFound, BMCUnsupported, RedfishError


@dataclass(frozen=True)
class AttributeInfo:
    """What a BIOS attribute registry says of one attribute."""

    name: str
    kind: str | None = None  # Enumeration, String, Integer, Boolean, Password
    read_only: bool = False
    values: tuple[str, ...] | None = None  # the allowed values of an enumeration


@dataclass
class BiosState:
    """A host's BIOS as its BMC reports it."""

    path: str
    attributes: dict[str, Any]
    pending: dict[str, Any] = field(default_factory=dict)  # applied at the next reset
    settings_path: str | None = None
    apply_times: tuple[str, ...] = ()
    registry: dict[str, AttributeInfo] | None = None  # None: the BMC publishes none we could read
    warnings: list[str] = field(default_factory=list)

    def known(self, name: str) -> bool:
        """Whether the firmware knows the attribute (registry first, else current values)."""
        if self.registry is not None:
            return name in self.registry or name in self.attributes
        return name in self.attributes

    def names(self) -> list[str]:
        """Every attribute name the firmware offers."""
        return sorted({*self.attributes, *(self.registry or {})})


def read_bios(bmc: RedfishBMC) -> BiosState:
    """The Bios resource of the host's system, its pending settings and its registry."""
    link = rp.odata_id(bmc.system().get("Bios"))
    if not link:
        raise BMCUnsupported("the system has no Bios resource: BIOS settings cannot be read",
                             bmc=bmc.name, path=bmc.system_path())
    bios = bmc.client.get(link)
    attrs = bios.get("Attributes")
    state = BiosState(path=link, attributes=dict(attrs) if isinstance(attrs, dict) else {})
    settings = bios.get("@Redfish.Settings")
    if isinstance(settings, dict):
        state.settings_path = rp.odata_id(settings.get("SettingsObject"))
        times = settings.get("SupportedApplyTimes")
        state.apply_times = tuple(str(t) for t in times) if isinstance(times, list) else ()
    if state.settings_path and state.settings_path.rstrip("/").lower() != link.rstrip("/").lower():
        state.pending = _pending(bmc, state)
    state.registry = _registry(bmc, bios, link, state.warnings)
    return state


def _pending(bmc: RedfishBMC, state: BiosState) -> dict[str, Any]:
    """Values in the settings object that differ from the current ones (some BMCs list only
    the changes there, others every attribute)."""
    assert state.settings_path is not None
    try:
        body = bmc.client.get(state.settings_path)
    except RedfishError as exc:
        state.warnings.append(f"pending BIOS settings {state.settings_path}: {exc}")
        return {}
    attrs = body.get("Attributes")
    if not isinstance(attrs, dict):
        return {}
    return {k: v for k, v in attrs.items() if state.attributes.get(k) != v}


def _registry(bmc: RedfishBMC, bios: dict[str, Any], link: str,
              warnings: list[str]) -> dict[str, AttributeInfo] | None:
    """The attribute registry the Bios resource names: from the service's Registries, else
    where Dell keeps it (Bios/BiosRegistry). A registry that cannot be read is a warning."""
    wanted = str(bios.get("AttributeRegistry") or "")
    for path in [*_registry_locations(bmc, wanted), f"{link.rstrip('/')}/BiosRegistry"]:
        try:
            doc = bmc.client.get(path)
        except BMCNotFound:
            continue
        except RedfishError as exc:
            warnings.append(f"BIOS attribute registry {path}: {exc}")
            continue
        entries = rp.obj(doc.get("RegistryEntries")).get("Attributes")
        if isinstance(entries, list):
            return parse_registry(entries)
    if wanted:
        warnings.append(f"BIOS attribute registry {wanted} not readable: attribute names are "
                        "checked against the current values only")
    return None


def _registry_locations(bmc: RedfishBMC, wanted: str) -> list[str]:
    registries = bmc.client.service("Registries")
    if not registries or not wanted:
        return []
    try:
        files = bmc.client.members(registries)
    except RedfishError:
        return []
    out: list[str] = []
    stem = wanted.split(".")[0].lower()
    for f in files:
        ident = str(f.get("Registry") or f.get("Id") or "").lower()
        if ident != wanted.lower() and ident.split(".")[0] != stem:
            continue
        for loc in f.get("Location") or []:
            uri = loc.get("Uri") if isinstance(loc, dict) else None
            if isinstance(uri, str) and uri.startswith("/"):
                out.append(uri)
    return out


def parse_registry(entries: list[Any]) -> dict[str, AttributeInfo]:
    """AttributeRegistry ``RegistryEntries.Attributes`` as name -> info."""
    out: dict[str, AttributeInfo] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("AttributeName"), str):
            continue
        values = entry.get("Value")
        allowed = None
        if isinstance(values, list):
            allowed = tuple(str(v.get("ValueName")) for v in values
                            if isinstance(v, dict) and v.get("ValueName") is not None)
        out[entry["AttributeName"]] = AttributeInfo(
            name=entry["AttributeName"],
            kind=str(entry["Type"]) if entry.get("Type") else None,
            read_only=bool(entry.get("ReadOnly") or entry.get("Immutable")),
            values=allowed or None,
        )
    return out


def stage_bios(bmc: RedfishBMC, state: BiosState, changes: dict[str, Any]) -> str | None:
    """Write ``changes`` to the pending settings, to apply at the next reset; returns a vendor
    job to wait for after the reset (iDRAC), else None."""
    vendor_stage = getattr(bmc, "stage_bios", None)
    target = state.settings_path or state.path
    if callable(vendor_stage):
        job = vendor_stage(target, changes)
        return job if isinstance(job, str) else None
    body: dict[str, Any] = {"Attributes": changes}
    if "OnReset" in state.apply_times:
        body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
    etag = None
    if state.settings_path:
        # iLO refuses a PATCH of the settings object without its current ETag (If-Match).
        current = bmc.client.get(state.settings_path)
        etag = current.get("@odata.etag") if isinstance(current.get("@odata.etag"), str) else None
    bmc.client.patch(target, body, etag=etag)
    return None


def text_value(value: Any) -> str:
    """An attribute value as printed and compared (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def same_value(want: Any, have: Any) -> bool:
    """Whether a BIOS reports the wanted value.

    BMCs report booleans as JSON booleans or as "True"-like strings, and numbers sometimes as
    strings: compare the printed forms, exactly otherwise (enumerations are case-sensitive).
    """
    return text_value(want) == text_value(have) or (
        isinstance(want, bool) and text_value(have).lower() == text_value(want))


def unapplied(bmc: RedfishBMC, wanted: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The wanted values the BIOS does not show yet (name -> what it shows), and what the BMC
    says of its last attempt to apply settings (``@Redfish.Settings.Messages``)."""
    link = rp.odata_id(bmc.system(refresh=True).get("Bios")) or ""
    bios = bmc.client.get(link)
    found = bios.get("Attributes")
    attrs: dict[str, Any] = found if isinstance(found, dict) else {}
    still = {k: attrs.get(k) for k, v in wanted.items() if not same_value(v, attrs.get(k))}
    settings = bios.get("@Redfish.Settings")
    notes = []
    if isinstance(settings, dict):
        for msg in settings.get("Messages") or []:
            if isinstance(msg, dict) and "success" not in str(msg.get("MessageId", "")).lower():
                notes.append(str(msg.get("Message") or msg.get("MessageId")))
    return still, "; ".join(notes)
