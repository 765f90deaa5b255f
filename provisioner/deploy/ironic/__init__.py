"""Ironic deploy backend: drives OpenStack Ironic through its REST API (pinned microversion)."""

from provisioner.deploy.ironic.backend import IronicBackend
from provisioner.deploy.ironic.client import IronicClient

__all__ = ["IronicBackend", "IronicClient"]
