"""MAAS deploy backend: drives a Canonical MAAS 3.x region through its REST API 2.0."""

from provisioner.deploy.maas.backend import MAASBackend
from provisioner.deploy.maas.client import MAASClient
from provisioner.deploy.maas.dry_run import HostPlan, MAASPlan

__all__ = ["HostPlan", "MAASBackend", "MAASClient", "MAASPlan"]
