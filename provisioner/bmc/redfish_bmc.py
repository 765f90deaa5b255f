"""The generic Redfish implementation of the BMC protocol; vendors override its hooks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import (
    LOCATION_EMBEDDED,
    LOCATION_SLOT,
    LOCATION_USB,
    ONBOARD_LOCATIONS,
    BootTarget,
    HostFacts,
    NicPort,
    PowerAction,
    PowerState,
)
from provisioner.bmc.nic_select import (
    NicRuleLike,
    ProvisioningNicError,
    choice_to_dict,
    explain_pinned,
    explain_selection,
    pinned_port,
    port_facts,
)
from provisioner.redfish.client import RedfishClient
from provisioner.redfish.errors import (
    BMCAuthError,
    BMCBadResponse,
    BMCNotFound,
    BMCStateTimeout,
    BMCTimeout,
    BMCTLSError,
    BMCUnreachable,
    BMCUnsupported,
    BMCVerifyFailed,
    RedfishError,
)

log = logging.getLogger(__name__)

# Errors that mean the BMC itself is unusable: never downgraded to a warning.
FATAL = (BMCAuthError, BMCTimeout, BMCTLSError, BMCUnreachable)

# Preferred ResetTypes per action, first allowed one wins.
RESET_CHOICES: dict[PowerAction, tuple[str, ...]] = {
    PowerAction.ON: ("On", "ForceOn", "PushPowerButton"),
    PowerAction.OFF: ("ForceOff", "PushPowerButton"),
    PowerAction.SHUTDOWN: ("GracefulShutdown",),
    PowerAction.RESTART: ("ForceRestart", "PowerCycle", "GracefulRestart"),
    PowerAction.CYCLE: ("PowerCycle",),
}
DEFAULT_RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart")
NETWORK_TARGETS = (BootTarget.PXE, BootTarget.HTTP)
# Redfish ChassisType values of a whole machine (identity may come from one), not a part of it.
ENCLOSURE_TYPES = frozenset({
    "RackMount", "Rack", "Enclosure", "StandAlone", "Shelf", "Drawer", "Sled", "Blade",
    "Tower", "Desktop", "Expansion", "Pod", "Card", "Cartridge", "Other",
})


class RedfishBMC:
    """A host's BMC spoken to over Redfish, following the DMTF schema with no vendor quirks."""

    vendor: ClassVar[str] = "generic"

    def __init__(
        self,
        client: RedfishClient,
        *,
        nic_rule: NicRuleLike | None = None,
        provisioning_mac: str | None = None,
        poll_interval_s: float = 2.0,
        graceful_timeout_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.nic_rule = nic_rule
        self.provisioning_mac = provisioning_mac
        self.poll_interval_s = poll_interval_s
        self.graceful_timeout_s = graceful_timeout_s
        self._sleep = sleep
        self._clock = clock
        self._system_path: str | None = None
        self._system: dict[str, Any] | None = None
        self._system_at = 0.0
        self._nics: list[NicPort] | None = None
        self._ib_ports: list[dict[str, Any]] = []
        self._host_chassis: list[tuple[str, dict[str, Any]]] | None = None
        self._boot_options: list[dict[str, Any]] | None = None
        self.warnings: list[str] = []

    @property
    def name(self) -> str:
        """The BMC's name in messages (its host name or address)."""
        return self.client.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.base_url!r})"

    # -- system -------------------------------------------------------------------------

    def system_path(self) -> str:
        """The URI of the host's ComputerSystem (skipping HGX baseboards and the like)."""
        if self._system_path is None:
            root = self.client.root or self.client.get("/redfish/v1/")
            collection = rp.odata_id(root.get("Systems")) or "/redfish/v1/Systems"
            members = rp.link_list(self.client.get(collection).get("Members"))
            if not members:
                raise BMCNotFound("the BMC lists no ComputerSystem", bmc=self.name,
                                  path=collection)
            self._system_path = self.choose_system(members)
        return self._system_path

    def choose_system(self, members: list[str]) -> str:
        """Which of several Systems is the host: not a GPU baseboard (NVIDIA ``HGX_*``)."""
        hosts = [m for m in members if not m.rstrip("/").rsplit("/", 1)[-1].startswith("HGX_")]
        return (hosts or members)[0]

    def system(self, *, refresh: bool = False, max_age_s: float | None = None) -> dict[str, Any]:
        """The ComputerSystem resource: cached, re-read if ``refresh`` or older than max_age_s."""
        stale = max_age_s is not None and self._clock() - self._system_at > max_age_s
        if self._system is None or refresh or stale:
            self._system = self.client.get(self.system_path())
            self._system_at = self._clock()
        return self._system

    # -- power --------------------------------------------------------------------------

    def power_state(self) -> PowerState:
        """The current PowerState, read fresh."""
        raw = self.system(refresh=True).get("PowerState")
        try:
            return PowerState(str(raw))
        except ValueError:
            raise BMCBadResponse(f"unknown PowerState {raw!r}", bmc=self.name,
                                 path=self.system_path()) from None

    def reset_types(self) -> list[str]:
        """The ResetTypes this BMC allows (from the action or its ActionInfo)."""
        action = (self.system().get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        values = rp.allowable_values(action, "ResetType")
        if values is None and action.get("@Redfish.ActionInfo"):
            try:
                info = self.client.get(action["@Redfish.ActionInfo"])
                values = rp.reset_types_from_action_info(info)
            except RedfishError as exc:
                if isinstance(exc, FATAL):
                    raise
        return values or list(DEFAULT_RESET_TYPES)

    def _reset_target(self) -> str:
        action = (self.system().get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        target = action.get("target")
        if not target:
            raise BMCUnsupported("the system offers no ComputerSystem.Reset action",
                                 bmc=self.name, path=self.system_path())
        return str(target)

    def _reset(self, reset_type: str) -> None:
        log.info("%s: ComputerSystem.Reset %s", self.name, reset_type)
        self.client.post(self._reset_target(), {"ResetType": reset_type})

    def _pick(self, action: PowerAction) -> str | None:
        allowed = self.reset_types()
        return next((rt for rt in RESET_CHOICES[action] if rt in allowed), None)

    def power(self, action: PowerAction) -> None:
        """Perform a power action, falling back where a ResetType is not allowed."""
        state = self.power_state()
        if action == PowerAction.ON:
            if state in (PowerState.ON, PowerState.POWERING_ON):
                return
            self._reset(self._require(action))
        elif action == PowerAction.OFF:
            if state in (PowerState.OFF, PowerState.POWERING_OFF):
                return
            self._reset(self._require(action))
        elif action == PowerAction.SHUTDOWN:
            if state in (PowerState.OFF, PowerState.POWERING_OFF):
                return
            graceful = self._pick(PowerAction.SHUTDOWN)
            if graceful:
                self._reset(graceful)
                try:
                    self.wait_power(PowerState.OFF, self.graceful_timeout_s)
                    return
                except BMCStateTimeout:
                    log.warning("%s: graceful shutdown timed out; forcing off", self.name)
            self._reset(self._require(PowerAction.OFF))
        elif action in (PowerAction.RESTART, PowerAction.CYCLE):
            if state in (PowerState.OFF, PowerState.POWERING_OFF):
                self.power(PowerAction.ON)
                return
            chosen = self._pick(action)
            if chosen:
                self._reset(chosen)
                return
            # Neither restart nor cycle offered: do it by hand.
            self._reset(self._require(PowerAction.OFF))
            self.wait_power(PowerState.OFF, self.graceful_timeout_s)
            self._reset(self._require(PowerAction.ON))

    def _require(self, action: PowerAction) -> str:
        chosen = self._pick(action)
        if chosen is None:
            raise BMCUnsupported(
                f"no ResetType for power {action.value}: BMC allows {self.reset_types()}",
                bmc=self.name,
                path=self.system_path(),
            )
        return chosen

    def wait_power(self, state: PowerState, timeout_s: float) -> None:
        """Poll until the host reports ``state``; BMCStateTimeout after ``timeout_s``."""
        deadline = self._clock() + timeout_s
        last: PowerState | None = None
        while True:
            last = self.power_state()
            if last == state:
                return
            if self._clock() >= deadline:
                raise BMCStateTimeout(
                    f"host did not reach power state {state.value} within {timeout_s:g}s "
                    f"(still {last.value})",
                    bmc=self.name,
                    path=self.system_path(),
                )
            self._sleep(self.poll_interval_s)

    # -- boot ---------------------------------------------------------------------------

    def allowed_boot_targets(self) -> list[str] | None:
        """BootSourceOverrideTarget@Redfish.AllowableValues, or None if the BMC does not say."""
        return rp.allowable_values(self.system().get("Boot") or {}, "BootSourceOverrideTarget")

    def boot_mode_for(self, target: BootTarget, current: str | None) -> str | None:
        """The BootSourceOverrideMode to send (None: leave as is); HTTP boot needs UEFI."""
        if target == BootTarget.HTTP and current and current != "UEFI":
            return "UEFI"
        return None

    def override_enabled(self, persistent: bool) -> str:
        """The BootSourceOverrideEnabled value for a one-time or persistent override."""
        return "Continuous" if persistent else "Once"

    def prepare_boot(self, target: BootTarget) -> None:
        """Vendor hook run before the override (Dell enables network boot on the right port)."""

    def set_boot(self, target: BootTarget, *, persistent: bool = False) -> None:
        """Set a one-time (or persistent) boot override and verify it by reading it back."""
        system = self.system(refresh=True)
        boot = system.get("Boot") or {}
        allowed = self.allowed_boot_targets()
        if allowed is not None and target.value not in allowed:
            raise BMCUnsupported(
                f"boot target {target.value} is not offered; BMC allows {allowed}",
                bmc=self.name,
                path=self.system_path(),
                hint="choose another boot target, or switch the host to UEFI mode for UefiHttp",
            )
        self.prepare_boot(target)
        body = self.boot_override(target, self.override_enabled(persistent), boot)
        self.client.patch(self.system_path(), {"Boot": body}, etag=system.get("@odata.etag"))
        self.verify_boot(body)

    def boot_override(self, target: BootTarget, enabled: str, boot: dict[str, Any]
                      ) -> dict[str, Any]:
        """The ``Boot`` properties to PATCH (vendors may aim at one port, HPE does)."""
        body: dict[str, Any] = {
            "BootSourceOverrideTarget": target.value,
            "BootSourceOverrideEnabled": enabled,
        }
        mode = self.boot_mode_for(target, boot.get("BootSourceOverrideMode"))
        if mode:
            body["BootSourceOverrideMode"] = mode
        return body

    def verify_boot(self, body: dict[str, Any]) -> None:
        """Read the override back; a 2xx proves nothing on many BMCs."""
        boot = self.system(refresh=True).get("Boot") or {}
        problems = []
        for key, wanted in body.items():
            got = boot.get(key)
            if key == "BootSourceOverrideEnabled" and wanted == "Once" and got == "Continuous":
                # Stronger than asked (sushy-emulator, some BMCs): boots the target every time.
                self.warnings.append("BMC made the one-time boot override persistent")
            elif key == "BootSourceOverrideMode" and got is None:
                continue  # some BMCs do not report the mode at all
            elif got != wanted:
                problems.append(f"{key} is {got!r}, not {wanted!r}")
        if problems:
            raise BMCVerifyFailed(
                "boot override did not take effect: " + "; ".join(problems),
                bmc=self.name,
                path=self.system_path(),
                hint="check the BMC's pending BIOS jobs or a BIOS lock, then retry",
            )

    # -- virtual media ------------------------------------------------------------------

    def _media_collections(self) -> Iterator[str]:
        link = rp.odata_id(self.system().get("VirtualMedia"))
        if link:
            yield link
        for manager in self._manager_paths():  # iLO, XCC and iDRAC keep it under the Manager
            mlink = rp.odata_id(self.client.get(manager).get("VirtualMedia"))
            if mlink and mlink != link:
                yield mlink

    def _virtual_media(self) -> tuple[str, dict[str, Any]]:
        for collection in self._media_collections():
            try:
                members = self.client.members(collection)
            except BMCNotFound:
                continue
            for media in members:
                types = [str(t).upper() for t in media.get("MediaTypes") or []]
                if not types or "CD" in types or "DVD" in types:
                    return str(media.get("@odata.id")), media
        raise BMCUnsupported("no virtual CD/DVD drive found", bmc=self.name,
                             path=self.system_path())

    def insert_media(self, image_url: str) -> None:
        """Insert a CD/DVD image (ejecting another one first) and verify it is inserted."""
        path, media = self._virtual_media()
        if media.get("Inserted") and media.get("Image") == image_url:
            return
        if media.get("Inserted") or media.get("Image"):
            self._eject(path, media)
        actions = media.get("Actions") or {}
        insert = (actions.get("#VirtualMedia.InsertMedia") or {}).get("target")
        if insert:
            self.client.post(insert, {"Image": image_url, "Inserted": True,
                                      "WriteProtected": True})
        else:
            self.client.patch(path, {"Image": image_url, "Inserted": True},
                              etag=media.get("@odata.etag"))
        after = self.client.get(path)
        if after.get("Image") != image_url or after.get("Inserted") is False:
            raise BMCVerifyFailed(
                f"virtual media shows Image={after.get('Image')!r} "
                f"Inserted={after.get('Inserted')!r} after inserting {image_url}",
                bmc=self.name,
                path=path,
                hint="check that the BMC can reach the image URL",
            )

    def eject_media(self) -> None:
        """Eject whatever virtual CD/DVD is inserted."""
        path, media = self._virtual_media()
        if not media.get("Inserted") and not media.get("Image"):
            return
        self._eject(path, media)
        after = self.client.get(path)
        if after.get("Inserted"):
            raise BMCVerifyFailed("virtual media is still inserted after eject",
                                  bmc=self.name, path=path)

    def _eject(self, path: str, media: dict[str, Any]) -> None:
        actions = media.get("Actions") or {}
        eject = (actions.get("#VirtualMedia.EjectMedia") or {}).get("target")
        if eject:
            self.client.post(eject, {})
        else:
            self.client.patch(path, {"Image": None, "Inserted": False},
                              etag=media.get("@odata.etag"))

    # -- clock --------------------------------------------------------------------------

    def set_clock(self, when: datetime | None = None, *, tolerance_s: float = 5.0) -> float:
        """Set the BMC clock to ``when`` (default: now, UTC) and verify it by reading back.

        Returns the BMC clock minus local clock afterwards. BMCs that keep time only by NTP
        (iDRAC) refuse the PATCH: that error is raised as is.
        """
        managers = self._manager_paths()
        if not managers:
            raise BMCUnsupported("the BMC has no Manager to set the clock of", bmc=self.name,
                                 path=self.system_path())
        path = managers[0]
        target = (when or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
        sent_at = datetime.now(UTC)
        self.client.patch(path, {"DateTime": target.isoformat(), "DateTimeLocalOffset": "+00:00"})
        before = datetime.now(UTC)
        got = rp.parse_datetime(self.client.get(path).get("DateTime"))
        after = datetime.now(UTC)
        expected = target + (after - sent_at)
        if got is None or abs((got - expected).total_seconds()) > tolerance_s + 1:
            raise BMCVerifyFailed(
                f"BMC clock reads {got.isoformat() if got else 'nothing'} after setting it to "
                f"{target.isoformat()}",
                bmc=self.name,
                path=path,
                hint="point the BMC at the site's NTP servers (settings.ntp_servers) instead",
            )
        return rp.clock_skew_s(got, before, after) or 0.0

    # -- discovery ----------------------------------------------------------------------

    def _manager_paths(self) -> list[str]:
        links = self.system().get("Links") or {}
        managed_by = rp.link_list(links.get("ManagedBy"))
        if managed_by:
            return managed_by
        collection = rp.odata_id(self.client.root.get("Managers"))
        if not collection:
            return []
        return rp.link_list(self.client.get(collection).get("Members"))

    def _chassis_paths(self) -> list[str]:
        links = self.system().get("Links") or {}
        chassis = rp.link_list(links.get("Chassis"))
        if chassis:
            return chassis
        collection = rp.odata_id(self.client.root.get("Chassis"))
        if not collection:
            return []
        return rp.link_list(self.client.get(collection).get("Members"))

    def _optional(self, what: str, func: Callable[[], Any], default: Any) -> Any:
        """Run a read of an optional resource; a failure is a warning naming it, not a failed host."""
        try:
            return func()
        except FATAL:
            raise
        except RedfishError as exc:
            self.warnings.append(f"{what}: {exc}")
            return default

    def _read(self, path: str, what: str) -> dict[str, Any] | None:
        """GET an optional resource; a failure is a warning naming its path."""
        result: dict[str, Any] | None = self._optional(
            f"{what} {path} not read", partial(self.client.get, path), None)
        return result

    def _each_member(self, collection: str, what: str) -> list[dict[str, Any]]:
        """The members of a collection; one that fails to read is a warning, the others stay."""
        try:
            return self.client.members(collection)
        except FATAL:
            raise
        except RedfishError:
            pass  # a member (or the expanded read) failed: read them one by one
        body = self._read(collection, f"{what} collection")
        out: list[dict[str, Any]] = []
        for link in rp.link_list((body or {}).get("Members")):
            member = self._read(link, what)
            if member is not None:
                out.append(member)
        return out

    def host_chassis(self) -> list[tuple[str, dict[str, Any]]]:
        """The System's chassis, then every other chassis that holds its parts.

        GB200 and BlueField BMCs link the System to a BMC board chassis only; the NICs sit on
        IO boards, risers and the card chassis, which name the System in Links.ComputerSystems
        (or name no system at all). Chassis that belong to another System (a GPU baseboard)
        are left out.
        """
        if self._host_chassis is not None:
            return self._host_chassis
        me = self.system_path().rstrip("/")
        linked = rp.link_list(rp.obj(self.system().get("Links")).get("Chassis"))
        found: dict[str, dict[str, Any]] = {}
        collection = rp.odata_id(self.client.root.get("Chassis"))
        if collection:  # one request where the BMC offers $expand
            for chassis in self._each_member(collection, "chassis"):
                found[str(chassis.get("@odata.id") or "").rstrip("/")] = chassis
        out: list[tuple[str, dict[str, Any]]] = []
        for path in linked:
            read = found.pop(path.rstrip("/"), None) or self._read(path, "chassis")
            if read is not None:
                out.append((path, read))
        for path, chassis in found.items():
            systems = [s.rstrip("/") for s in
                       rp.link_list(rp.obj(chassis.get("Links")).get("ComputerSystems"))]
            if me in systems or not systems:
                out.append((path, chassis))
        self._host_chassis = out
        return out

    def _top_chassis(self) -> dict[str, Any] | None:
        """The enclosure of the host: a chassis naming the System, contained by nothing, of an
        enclosing ChassisType (a GB200 tray's ``Shelf``, a DPU's ``Card``), not a component."""
        me = self.system_path().rstrip("/")
        for _path, chassis in self.host_chassis():
            links = rp.obj(chassis.get("Links"))
            systems = [s.rstrip("/") for s in rp.link_list(links.get("ComputerSystems"))]
            if (me in systems and not rp.odata_id(links.get("ContainedBy"))
                    and str(chassis.get("ChassisType") or "") in ENCLOSURE_TYPES):
                return chassis
        return None

    def read_nics(self) -> list[NicPort]:
        """Every Ethernet port: EthernetInterfaces, NetworkAdapters of every chassis of the host
        and the firmware's network BootOptions, merged per MAC with the facts each gives."""
        if self._nics is not None:
            return self._nics
        system = self.system()
        primary: list[NicPort] = []
        link = rp.odata_id(system.get("EthernetInterfaces"))
        if link:
            members = self._each_member(link, "EthernetInterface")
            primary = [p for p in (rp.parse_ethernet_interface(m) for m in members) if p]
        secondary = self._optional("NetworkAdapters", self._adapter_ports, [])
        ports = rp.unique_ids(rp.merge_nics(primary, secondary))
        ports = self._with_boot_options(ports)
        ports = self.annotate_ports(ports)
        ports = [rp.location_from_id(p) for p in ports]
        ib_macs = {str(p.get("mac")) for p in self._ib_ports if p.get("mac")}
        self._nics = [
            replace(p, excluded="an InfiniBand function of a VPI adapter")
            if p.mac in ib_macs and not p.excluded else p
            for p in ports
        ]
        return self._nics

    def annotate_ports(self, ports: list[NicPort]) -> list[NicPort]:
        """Vendor hook: add facts only an OEM resource gives (HPE BaseNetworkAdapters...)."""
        return ports

    def boot_options(self) -> list[dict[str, Any]]:
        """The System's BootOptions (UEFI firmware's own boot entries), in BootOrder."""
        if self._boot_options is not None:
            return self._boot_options
        boot = rp.obj(self.system().get("Boot"))
        link = rp.odata_id(boot.get("BootOptions"))
        options = self._each_member(link, "BootOption") if link else []
        order = [str(o) for o in rp.items(boot.get("BootOrder"))]
        rank = {ref: i for i, ref in enumerate(order)}
        options.sort(key=lambda o: rank.get(str(o.get("BootOptionReference") or o.get("Id")),
                                            len(rank)))
        self._boot_options = options
        return options

    def _with_boot_options(self, ports: list[NicPort]) -> list[NicPort]:
        """Mark ports the firmware can network-boot from; with no other source, the BootOptions'
        MACs are the ports (GB200 lists host NICs nowhere else)."""
        entries: dict[str, list[str]] = {}
        usb: set[str] = set()
        first: dict[str, dict[str, Any]] = {}
        for option in self.boot_options():
            found = rp.boot_option_entry(option)
            if found is None:
                continue
            mac, label, over_usb = found
            entries.setdefault(mac, []).append(label)
            first.setdefault(mac, option)
            if over_usb:
                usb.add(mac)
        out = [replace(p, boot_options=(*entries[p.mac], *p.boot_options)) if p.mac in entries
               else p for p in ports]
        if not out:
            for mac, labels in entries.items():
                option = first[mac]
                out.append(NicPort(
                    id=mac.replace(":", "").upper(),  # the firmware names the port by MAC only
                    mac=mac,
                    name=_text(option.get("DisplayName")),
                    source=str(option.get("@odata.id") or ""),
                    boot_options=tuple(labels),
                ))
        return [
            replace(p, location=LOCATION_USB, location_from="BootOption UEFI path USB(...)",
                    onboard=False,
                    excluded="a USB network device (the BMC's host interface or a dongle)")
            if p.mac in usb and p.location is None else p
            for p in out
        ]

    def _pcie_slots(self, chassis: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """PCIe device URI -> the PCIeSlots entry holding it."""
        link = rp.odata_id(chassis.get("PCIeSlots"))
        body = self._read(link, "PCIeSlots") if link else None
        out: dict[str, dict[str, Any]] = {}
        for slot in rp.items((body or {}).get("Slots")):
            if isinstance(slot, dict):
                for device in rp.link_list(rp.obj(slot.get("Links")).get("PCIeDevice")):
                    out[device.rstrip("/")] = slot
        return out

    def _adapter_location(self, adapter: dict[str, Any], slots: dict[str, dict[str, Any]],
                          on_card: str | None, functions: list[dict[str, Any]]
                          ) -> tuple[str, str, str | None] | None:
        """Where an adapter sits, from the most specific Redfish statement available."""
        where = str(adapter.get("@odata.id") or adapter.get("Id") or "adapter")
        found = rp.part_location(adapter, where)
        devices: list[str] = []
        for index, controller in enumerate(rp.items(adapter.get("Controllers"))):
            if not isinstance(controller, dict):
                continue
            found = found or rp.part_location(controller, f"{where} Controllers[{index}]")
            devices += rp.link_list(rp.obj(controller.get("Links")).get("PCIeDevices"))
        if not devices:  # the functions' PCIeFunction links name the device in their URI
            devices = list(dict.fromkeys(
                d for d in (rp.pcie_device_of(f) for f in functions) if d))
        named = rp.location_from_name(_text(adapter.get("Model")), _text(adapter.get("Name")))
        for device_path in devices:
            device = self._read(device_path, "PCIeDevice") or {}
            by_device = rp.device_location(device)
            slot = slots.get(device_path.rstrip("/"))
            by_slot = rp.slot_location(slot, f"{where} PCIeSlots entry") if slot else None
            for candidate in (by_device, by_slot):
                if candidate and (found is None or (found[0] == LOCATION_SLOT
                                                    and candidate[0] != LOCATION_SLOT)):
                    found = candidate
            if found is None and slot is not None:
                found = self.unlabelled_slot_location(slot, device_path)
        if named in ONBOARD_LOCATIONS and (found is None or found[0] == LOCATION_SLOT):
            label = found[2] if found else None
            found = (named, f"{where} Model/Name {adapter.get('Model') or adapter.get('Name')!r}",
                     label)
        if found is None and on_card:
            found = (LOCATION_EMBEDDED, on_card, None)
        return found

    def unlabelled_slot_location(self, slot: dict[str, Any], device: str
                                 ) -> tuple[str, str, str | None] | None:
        """Vendor hook: what a PCIeSlots entry with no location or type means."""
        return None

    def _adapter_ports(self) -> list[NicPort]:
        out: list[NicPort] = []
        self._ib_ports = []
        top = self._top_chassis()
        on_card = None
        if top is not None and str(top.get("ChassisType") or "") == "Card":
            # The host is itself a card (a DPU): every port it has is on its board.
            on_card = f"host chassis {top.get('@odata.id')} ChassisType Card"
        for _chassis_path, chassis in self.host_chassis():
            adapters_link = rp.odata_id(chassis.get("NetworkAdapters"))
            if not adapters_link:
                continue
            slots = self._pcie_slots(chassis)
            for adapter in self._each_member(adapters_link, "NetworkAdapter"):
                out.extend(self._read_adapter(adapter, slots, on_card))
        return out

    def _read_adapter(self, adapter: dict[str, Any], slots: dict[str, dict[str, Any]],
                      on_card: str | None) -> list[NicPort]:
        adapter_id = str(adapter.get("Id") or "")
        functions_link = rp.odata_id(adapter.get("NetworkDeviceFunctions"))
        ports: dict[str, dict[str, Any]] = {}
        # Both collections: a function may name a member of either (XCC fills both).
        for key in ("Ports", "NetworkPorts"):
            ports_link = rp.odata_id(adapter.get(key))
            if ports_link:
                for member in self._each_member(ports_link, "adapter port"):
                    ports[str(member.get("@odata.id") or "").rstrip("/")] = member
        if not functions_link:
            return []
        functions = self._each_member(functions_link, "NetworkDeviceFunction")
        location = self._adapter_location(adapter, slots, on_card, functions)
        vendor = " ".join(t for t in (_text(adapter.get("Manufacturer")),
                                      _text(adapter.get("Model"))) if t) or None
        out: list[NicPort] = []
        for function in functions:
            port = next((ports[link] for link in rp.function_port_links(function)
                         if link in ports), None)
            if rp.is_infiniband(function, port, adapter_id):
                eth = rp.obj(function.get("Ethernet"))
                self._ib_ports.append({
                    "id": function.get("Id"),
                    "adapter": adapter_id,
                    "link": (port or {}).get("LinkStatus"),
                    "speed_mbps": (port or {}).get("CurrentLinkSpeedMbps"),
                    "mac": rp.norm_mac(eth.get("PermanentMACAddress"))
                    or rp.norm_mac(eth.get("MACAddress")),
                })
                continue
            nic = rp.parse_device_function(function, port, adapter_id)
            if nic:
                out.append(rp.with_location(replace(nic, vendor=vendor), location))
        return out

    def read_drives(self) -> list[Any]:
        """Drives from Storage (or SimpleStorage on older BMCs); an unreadable one warns."""
        system = self.system()
        drives = []
        storage_link = rp.odata_id(system.get("Storage"))
        if storage_link:
            for storage in self._each_member(storage_link, "Storage"):
                for drive_link in rp.link_list(storage.get("Drives")):
                    drive = self._read(drive_link, "drive")
                    if drive is not None:
                        drives.append(rp.parse_drive(drive))
        if not drives:
            simple_link = rp.odata_id(system.get("SimpleStorage"))
            if simple_link:
                for simple in self._each_member(simple_link, "SimpleStorage"):
                    drives.extend(rp.parse_simple_storage(simple))
        return drives

    def read_firmware(self) -> dict[str, str]:
        """Name -> version of every FirmwareInventory member."""
        update_link = rp.odata_id(self.client.root.get("UpdateService"))
        if not update_link:
            return {}
        update = self.client.get(update_link)
        inventory = rp.odata_id(update.get("FirmwareInventory"))
        if not inventory:
            return {}
        out: dict[str, str] = {}
        for item in self._each_member(inventory, "firmware inventory item"):
            parsed = rp.parse_firmware(item)
            if parsed:
                out[parsed[0]] = parsed[1]
        return out

    def discover(self) -> HostFacts:
        """Read system, NICs, drives, manager clock and firmware (optional parts warn)."""
        # Opening the BMC has just read the System; a second read would cost a round trip.
        system = self.system(max_age_s=5.0)
        self._nics = None  # link states change: read the ports again
        self._boot_options = None
        identity = self.identity()
        facts = HostFacts(
            manufacturer=identity["manufacturer"][0],
            model=identity["model"][0],
            serial=identity["serial"][0],
            uuid=_text(system.get("UUID")),
            power_state=_text(system.get("PowerState")),
            bios_version=_text(system.get("BiosVersion")),
            boot_mode=_text((system.get("Boot") or {}).get("BootSourceOverrideMode")),
        )
        for manager_path in self._optional("Managers", self._manager_paths, [])[:1]:
            before = datetime.now(UTC)
            manager: dict[str, Any] = self._optional(
                "Manager", partial(self.client.get, manager_path), {}
            )
            after = datetime.now(UTC)
            facts.bmc_firmware = _text(manager.get("FirmwareVersion"))
            facts.bmc_datetime = rp.parse_datetime(manager.get("DateTime"))
            facts.clock_skew_s = rp.clock_skew_s(facts.bmc_datetime, before, after)
        facts.nics = self.read_nics()
        facts.drives = self._optional("Storage", self.read_drives, [])
        facts.firmware = self._optional("FirmwareInventory", self.read_firmware, {})
        if self.nic_rule is not None or self.provisioning_mac:
            try:
                facts.provisioning_mac = self.provisioning_port().mac
            except ProvisioningNicError as exc:  # the caller reports it per host
                facts.extra["provisioning_nic_error"] = str(exc)  # with the rule to write
                if exc.hint:
                    facts.extra["provisioning_nic_hint"] = exc.hint
            facts.extra["nic_explain"] = self.nic_explanation()
        facts.extra.update(
            {
                "vendor": self.vendor,
                "system_path": self.system_path(),
                "auth": self.client.auth_method,
                "allowed_boot_targets": self.allowed_boot_targets(),
                "reset_types": self._optional("ResetTypes", self.reset_types, []),
                "infiniband_ports": list(self._ib_ports),
                "identity_from": {k: v[1] for k, v in identity.items() if v[1]},
                "warnings": [*self.client.warnings, *self.warnings],
                "requests": self.client.requests_made,
            }
        )
        return facts

    def identity(self) -> dict[str, tuple[str | None, str | None]]:
        """Manufacturer, model and serial, each with the resource it came from.

        The System's own values first; a GB200 tray's System has none, so the enclosing chassis
        (the one naming the System, contained by nothing), then a GPU baseboard System
        (NVIDIA ``HGX_Baseboard_*``) are asked.
        """
        keys = {"manufacturer": "Manufacturer", "model": "Model", "serial": "SerialNumber"}
        sources: list[tuple[str, dict[str, Any]]] = [(self.system_path(), self.system())]
        out: dict[str, tuple[str | None, str | None]] = {k: (None, None) for k in keys}

        def fill() -> bool:
            for key, prop in keys.items():
                if out[key][0] is None:
                    for path, resource in sources:
                        value = _identity_text(resource.get(prop))
                        if value:
                            out[key] = (value, path)
                            break
            return all(v[0] for v in out.values())

        if fill():
            return out
        top = self._optional("chassis", self._top_chassis, None)
        if top is not None:
            sources.append((str(top.get("@odata.id") or "chassis"), top))
        for path in self._other_systems():
            other = self._read(path, "System")
            if other is not None:
                sources.append((path, other))
        fill()
        return out

    def _other_systems(self) -> list[str]:
        collection = rp.odata_id(self.client.root.get("Systems")) or "/redfish/v1/Systems"
        body = self._read(collection, "Systems") or {}
        me = self.system_path().rstrip("/")
        return [m for m in rp.link_list(body.get("Members")) if m.rstrip("/") != me]

    def provisioning_port(self) -> NicPort:
        """The port that network-boots: the host's pinned MAC, else the profile's rule."""
        nics = self.read_nics()
        if self.provisioning_mac:
            return pinned_port(nics, self.provisioning_mac)
        if self.nic_rule is None:
            raise BMCUnsupported("no provisioning NIC rule for this host", bmc=self.name)
        choice = explain_selection(nics, self.nic_rule)
        if choice.port is None:
            raise choice.error or ProvisioningNicError("no port matches", candidates=nics)
        self.warnings.extend(w for w in choice.warnings if w not in self.warnings)
        return choice.port

    def nic_explanation(self) -> dict[str, Any]:
        """Each port's facts and why the host's NIC rule chose it or not (for --explain)."""
        nics = self.read_nics()
        if self.provisioning_mac:
            return explain_pinned(nics, self.provisioning_mac)
        if self.nic_rule is None:
            return {"rule": None, "chosen": None, "warnings": [], "error": None,
                    "hint": "give the host's profile a provisioning_nic rule",
                    "ports": [{**port_facts(p), "chosen": False, "why_not": []} for p in nics]}
        return choice_to_dict(explain_selection(nics, self.nic_rule))

    def close(self) -> None:
        """Log out of the BMC."""
        self.client.close()


def _identity_text(value: Any) -> str | None:
    """An identity value, treating the placeholders BMCs fill unknown fields with as absent."""
    text = _text(value)
    if text is None or text.upper() in {"N/A", "NA", "NONE", "NULL", "UNKNOWN", "0",
                                        "TO BE FILLED BY O.E.M."}:
        return None
    return text


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None

