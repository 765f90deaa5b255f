"""Embedded deploy backend: dnsmasq (DHCP/TFTP) + iPXE + a deploy HTTP server, no MAAS needed."""

from provisioner.deploy.embedded.backend import EmbeddedBackend
from provisioner.deploy.embedded.settings import EmbeddedSettings, embedded_settings

__all__ = ["EmbeddedBackend", "EmbeddedSettings", "embedded_settings"]
