"""Fixtures for the MAAS backend tests: the MAAS contract server and a MAAS site pointing at it.

See maas_contract_server.py for what the contract server is and where its behaviour comes from.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from maas_contract_server import MAASContractServer

from provisioner.deploy.base import DeployRequest
from provisioner.inventory import Site, load_site

SITE_FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "maas" / "site" / "site.yml"
BMC_PASSWORD = "Calvin-bmc-Pa55"


@pytest.fixture
def maas_server() -> Iterator[MAASContractServer]:
    server = MAASContractServer().start()
    try:
        yield server
    finally:
        server.stop()


def write_site(tmp_path: Path, url: str) -> Path:
    """A copy of the MAAS test site whose settings.maas.url is ``url``."""
    text = SITE_FIXTURE.read_text().replace("http://maas.example.net:5240/MAAS", url)
    site_dir = tmp_path / "maas-test"
    site_dir.mkdir(exist_ok=True)
    path = site_dir / "site.yml"
    path.write_text(text)
    return path


@pytest.fixture
def maas_env(maas_server: MAASContractServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAAS_API_KEY", maas_server.api_key)
    monkeypatch.setenv("PROVISIONER_BMC_PASSWORD", BMC_PASSWORD)


@pytest.fixture
def maas_site(tmp_path: Path, maas_server: MAASContractServer, maas_env: None) -> Site:
    return load_site(write_site(tmp_path, maas_server.url))


def requests_for(site: Site, names: list[str] | None = None) -> list[DeployRequest]:
    """Deploy requests as the workflow builds them (MACs from the inventory)."""
    return [
        DeployRequest(host=h, mac=h.provisioning_mac or "", timeout_s=30)
        for h in site.select(names)
    ]
