"""The Redfish implementation of the BMC protocol: RedfishBMC and its capabilities (bios.py,
firmware.py); vendors override its declared hooks."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar
from urllib.parse import urlsplit

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import (
    BootPortChooser,
    BootTarget,
    HostFacts,
    NicPort,
    PowerAction,
    PowerState,
)
from provisioner.bmc.firmware_methods import GENERIC, FirmwareQuirks
from provisioner.bmc.redfish_bmc.bios import RedfishBios
from provisioner.bmc.redfish_bmc.firmware import RedfishFirmwareUpdate
from provisioner.bmc.redfish_inventory import FATAL, RedfishInventory
from provisioner.redfish.client import RedfishClient
from provisioner.redfish.errors import (
    BMCBadResponse,
    BMCNotFound,
    BMCStateTimeout,
    BMCUnsupported,
    BMCVerifyFailed,
    RedfishError,
)
from provisioner.wording import did_you_mean

log = logging.getLogger(__name__)

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


class RedfishBMC(RedfishInventory):
    """A host's BMC spoken to over Redfish, following the DMTF schema with no vendor quirks."""

    vendor: ClassVar[str] = "generic"
    # What its UpdateService does beyond the DMTF schema (firmware_methods.FirmwareQuirks).
    firmware_quirks: ClassVar[FirmwareQuirks] = GENERIC
    # Whether BIOS changes apply only behind a vendor job (iDRAC): stage_bios_job then
    # stages them and wait_bios_job waits for that job.
    bios_needs_job: ClassVar[bool] = False

    def __init__(
        self,
        client: RedfishClient,
        *,
        boot_port: BootPortChooser | None = None,
        system_id: str | None = None,
        poll_interval_s: float = 2.0,
        graceful_timeout_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.boot_port = boot_port
        self.system_id = system_id  # the inventory's bmc.system: which node of a shared BMC
        self.poll_interval_s = poll_interval_s
        self.graceful_timeout_s = graceful_timeout_s
        self._sleep = sleep
        self._clock = clock
        self._system_path: str | None = None
        self._system_members: list[str] = []
        self._host_systems: list[str] | None = None
        self._system: dict[str, Any] | None = None
        self._system_at = 0.0
        self._nics: list[NicPort] | None = None
        self._ib_ports: list[dict[str, Any]] = []
        self._host_chassis: list[tuple[str, dict[str, Any]]] | None = None
        self._boot_options: list[dict[str, Any]] | None = None
        self._read_lock = threading.RLock()
        self._boot_lock = threading.Lock()
        self.warnings: list[str] = []
        self.bios = RedfishBios(self)
        self.firmware = RedfishFirmwareUpdate(self)

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
            collection = self.client.service("Systems")
            if not collection and root.get("Chassis"):  # a chassis or switch controller
                raise BMCNotFound(
                    "the BMC offers no ComputerSystem (no Systems in its service root, none at "
                    "/redfish/v1/Systems): it manages a chassis or switch, not a host",
                    bmc=self.name, path="/redfish/v1/",
                    hint="point the host's bmc.address at the host's own BMC")
            collection = collection or "/redfish/v1/Systems"
            members = self._direct_members(collection, [
                self.client.own_path(m)
                for m in rp.link_list(self.client.get(collection).get("Members"))])
            if not members:
                raise BMCNotFound("the BMC lists no ComputerSystem", bmc=self.name,
                                  path=collection)
            self._system_members = members
            self._system_path = self.choose_system(members)
        return self._system_path

    def _direct_members(self, collection: str, members: list[str]) -> list[str]:
        """The members of a top-level collection (Systems, Managers) that are its own
        children. The DGX H100 BMC also lists ``Systems/HGX_Baseboard_0/LogServices/FDR``
        among its Systems (and, NVIDIA records, strays among its Managers)."""
        def folder(link: str) -> str:
            return urlsplit(link).path.rstrip("/").casefold()

        parent = folder(collection)
        direct = [m for m in members if folder(m).rpartition("/")[0] == parent]
        if not direct:
            return members  # paths this BMC writes its own way: nothing to tell them by
        if len(direct) < len(members):
            log.info("%s: ignoring %d member(s) of %s that are not its own: %s", self.name,
                     len(members) - len(direct), collection,
                     ", ".join(m for m in members if m not in direct)[:300])
        return direct

    def is_host_system(self, path: str) -> bool:
        """Whether a System can be a host: not a GPU baseboard (NVIDIA ``HGX_*``)."""
        return not path.rstrip("/").rsplit("/", 1)[-1].startswith("HGX_")

    def host_systems(self) -> list[str]:
        """Every System of the BMC that is a host: not a GPU baseboard, nor a DPU/SmartNIC's
        own System (``SystemType: DPU``), which is read to tell (only when there are several)."""
        if self._host_systems is None:
            self.system_path()
            hosts = [m for m in self._system_members if self.is_host_system(m)]
            if len(hosts) > 1:
                me = self.system_path().rstrip("/")
                others = [m for m in hosts if m.rstrip("/") != me]
                bodies = dict(zip(others, self._read_many(others, "System"), strict=True))
                hosts = [m for m in hosts if m.rstrip("/") == me
                         or str((bodies.get(m) or {}).get("SystemType") or "") != "DPU"]
            self._host_systems = hosts
        return self._host_systems

    def choose_system(self, members: list[str]) -> str:
        """Which of several Systems is the host: the one ``system_id`` names, else the first
        that is not a GPU baseboard."""
        if self.system_id is not None:
            return self._named_system(members, self.system_id)
        hosts = [m for m in members if self.is_host_system(m)]
        return (hosts or members)[0]

    def _named_system(self, members: list[str], wanted: str) -> str:
        ids = {m.rstrip("/").rsplit("/", 1)[-1]: m for m in members}
        if wanted in ids:
            return ids[wanted]
        folded = [m for i, m in ids.items() if i.casefold() == wanted.casefold()]
        if len(folded) == 1:
            return folded[0]
        close = did_you_mean(wanted, ids)
        raise BMCNotFound(
            f"the BMC has no ComputerSystem {wanted!r} (the host's bmc.system); it lists "
            f"{', '.join(sorted(ids))}", bmc=self.name, path="/redfish/v1/Systems",
            hint=(close + " " if close else "") + "set bmc.system to the Id of this host's System")

    def _several_hosts_warning(self) -> str | None:
        """A BMC serving several nodes (a blade's node controller) lists one System each."""
        if self.system_id is not None:
            return None  # the inventory chose the node
        hosts = self.host_systems()
        if len(hosts) < 2:
            return None
        ids = ", ".join(m.rstrip("/").rsplit("/", 1)[-1] for m in hosts)
        return (f"the BMC serves {len(hosts)} host Systems ({ids}): facts, power and boot "
                f"apply to {self.system_path()} only, the first listed; set the host's "
                "bmc.system to choose")

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
        action = rp.action(self.system(), "#ComputerSystem.Reset")
        values = rp.allowable_values(action, "ResetType")
        info_link = action.get("@Redfish.ActionInfo")
        if values is None and isinstance(info_link, str) and info_link:
            try:
                info = self.client.get(info_link)
                values = rp.reset_types_from_action_info(info)
            except RedfishError as exc:
                if isinstance(exc, FATAL):
                    raise
        return values or list(DEFAULT_RESET_TYPES)

    def _reset_target(self) -> str:
        action = rp.action(self.system(), "#ComputerSystem.Reset")
        target = action.get("target")
        if not isinstance(target, str) or not target:
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
        return rp.allowable_values(rp.obj(self.system().get("Boot")), "BootSourceOverrideTarget")

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
        path, resource = self._boot_resource(system)
        boot = rp.obj(resource.get("Boot"))
        allowed = (rp.allowable_values(boot, "BootSourceOverrideTarget")
                   or self.allowed_boot_targets())
        if allowed is not None and target.value not in allowed:
            raise BMCUnsupported(
                f"boot target {target.value} is not offered; BMC allows {allowed}",
                bmc=self.name,
                path=path,
                hint="choose another boot target, or switch the host to UEFI mode for UefiHttp",
            )
        self.prepare_boot(target)
        body = self.boot_override(target, self.override_enabled(persistent), boot)
        etag = resource.get("@odata.etag")
        self.client.patch(path, {"Boot": body}, etag=etag if isinstance(etag, str) else None)
        self.verify_boot(body, path)

    def boot_settings_path(self, system: dict[str, Any]) -> str | None:
        """The resource the firmware takes the boot override from, if not the System itself
        (vendors whose BIOS reads it from the System's settings object say so)."""
        return None

    def _boot_resource(self, system: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Where the override is written and read back, and that resource as it is now."""
        path = self.boot_settings_path(system)
        if not path or path == self.system_path():
            return self.system_path(), system
        try:
            return path, self.client.get(path)
        except BMCNotFound:
            self.warnings.append(f"settings object {path} not found: boot override written "
                                 "to the System itself")
            return self.system_path(), system

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

    def verify_boot(self, body: dict[str, Any], path: str | None = None) -> None:
        """Read the override back from ``path`` (default: the System); a 2xx proves nothing
        on many BMCs."""
        path = path or self.system_path()
        current = (self.system(refresh=True) if path == self.system_path()
                   else self.client.get(path))
        boot = rp.obj(current.get("Boot"))
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
                path=path,
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
        insert = rp.action(media, "#VirtualMedia.InsertMedia").get("target")
        if isinstance(insert, str) and insert:
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
        eject = rp.action(media, "#VirtualMedia.EjectMedia").get("target")
        if isinstance(eject, str) and eject:
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
        """The System's Managers (``Links.ManagedBy``), else the BMC's, best first."""
        links = rp.obj(self.system().get("Links"))
        managed_by = rp.link_list(links.get("ManagedBy"))
        if managed_by:
            return managed_by
        collection = self.client.service("Managers")
        if not collection:
            return []
        members = self._direct_members(
            collection, rp.link_list(self.client.get(collection).get("Members")))
        if len(members) < 2:
            return members
        # Without ManagedBy the collection order says nothing: a blade lists its mezzanine
        # microcontrollers (AuxiliaryController, no clock) before the node BMC.
        me = self.system_path().rstrip("/")
        bodies = self._read_many(members, "Manager")

        def rank(item: tuple[str, dict[str, Any] | None]) -> int:
            body = item[1] or {}
            serves = {p.rstrip("/") for p in rp.link_list(
                rp.obj(body.get("Links")).get("ManagerForServers"))}
            if me in serves:
                return 0
            return 2 if body.get("ManagerType") == "AuxiliaryController" or not body else 1

        return [path for path, _ in sorted(zip(members, bodies, strict=True), key=rank)]

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
            uuid=rp.text(system.get("UUID")),
            power_state=rp.text(system.get("PowerState")),
            bios_version=rp.text(system.get("BiosVersion")),
            boot_mode=rp.text(rp.obj(system.get("Boot")).get("BootSourceOverrideMode")),
        )
        # Independent parts overlap on the BMC's few connections; the Manager goes first so
        # its clock is read without waiting for a connection.
        _, facts.nics, facts.drives, facts.firmware = self._together(
            partial(self._read_manager, facts),
            self.read_nics,
            partial(self._optional, "Storage", self.read_drives, []),
            partial(self._optional, "FirmwareInventory", self.read_firmware, {}),
        )
        several = self._several_hosts_warning()
        if several and several not in self.warnings:
            self.warnings.append(several)
        facts.extra.update(
            {
                "vendor": self.vendor,
                "system_path": self.system_path(),
                "auth": self.client.auth_method,
                "allowed_boot_targets": self.allowed_boot_targets(),
                "reset_types": self._optional("ResetTypes", self.reset_types, []),
                "infiniband_ports": list(self._ib_ports),
                "identity_from": {k: v[1] for k, v in identity.items() if v[1]},
                # parts are read in parallel: sorted, so the same BMC gives the same facts
                "warnings": [*self.client.warnings, *sorted(self.warnings)],
                "requests": self.client.requests_made,
            }
        )
        return facts

    def _read_manager(self, facts: HostFacts) -> None:
        """BMC firmware, date and clock skew from the first Manager (optional)."""
        for manager_path in self._optional("Managers", self._manager_paths, [])[:1]:
            before = datetime.now(UTC)
            manager: dict[str, Any] = self._optional(
                "Manager", partial(self.client.get, manager_path), {}
            )
            after = datetime.now(UTC)
            facts.bmc_firmware = rp.text(manager.get("FirmwareVersion"))
            facts.bmc_datetime = rp.parse_datetime(manager.get("DateTime"))
            facts.clock_skew_s = rp.clock_skew_s(facts.bmc_datetime, before, after)

    def provisioning_port(self) -> NicPort:
        """The port a network boot is aimed at: the caller's choice (``boot_port``) among the
        ports this BMC reports; its warnings join this BMC's."""
        if self.boot_port is None:
            raise BMCUnsupported("no provisioning NIC chosen for this host", bmc=self.name,
                                 hint="give the host's profile a provisioning_nic rule, or "
                                 "set provisioning_mac for this host in the site file")
        port, warnings = self.boot_port(self.read_nics())
        self.warnings.extend(w for w in warnings if w not in self.warnings)
        return port

    # -- vendor hooks of the BIOS capability -------------------------------------------------

    def stage_bios_job(self, settings: str, changes: dict[str, Any]) -> str | None:
        """Stage BIOS values behind the vendor's job (only where ``bios_needs_job``); returns
        the job to wait for after the reset."""
        raise BMCUnsupported("this BMC stages BIOS values without a job", bmc=self.name,
                             path=settings)

    def wait_bios_job(self, job: str) -> None:
        """Wait for a job :meth:`stage_bios_job` returned; nothing to wait for elsewhere."""

    def clear_bios_jobs(self, settings: str) -> list[str]:
        """Remove the vendor's queued jobs that would apply pending BIOS values (iDRAC's job
        queue); the ids removed. Nothing to remove where BIOS changes need no job."""
        return []

    def close(self) -> None:
        """Log out of the BMC."""
        self.client.close()


