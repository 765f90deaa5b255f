"""Backend settings: typed in the site schema, one default per setting, read through the backend."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.deploy.base import DeployBackend, DeployOutcome, DeployRequest, ProgressFn
from provisioner.deploy.embedded import EmbeddedBackend
from provisioner.deploy.maas import MAASBackend
from provisioner.exceptions import InventoryError
from provisioner.inventory import Site, load_site
from provisioner.settings import DEFAULT_HOST_LINK_GBPS
from provisioner.settings.embedded import EmbeddedSettings
from provisioner.settings.maas import MAASSettings
from provisioner.state import StateStore
from provisioner.workflow.rack import RackOptions, RackRunner

EXAMPLE = Path(__file__).resolve().parents[3] / "inventory" / "example" / "site.yml"


class FortyGigBackend(DeployBackend):
    """An ungated backend whose settings say the hosts have 40 Gb/s links."""

    name = "forty"

    def host_link_gbps(self, site: Site) -> float:
        return 40.0

    def prepare(self, site: Site, requests: Sequence[DeployRequest]) -> None:
        raise AssertionError("planning only")

    def deploy(self, request: DeployRequest, progress: ProgressFn) -> DeployOutcome:
        raise AssertionError("planning only")

    def release(self, request: DeployRequest, *, erase: bool = False) -> None:
        raise AssertionError("planning only")

    def close(self) -> None:
        pass


def test_host_link_default_is_written_once() -> None:
    for model in (EmbeddedSettings, MAASSettings):
        assert model.model_fields["host_link_gbps"].default == DEFAULT_HOST_LINK_GBPS


def test_the_embedded_backend_reads_its_own_block(tmp_path: Path) -> None:
    site = load_site(EXAMPLE)
    assert site.settings.embedded is not None
    assert EmbeddedBackend().host_link_gbps(site) == site.settings.embedded.host_link_gbps
    text = EXAMPLE.read_text()
    assert "  embedded:\n" in text
    (tmp_path / "site.yml").write_text(text.replace("  embedded:\n",
                                                    "  embedded:\n    host_link_gbps: 25\n"))
    assert EmbeddedBackend().host_link_gbps(load_site(tmp_path / "site.yml")) == 25.0
    # another backend's block says nothing about this one's hosts
    assert MAASBackend().host_link_gbps(site) == DEFAULT_HOST_LINK_GBPS


def test_the_wave_is_sized_with_what_the_backend_says(tmp_path: Path) -> None:
    site = load_site(EXAMPLE)
    store = StateStore(tmp_path / "state.sqlite", site=site.name)
    runner = RackRunner(site, store, FortyGigBackend(), open_bmc=None, reporter=None,  # type: ignore[arg-type]
                        options=RackOptions())
    plan = runner.wave_plan(len(site.hosts))
    assert "/ 40 Gb/s per host" in plan.reason
    assert plan.size == max(1, int(site.settings.uplink_gbps * 0.8 // 40))


def test_a_bad_backend_key_fails_when_the_site_loads(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("  embedded:\n", "  embedded:\n    host_link_gbsp: 25\n")
    (tmp_path / "site.yml").write_text(text)
    with pytest.raises(InventoryError, match=r"\[settings.embedded.host_link_gbsp\].*unknown key"):
        load_site(tmp_path / "site.yml")
