"""Fixtures for the MAAS backend tests: the MAAS contract server and a MAAS site pointing at it.

See maas_contract_server.py for what the contract server is and where its behaviour comes from.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from maas_contract_server import MAASContractServer
from maas_testsite import BMC_PASSWORD, write_site

from provisioner.inventory import Site, load_site


@pytest.fixture
def maas_server() -> Iterator[MAASContractServer]:
    server = MAASContractServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def maas_env(maas_server: MAASContractServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAAS_API_KEY", maas_server.api_key)
    monkeypatch.setenv("PROVISIONER_BMC_PASSWORD", BMC_PASSWORD)


@pytest.fixture
def maas_site(tmp_path: Path, maas_server: MAASContractServer, maas_env: None) -> Site:
    return load_site(write_site(tmp_path, maas_server.url))
