"""The MAAS test site (tests/fixtures/maas/site/site.yml) pointed at a contract server.

A uniquely named module rather than conftest.py: pytest swaps `conftest` modules of different
folders in sys.modules, so tests must not import from theirs.
"""

from __future__ import annotations

from pathlib import Path

from provisioner.deploy.base import DeployRequest
from provisioner.inventory import Site

SITE_FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "maas" / "site" / "site.yml"
BMC_PASSWORD = "Calvin-bmc-Pa55"


def write_site(tmp_path: Path, url: str) -> Path:
    """A copy of the MAAS test site whose settings.maas.url is ``url``."""
    text = SITE_FIXTURE.read_text().replace("http://maas.example.net:5240/MAAS", url)
    site_dir = tmp_path / "maas-test"
    site_dir.mkdir(exist_ok=True)
    path = site_dir / "site.yml"
    path.write_text(text)
    return path


def requests_for(site: Site, names: list[str] | None = None) -> list[DeployRequest]:
    """Deploy requests as the workflow builds them (MACs from the inventory)."""
    return [
        DeployRequest(host=h, mac=h.provisioning_mac or "", timeout_s=30)
        for h in site.select(names)
    ]
