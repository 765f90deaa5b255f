"""The parts of MAAS API 2.0 objects the backend reads (machines, interfaces, block devices)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from provisioner.deploy.maas.status import NodeStatus


class _MAASObject(BaseModel):
    # MAAS returns dozens of fields and adds more in each release: read what we use, keep the rest.
    model_config = ConfigDict(extra="ignore")


class Subnet(_MAASObject):
    """A MAAS subnet (``/subnets/`` entries and interface links' ``subnet``)."""

    id: int
    cidr: str
    name: str = ""


class Link(_MAASObject):
    """How an interface is configured on a subnet: ``auto``, ``static``, ``dhcp``, ``link_up``."""

    id: int
    mode: str
    ip_address: str | None = None
    subnet: Subnet | None = None


class Interface(_MAASObject):
    """A network interface of a machine (``interface_set`` entries)."""

    id: int
    name: str = ""
    type: str = "physical"
    mac_address: str | None = None
    enabled: bool = True
    links: list[Link] = Field(default_factory=list)


class BlockDevice(_MAASObject):
    """A block device of a machine (``/nodes/{system_id}/blockdevices/`` entries)."""

    id: int
    name: str = ""
    type: str = "physical"
    model: str | None = None
    serial: str | None = None
    id_path: str | None = None
    path: str | None = None
    size: int = Field(default=0, ge=0, lt=2**64)  # bytes; a bigger number is no disk
    tags: list[str] = Field(default_factory=list)

    @property
    def size_gb(self) -> float:
        """Size in decimal gigabytes, as disk vendors and the site file count them."""
        return self.size / 1e9

    def describe(self) -> str:
        """One line naming the device for error messages."""
        return (
            f"{self.name} (id {self.id}, model {self.model or '?'}, serial {self.serial or '?'}, "
            f"{self.size_gb:.0f} GB{', ' + self.id_path if self.id_path else ''})"
        )


class Machine(_MAASObject):
    """A MAAS machine as returned by ``GET /MAAS/api/2.0/machines/{system_id}/``."""

    system_id: str
    hostname: str = ""
    status: int
    status_name: str = ""
    status_message: str | None = None
    power_type: str | None = None
    power_state: str | None = None
    owner: str | None = None
    architecture: str | None = None
    osystem: str | None = None
    distro_series: str | None = None
    hwe_kernel: str | None = None
    tag_names: list[str] = Field(default_factory=list)
    boot_interface: Interface | None = None
    interface_set: list[Interface] = Field(default_factory=list)
    boot_disk: BlockDevice | None = None
    ip_addresses: list[str] = Field(default_factory=list)

    @property
    def node_status(self) -> NodeStatus | None:
        """The status as an enum; None for a code this client does not know."""
        try:
            return NodeStatus(self.status)
        except ValueError:
            return None

    @property
    def macs(self) -> set[str]:
        """All MAC addresses of the machine, lower-case."""
        macs = {i.mac_address.lower() for i in self.interface_set if i.mac_address}
        if self.boot_interface and self.boot_interface.mac_address:
            macs.add(self.boot_interface.mac_address.lower())
        return macs

    def describe(self) -> str:
        """``hostname (system_id) in <status>`` for messages."""
        name = self.status_name or str(self.status)
        return f"{self.hostname or '?'} ({self.system_id}) in state {name!r}"


class Event(_MAASObject):
    """A MAAS event of a machine (``/events/?op=query`` entries)."""

    id: int
    level: str = "INFO"
    created: str = ""
    type: str = ""
    description: str = ""

    def line(self) -> str:
        """``<created> <LEVEL> <type>: <description>``."""
        text = f"{self.created} {self.level} {self.type}"
        return f"{text}: {self.description}" if self.description else text


class NodeDevice(_MAASObject):
    """A PCI/USB device MAAS found while commissioning (``/nodes/{id}/devices/`` entries)."""

    id: int
    hardware_type_name: str = ""
    vendor_id: str = ""
    product_id: str = ""
    vendor_name: str = ""
    product_name: str = ""
    pci_address: str | None = None
    numa_node: int | None = None


class BootResource(_MAASObject):
    """An image MAAS can boot or deploy (``/boot-resources/`` entries)."""

    id: int
    type: str = ""
    name: str  # e.g. ubuntu/jammy
    architecture: str  # e.g. amd64/ga-22.04
