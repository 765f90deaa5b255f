"""The BIOS capability over Redfish: current values, pending values and the attribute
registry that says which names and values the firmware accepts; staging changes for the
next reset (with the vendor's configuration job where it needs one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.bios_registry import Registry, parse_registry
from provisioner.bmc.bios_state import BiosState, settings_outcome
from provisioner.bmc.bios_values import same_value
from provisioner.redfish.errors import BMCNotFound, BMCUnsupported, RedfishError

if TYPE_CHECKING:
    from provisioner.bmc.redfish_bmc import RedfishBMC


class RedfishBios:
    """A host's Bios resource (``ComputerSystem.Bios``) and its ``@Redfish.Settings``."""

    def __init__(self, bmc: RedfishBMC) -> None:
        self._bmc = bmc

    def _link(self, *, refresh: bool = False) -> str:
        link = rp.odata_id(self._bmc.system(refresh=refresh).get("Bios"))
        if not link:
            raise BMCUnsupported("the system has no Bios resource: BIOS settings cannot be "
                                 "read", bmc=self._bmc.name, path=self._bmc.system_path())
        return link

    def validate(self) -> None:
        """Whether BIOS settings can be read here (the System links a Bios); one read."""
        self._link()

    def read_bios(self, *, with_registry: bool = True) -> BiosState:
        """The Bios resource of the host's system, its pending settings and (unless told
        not to: a read-back after a reset needs only the values) its registry."""
        client = self._bmc.client
        link = self._link()
        bios = client.get(link)
        attrs = bios.get("Attributes")
        state = BiosState(path=link, attributes=dict(attrs) if isinstance(attrs, dict) else {})
        settings = bios.get("@Redfish.Settings")
        if isinstance(settings, dict):
            state.settings_path = rp.odata_id(settings.get("SettingsObject"))
            times = settings.get("SupportedApplyTimes")
            state.apply_times = tuple(str(t) for t in times) if isinstance(times, list) else ()
            state.settings_time, state.settings_messages = settings_outcome(settings)
        if state.settings_path and \
                state.settings_path.rstrip("/").lower() != link.rstrip("/").lower():
            state.pending = self._pending(state)
        if with_registry:
            state.registry = self._registry(bios, link, state.warnings)
        return state

    def _pending(self, state: BiosState) -> dict[str, Any]:
        """Values in the settings object that differ from the current ones (some BMCs list
        only the changes there, others every attribute)."""
        assert state.settings_path is not None
        try:
            body = self._bmc.client.get(state.settings_path)
        except RedfishError as exc:
            state.warnings.append(f"pending BIOS settings {state.settings_path}: {exc}")
            return {}
        attrs = body.get("Attributes")
        if not isinstance(attrs, dict):
            return {}
        return {k: v for k, v in attrs.items() if state.attributes.get(k) != v}

    def _registry(self, bios: dict[str, Any], link: str,
                  warnings: list[str]) -> Registry | None:
        """The attribute registry the Bios resource names: from the service's Registries,
        else where Dell keeps it (Bios/BiosRegistry). One that cannot be read is a warning."""
        wanted = str(bios.get("AttributeRegistry") or "")
        for path in [*self._registry_locations(wanted), f"{link.rstrip('/')}/BiosRegistry"]:
            try:
                doc = self._bmc.client.get(path)
            except BMCNotFound:
                continue
            except RedfishError as exc:
                warnings.append(f"BIOS attribute registry {path}: {exc}")
                continue
            registry = parse_registry(doc)
            if registry is not None:
                return registry
        if wanted:
            warnings.append(f"BIOS attribute registry {wanted} not readable: attribute names "
                            "are checked against the current values only")
        return None

    def _registry_locations(self, wanted: str) -> list[str]:
        """Where the service's Registries collection says the wanted registry is. A Location
        may be a path, a path relative to the registry file's resource, or an absolute URL
        of the BMC itself (Cisco CIMC writes its own origin); one naming another host is
        not fetched (the credentials stay with their BMC)."""
        client = self._bmc.client
        registries = client.service("Registries")
        if not registries or not wanted:
            return []
        try:
            files = client.members(registries)
        except RedfishError:
            return []
        out: list[str] = []
        for f in files:
            if not _names_registry(f, wanted):
                continue
            base = rp.odata_id(f) or registries
            for loc in f.get("Location") or []:
                uri = loc.get("Uri") if isinstance(loc, dict) else None
                if not isinstance(uri, str) or not uri.strip():
                    continue
                try:
                    path = client.own_path(urljoin(base.rstrip("/") + "/", uri.strip()))
                except RedfishError:
                    continue
                if path.startswith("/") and path not in out:
                    out.append(path)
        return out

    def stage_bios(self, state: BiosState, changes: dict[str, Any]) -> str | None:
        """Write ``changes`` to the pending settings, to apply at the next reset; returns the
        vendor's job to wait for after the reset (iDRAC), else None."""
        target = state.settings_path or state.path
        if self._bmc.bios_needs_job:
            return self._bmc.stage_bios_job(target, changes)
        body: dict[str, Any] = {"Attributes": changes}
        if "OnReset" in state.apply_times:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
        etag = None
        if state.settings_path:
            # iLO refuses a PATCH of the settings object without its current ETag (If-Match).
            current = self._bmc.client.get(state.settings_path)
            tag = current.get("@odata.etag")
            etag = tag if isinstance(tag, str) else None
        self._bmc.client.patch(target, body, etag=etag)
        return None

    def clear_pending(self, state: BiosState, current: Mapping[str, Any]) -> list[str]:
        """Discard pending values (``current``: those attributes' current values): the
        settings object's own ClearPending action where it offers one (iDRAC), else by
        writing the current values back; then the vendor's queued BIOS jobs. Returns what
        was removed, for the host's history."""
        if not state.settings_path:
            return []
        client = self._bmc.client
        removed: list[str] = []
        actions = rp.obj(rp.obj(client.get(state.settings_path).get("Actions")).get("Oem"))
        clear = [rp.obj(a).get("target") for name, a in actions.items()
                 if name.endswith("ClearPending")]
        if clear and isinstance(clear[0], str):
            client.post(client.own_path(clear[0]), {})
            removed.append(f"pending values ({', '.join(current)}) by ClearPending")
        elif current:
            self.stage_bios(state, dict(current))
            removed.append(f"pending values ({', '.join(current)}) written back")
        removed += [f"queued BIOS job {job}" for job in
                    self._bmc.clear_bios_jobs(state.settings_path)]
        return removed

    def wait_bios_job(self, job: str) -> None:
        """Wait for a job :meth:`stage_bios` returned (after the host reset); raises with the
        BMC's message if it failed."""
        self._bmc.wait_bios_job(job)

    def unapplied_bios(self, wanted: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The wanted values the BIOS does not show yet (name -> what it shows), and what the
        BMC says of its last attempt to apply settings (``@Redfish.Settings.Messages``)."""
        bios = self._bmc.client.get(self._link(refresh=True))
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


def _names_registry(f: dict[str, Any], wanted: str) -> bool:
    """Whether a MessageRegistryFile is the registry the Bios resource names: by its
    Registry or Id, with or without the version (``BiosAttributeRegistryX.1.0`` vs
    ``BiosAttributeRegistryX``)."""
    stem = wanted.split(".")[0].lower()
    for key in ("Registry", "Id"):
        ident = str(f.get(key) or "").lower()
        if ident and (ident == wanted.lower() or ident.split(".")[0] == stem):
            return True
    return False
