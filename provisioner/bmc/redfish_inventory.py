"""What discovery reads through a BMC: chassis, NIC ports with their facts, drives, firmware,
identity. A mixin of RedfishBMC; vendors override its hooks (annotate_ports,
unlabelled_slot_location)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import (
    LOCATION_EMBEDDED,
    LOCATION_SLOT,
    LOCATION_USB,
    ONBOARD_LOCATIONS,
    NicPort,
)
from provisioner.redfish.client import MEMBER_FATAL, RedfishClient
from provisioner.redfish.errors import (
    RedfishError,
)

# Errors that mean the BMC itself is unusable (or out of time): never downgraded to a warning.
# The client's own list: its member reads raise these instead of returning them.
FATAL = MEMBER_FATAL

# Redfish ChassisType values of a whole machine (identity may come from one), not a part of it.
ENCLOSURE_TYPES = frozenset({
    "RackMount", "Rack", "Enclosure", "StandAlone", "Shelf", "Drawer", "Sled", "Blade",
    "Tower", "Desktop", "Expansion", "Pod", "Card", "Cartridge", "Other",
})


class RedfishInventory:
    """Optional reads that warn (naming the resource) instead of failing the host."""

    client: RedfishClient
    warnings: list[str]
    _nics: list[NicPort] | None
    _ib_ports: list[dict[str, Any]]
    _host_chassis: list[tuple[str, dict[str, Any]]] | None
    _system_members: list[str]  # the Systems collection as read when opening the BMC
    _host_systems: list[str] | None
    _boot_options: list[dict[str, Any]] | None
    # Reads several parts share are made once: one lock each, so the boot options are not
    # held up behind a slow chassis collection.
    _read_lock: threading.RLock  # the host's chassis
    _boot_lock: threading.Lock  # the boot options

    def system_path(self) -> str:
        """The host's ComputerSystem URI (RedfishBMC)."""
        raise NotImplementedError

    def system(self, *, refresh: bool = False, max_age_s: float | None = None) -> dict[str, Any]:
        """The host's ComputerSystem (RedfishBMC)."""
        raise NotImplementedError

    def is_host_system(self, path: str) -> bool:
        """Whether a System can be a host rather than a GPU baseboard (RedfishBMC)."""
        raise NotImplementedError

    def host_systems(self) -> list[str]:
        """The BMC's Systems that are hosts (RedfishBMC)."""
        raise NotImplementedError

    def _optional(self, what: str, func: Callable[[], Any], default: Any) -> Any:
        """Run a read of an optional resource; a failure is a warning naming it, not a failed host."""
        try:
            return func()
        except FATAL:
            raise
        except RedfishError as exc:
            self.warnings.append(f"{what}: {exc}")
            return default

    def _together(self, *jobs: Callable[[], Any]) -> list[Any]:
        """Run independent reads at once (on the BMC's few connections); results in order."""
        return self.client.map(_call, jobs)

    def _read(self, path: str, what: str) -> dict[str, Any] | None:
        """GET an optional resource; a failure is a warning naming its path."""
        result: dict[str, Any] | None = self._optional(
            f"{what} {path} not read", partial(self.client.get, path), None)
        return result

    def _read_many(self, paths: Sequence[str], what: str) -> list[dict[str, Any] | None]:
        """GET optional resources a few at a time; each failure is a warning naming its path."""
        out: list[dict[str, Any] | None] = []
        for path, got in zip(paths, self.client.get_each(paths), strict=True):
            if isinstance(got, RedfishError):  # get_each raises the FATAL ones
                self.warnings.append(f"{what} {path} not read: {got}")
                out.append(None)
            else:
                out.append(got)
        return out

    def _each_member(self, collection: str, what: str) -> list[dict[str, Any]]:
        """The members of a collection ($expand-ed where it works, else a few GETs at a time);
        one that fails to read is a warning naming it, the others stay."""
        try:
            read = self.client.read_members(collection)
        except FATAL:
            raise
        except RedfishError as exc:
            self.warnings.append(f"{what} collection {collection} not read: {exc}")
            return []
        for link, error in read.failed:
            self.warnings.append(f"{what} {link} not read: {error}")
        return read.bodies

    def host_chassis(self) -> list[tuple[str, dict[str, Any]]]:
        """The System's chassis, then every other chassis that holds its parts.

        GB200 and BlueField BMCs link the System to a BMC board chassis only; the NICs sit on
        IO boards, risers and the card chassis, which name the System in Links.ComputerSystems
        (or name no system at all). Chassis that belong to another System (a GPU baseboard)
        are left out, and so, on a BMC serving several host Systems (a two-node blade), is a
        chassis naming none whose Id is another node's System's (``Chassis/Node1``).
        """
        with self._read_lock:
            if self._host_chassis is None:
                self._host_chassis = self._read_host_chassis()
            return self._host_chassis

    def _read_host_chassis(self) -> list[tuple[str, dict[str, Any]]]:
        me = self.system_path().rstrip("/")
        linked = rp.link_list(rp.obj(self.system().get("Links")).get("Chassis"))
        found: dict[str, dict[str, Any]] = {}
        collection = self.client.service("Chassis")
        if collection:  # one request where the BMC offers $expand
            for chassis in self._each_member(collection, "chassis"):
                found[str(chassis.get("@odata.id") or "").rstrip("/")] = chassis
        out: list[tuple[str, dict[str, Any]]] = []
        missing = [p for p in linked if p.rstrip("/") not in found]
        more = dict(zip(missing, self._read_many(missing, "chassis"), strict=True))
        for path in linked:
            read = found.pop(path.rstrip("/"), None) or more.get(path)
            if read is not None:
                out.append((path, read))
        # Another node's chassis, known by its Id being that node's System's (Chassis/Node1).
        other_nodes = {h.rstrip("/").rsplit("/", 1)[-1] for h in self.host_systems()
                       if h.rstrip("/") != me}
        for path, chassis in found.items():
            systems = [s.rstrip("/") for s in
                       rp.link_list(rp.obj(chassis.get("Links")).get("ComputerSystems"))]
            if me in systems or (not systems and
                                 path.rstrip("/").rsplit("/", 1)[-1] not in other_nodes):
                out.append((path, chassis))
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
        link = rp.odata_id(system.get("EthernetInterfaces"))
        # Three independent reads, overlapped; boot options are kept for _with_boot_options.
        members, secondary, _options = self._together(
            partial(self._each_member, link, "EthernetInterface") if link else list,
            partial(self._optional, "NetworkAdapters", self._adapter_ports, []),
            self.boot_options,
        )
        primary = [p for p in (rp.parse_ethernet_interface(m) for m in members) if p]
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
        with self._boot_lock:
            if self._boot_options is None:
                self._boot_options = self._read_boot_options()
            return self._boot_options

    def _read_boot_options(self) -> list[dict[str, Any]]:
        boot = rp.obj(self.system().get("Boot"))
        link = rp.odata_id(boot.get("BootOptions"))
        options = self._each_member(link, "BootOption") if link else []
        order = [str(o) for o in rp.items(boot.get("BootOrder"))]
        rank = {ref: i for i, ref in enumerate(order)}
        options.sort(key=lambda o: rank.get(str(o.get("BootOptionReference") or o.get("Id")),
                                            len(rank)))
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
        # A USB NIC with a made-up (locally administered) MAC is the BMC's own Redfish host
        # interface (DSP0270), seen from the host: not one of the host's ports at all.
        host_interface = {mac for mac in usb if rp.locally_administered(mac)}
        out = [replace(p, boot_options=(*entries[p.mac], *p.boot_options)) if p.mac in entries
               else p for p in ports if p.mac not in host_interface]
        if not out:
            for mac, labels in entries.items():
                if mac in host_interface:
                    continue
                option = first[mac]
                out.append(NicPort(
                    id=mac.replace(":", "").upper(),  # the firmware names the port by MAC only
                    mac=mac,
                    name=rp.text(option.get("DisplayName")),
                    source=str(option.get("@odata.id") or ""),
                    boot_options=tuple(labels),
                ))
        return [
            replace(p, location=LOCATION_USB, location_from="BootOption UEFI path USB(...)",
                    onboard=False,
                    excluded="a USB network device (a dongle, or the BMC's host interface)")
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
                          on_card: str | None, functions: list[dict[str, Any]],
                          known: dict[str, dict[str, Any]] | None = None,
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
        named = rp.location_from_name(rp.text(adapter.get("Model")), rp.text(adapter.get("Name")))
        known = known or {}
        unknown = [d for d in devices if d.rstrip("/") not in known]
        read = dict(zip(unknown, self._read_many(unknown, "PCIeDevice"), strict=True))
        for device_path in devices:
            device = known.get(device_path.rstrip("/")) or read.get(device_path) or {}
            by_device = rp.device_location(device)
            slot = slots.get(device_path.rstrip("/"))
            by_slot = rp.slot_location(slot, f"{where} PCIeSlots entry") if slot else None
            for candidate in (by_device, by_slot):
                if candidate and (found is None or (found[0] == LOCATION_SLOT
                                                    and candidate[0] != LOCATION_SLOT)):
                    found = candidate
            if found is None and slots:
                found = self.unlabelled_slot_location(slot, device_path)
        if named in ONBOARD_LOCATIONS and (found is None or found[0] == LOCATION_SLOT):
            label = found[2] if found else None
            found = (named, f"{where} Model/Name {adapter.get('Model') or adapter.get('Name')!r}",
                     label)
        if found is None and on_card:
            found = (LOCATION_EMBEDDED, on_card, None)
        return found

    def unlabelled_slot_location(self, slot: dict[str, Any] | None, device: str
                                 ) -> tuple[str, str, str | None] | None:
        """Vendor hook: where a PCIe device sits that the chassis's PCIeSlots places in no
        labelled slot (``slot`` is its unlabelled entry, or None when none lists it)."""
        return None

    def _adapter_ports(self) -> list[NicPort]:
        top = self._top_chassis()
        on_card = None
        if top is not None and str(top.get("ChassisType") or "") == "Card":
            # The host is itself a card (a DPU): every port it has is on its board.
            on_card = f"host chassis {top.get('@odata.id')} ChassisType Card"
        with_adapters = [c for _p, c in self.host_chassis()
                         if rp.odata_id(c.get("NetworkAdapters"))]
        # Chassis, their adapters and each adapter's collections are independent reads:
        # they overlap (a few at a time), and results are put back in the listed order.
        per_chassis = self.client.map(partial(self._chassis_adapters, on_card=on_card),
                                      with_adapters)
        out: list[NicPort] = []
        ib_ports: list[dict[str, Any]] = []
        for adapters in per_chassis:
            for ports, infiniband in adapters:
                out.extend(ports)
                ib_ports.extend(infiniband)
        self._ib_ports = ib_ports
        return out

    def _chassis_adapters(self, chassis: dict[str, Any], on_card: str | None
                          ) -> list[tuple[list[NicPort], list[dict[str, Any]]]]:
        adapters_link = rp.odata_id(chassis.get("NetworkAdapters")) or ""
        devices_link = rp.odata_id(chassis.get("PCIeDevices"))
        # The adapters' PCIe devices are otherwise read one by one: where $expand works,
        # the chassis's PCIeDevices collection is one read, made while the adapters' own
        # collections are read (only their location needs it).
        slots, adapters, devices = self._together(
            partial(self._pcie_slots, chassis),
            partial(self._adapters_with_collections, adapters_link),
            partial(self._optional, "PCIeDevices", partial(self.client.expanded_members,
                                                           devices_link), None)
            if devices_link else dict)
        return self.client.map(partial(self._read_adapter, slots=slots, on_card=on_card,
                                       known=devices), adapters)

    def _adapters_with_collections(self, adapters_link: str
                                   ) -> list[tuple[dict[str, Any], dict[str, dict[str, Any]],
                                                   list[dict[str, Any]]]]:
        """Each adapter with its ports (by URI, from Ports and NetworkPorts) and functions."""
        return self.client.map(self._adapter_collections,
                               self._each_member(adapters_link, "NetworkAdapter"))

    def _adapter_collections(self, adapter: dict[str, Any]
                             ) -> tuple[dict[str, Any], dict[str, dict[str, Any]],
                                        list[dict[str, Any]]]:
        functions_link = rp.odata_id(adapter.get("NetworkDeviceFunctions"))
        ports: dict[str, dict[str, Any]] = {}
        if not functions_link:
            return adapter, ports, []  # no function can name a port: its ports are not read
        # Both port collections: a function may name a member of either (XCC fills both).
        links = [(link, what) for link, what in (
            (rp.odata_id(adapter.get("Ports")), "adapter port"),
            (rp.odata_id(adapter.get("NetworkPorts")), "adapter port"),
            (functions_link, "NetworkDeviceFunction")) if link]
        *port_lists, functions = self.client.map(lambda lw: self._each_member(*lw), links)
        for members in port_lists:
            for member in members:
                ports[str(member.get("@odata.id") or "").rstrip("/")] = member
        return adapter, ports, functions

    def _read_adapter(self, read: tuple[dict[str, Any], dict[str, dict[str, Any]],
                                        list[dict[str, Any]]],
                      slots: dict[str, dict[str, Any]], on_card: str | None,
                      known: dict[str, dict[str, Any]] | None = None,
                      ) -> tuple[list[NicPort], list[dict[str, Any]]]:
        adapter, ports, functions = read
        if not functions:
            return [], []
        adapter_id = str(adapter.get("Id") or "")
        location = self._adapter_location(adapter, slots, on_card, functions, known)
        vendor = " ".join(t for t in (rp.text(adapter.get("Manufacturer")),
                                      rp.text(adapter.get("Model"))) if t) or None
        out: list[NicPort] = []
        ib_ports: list[dict[str, Any]] = []
        for function in functions:
            port = rp.best_port([ports[link] for link in rp.function_port_links(function)
                                 if link in ports])
            if rp.is_infiniband(function, port, adapter_id):
                eth = rp.obj(function.get("Ethernet"))
                ib_ports.append({
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
        return out, ib_ports

    def read_drives(self) -> list[Any]:
        """Drives from Storage (or SimpleStorage on older BMCs); an unreadable one warns."""
        system = self.system()
        drives = []
        storage_link = rp.odata_id(system.get("Storage"))
        if storage_link:
            links = [link for storage in self._each_member(storage_link, "Storage")
                     for link in rp.link_list(storage.get("Drives"))]
            drives = [rp.parse_drive(d) for d in self._read_many(links, "drive") if d is not None]
        if not drives:
            simple_link = rp.odata_id(system.get("SimpleStorage"))
            if simple_link:
                for simple in self._each_member(simple_link, "SimpleStorage"):
                    drives.extend(rp.parse_simple_storage(simple))
        return drives

    def read_firmware(self) -> dict[str, str]:
        """Name -> version of every FirmwareInventory member."""
        update_link = self.client.service("UpdateService")
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
        missing = [keys[k] for k, v in out.items() if v[0] is None]
        if missing:
            asked = ", ".join(path for path, _ in sources)
            self.warnings.append(f"identity: no {'/'.join(missing)} in {asked} (the BMC does "
                                 "not say; check the host's FRU/asset data)")
        return out

    def _other_systems(self) -> list[str]:
        """The BMC's other Systems that are no host (a GPU baseboard), to lend identity.

        Another host System (the other node of a two-node blade) has its own serial:
        never the host's.
        """
        collection = self.client.service("Systems") or "/redfish/v1/Systems"
        body = self._read(collection, "Systems") or {}
        me = self.system_path().rstrip("/")
        return [m for m in rp.link_list(body.get("Members"))
                if m.rstrip("/") != me and not self.is_host_system(m)]


def _call(job: Callable[[], Any]) -> Any:
    return job()


def _identity_text(value: Any) -> str | None:
    """An identity value, treating the placeholders BMCs fill unknown fields with as absent."""
    text = rp.text(value)
    # AMI boards ship "Default string" and "To Be Filled By O.E.M." in unset FRU fields
    if text is None or text.upper() in {"N/A", "NA", "NONE", "NULL", "UNKNOWN", "0",
                                        "TO BE FILLED BY O.E.M.", "DEFAULT STRING",
                                        "NOT SPECIFIED", "NOT AVAILABLE"}:
        return None
    return text

