"""Site artefacts never break Ansible (#36 item 1): topology manifests live in a folder Ansible
does not parse, `inventory check` runs ansible-inventory and fails on what Ansible fails on,
and `--capture-topology` on a host without GPUs says so and writes nothing.

ansible-inventory is the real one (ansible-core in the project's venv), with this repository's
ansible.cfg, as `provision rack` runs it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode, InventoryError
from provisioner.health.collector import BEGIN, END
from provisioner.health.config import HealthSettings
from provisioner.health.errors import HealthInputError
from provisioner.health.manifest import manifest_path
from provisioner.health.service import capture_topology, expectations
from provisioner.health.ssh_client import SshResult, SshTarget
from provisioner.inventory import load_site
from provisioner.workflow.ansible_view_check import check_ansible_view

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()
MANIFEST = "profile: hgx-h100\ngpus:\n- index: 0\n  model: NVIDIA H100 80GB HBM3\n"


@pytest.fixture()
def site_dir(tmp_path: Path) -> Path:
    d = tmp_path / "dc1"
    shutil.copytree(REPO / "inventory" / "example", d)
    return d


def test_manifests_live_in_a_dot_folder_of_the_site(tmp_path: Path) -> None:
    assert manifest_path(tmp_path, "hgx-h100") == tmp_path / ".provisioner" / "topology" / "hgx-h100.yml"
    with pytest.raises(InventoryError):
        manifest_path(tmp_path, "../../etc/cron.d/x")


def test_ansible_reads_the_site_with_a_manifest_in_place(site_dir: Path) -> None:
    path = manifest_path(site_dir, "hgx-h100")
    path.parent.mkdir(parents=True)
    path.write_text(MANIFEST)
    assert check_ansible_view(site_dir).ran
    res = runner.invoke(app, ["inventory", "check", str(site_dir)])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("content", [None, MANIFEST])
def test_inventory_check_fails_where_ansible_fails(site_dir: Path, content: str | None) -> None:
    # What an earlier --capture-topology left: even an empty folder fails Ansible.
    legacy = site_dir / "topology"
    legacy.mkdir()
    if content:
        (legacy / "hgx-h100.yml").write_text(content)
    with pytest.raises(InventoryError) as err:
        check_ansible_view(site_dir)
    assert str(legacy) in str(err.value)
    assert f"git mv {legacy} {site_dir / '.provisioner' / 'topology'}" in str(err.value)
    res = runner.invoke(app, ["inventory", "check", str(site_dir)])
    assert res.exit_code == ExitCode.BAD_INPUT
    assert "Ansible cannot use this site as its inventory" in res.output


def test_any_stray_file_ansible_cannot_parse_is_named(site_dir: Path) -> None:
    (site_dir / "notes.yml").write_text("owner: dc-ops\n")
    with pytest.raises(InventoryError) as err:
        check_ansible_view(site_dir)
    assert str(site_dir / "notes.yml") in str(err.value) and "move" in str(err.value)


def test_health_refuses_a_site_with_the_old_topology_folder(site_dir: Path) -> None:
    (site_dir / "topology").mkdir()
    site = load_site(site_dir)
    with pytest.raises(InventoryError, match="git mv"):
        expectations(site, site.hosts[0], HealthSettings())


class _Collector:
    """Answers the collector script with canned sections (the SSH transport is not under test
    here: tests/integration/health runs it over a real sshd)."""

    def __init__(self, sections: dict[str, tuple[int, str]]) -> None:
        self.sections = sections
        self.calls = 0

    def run_script(self, target: SshTarget, script: str) -> SshResult:
        self.calls += 1
        out = "".join(f"{BEGIN} {n}\n{t}\n\n{END} {n} rc={rc}\n" for n, (rc, t) in self.sections.items())
        return SshResult(0, out, "")


def test_capture_on_a_gpu_less_profile_says_so_and_writes_nothing(site_dir: Path) -> None:
    text = (site_dir / "site.yml").read_text().replace("    gpus: 8\n", "    gpus: 0\n", 1)
    (site_dir / "site.yml").write_text(text)
    site = load_site(site_dir)
    client = _Collector({})
    with pytest.raises(HealthInputError, match="has no GPUs"):
        capture_topology(site, site.hosts[0], client=client)  # type: ignore[arg-type]
    assert client.calls == 0 and not (site_dir / ".provisioner").exists()


def test_capture_of_a_host_showing_no_gpu_writes_nothing(site_dir: Path) -> None:
    site = load_site(site_dir)
    client = _Collector({"nvsmi": (127, "bash: nvidia-smi: command not found"),
                         "topo": (127, "bash: nvidia-smi: command not found"),
                         "lspci": (0, "")})
    with pytest.raises(HealthInputError, match="shows no GPU"):
        capture_topology(site, site.hosts[0], client=client)  # type: ignore[arg-type]
    assert client.calls == 1 and not (site_dir / ".provisioner").exists()
    assert not (site_dir / "topology").exists()
