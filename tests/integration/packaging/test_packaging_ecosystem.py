"""The ecosystem's packaging: the roles as the provisioner.cluster collection, and the
pre-commit hooks run by the real pre-commit tool on a sample repository (all offline)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    exe = BIN / name
    if not exe.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed (pyproject's test extra; ./scripts/install-deps)")
        return found
    return str(exe)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        # the `provision` on PATH runs this checkout's code
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": str(REPO),
        "PRE_COMMIT_HOME": str(tmp / "pre-commit-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        **extra,
    }


# -- the collection ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collection built from this checkout and installed into a private path."""
    tmp = tmp_path_factory.mktemp("collection")
    galaxy = _tool("ansible-galaxy")
    env = _env(tmp, ANSIBLE_CONFIG=str(tmp / "none.cfg"))
    res = subprocess.run(
        [galaxy, "collection", "build", "--output-path", str(tmp / "dist"), str(REPO)],
        env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    meta = yaml.safe_load((REPO / "galaxy.yml").read_text())
    tarball = tmp / "dist" / f"{meta['namespace']}-{meta['name']}-{meta['version']}.tar.gz"
    assert tarball.is_file()
    res = subprocess.run(
        [galaxy, "collection", "install", "--offline", "-p", str(tmp / "collections"), str(tarball)],
        env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return tarball


def test_the_collection_holds_the_roles_and_plugin_only(collection: Path) -> None:
    with tarfile.open(collection) as tar:
        names = set(tar.getnames())
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
    for role in roles:
        assert f"roles/{role}/tasks/main.yml" in names, role
    assert "plugins/inventory/provisioner_site.py" in names
    assert "meta/runtime.yml" in names and "playbooks/site.yml" in names
    for forbidden in ("provisioner/", "tests/", "cabling/", "roles/common/molecule/", ".git"):
        assert not any(n.startswith(forbidden) for n in names), forbidden


def _syntax_check(tmp: Path, role: str) -> subprocess.CompletedProcess[str]:
    play = tmp / f"play-{role.replace('.', '-')}.yml"
    play.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "roles": [role]}]))
    cfg = tmp / "ansible.cfg"
    cfg.write_text("[defaults]\nroles_path = /nonexistent\n")  # only the collection can answer
    return subprocess.run(
        [_tool("ansible-playbook"), "--syntax-check", "-i", "localhost,", str(play)],
        env=_env(tmp, ANSIBLE_CONFIG=str(cfg), ANSIBLE_COLLECTIONS_PATH=str(tmp / "collections")),
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp,
    )  # fmt: skip


def test_roles_resolve_by_their_fully_qualified_names(collection: Path) -> None:
    tmp = collection.parent.parent
    for role in ("provisioner.cluster.common", "provisioner.cluster.node_exporter"):
        res = _syntax_check(tmp, role)
        assert res.returncode == 0, res.stdout + res.stderr
    missing = _syntax_check(tmp, "provisioner.cluster.no_such_role")
    assert missing.returncode != 0
    assert "no_such_role" in missing.stdout + missing.stderr


# -- pre-commit hooks -------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo, check=True, capture_output=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A repository as a user keeps it: a site file and a wiring plan, committed."""
    repo = tmp_path / "infra"
    (repo / "inventory").mkdir(parents=True)
    # the whole site folder: `inventory check` also reads the CA bundle the site names
    shutil.copytree(REPO / "inventory" / "example", repo / "inventory" / "dc1")
    res = subprocess.run(
        [str(BIN / "provision"), "cabling", "plan", "--hosts", "2", "-o", str(repo / "fabric.yaml")],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "sample")
    return repo


def _try_repo(repo: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    # `try-repo` runs this checkout's hooks (uncommitted edits included), as a user's
    # `repo: https://...` entry would after a release
    return subprocess.run(
        [_tool("pre-commit"), "try-repo", str(REPO), "--all-files", "--verbose"],
        cwd=repo, env=_env(tmp), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_hooks_pass_a_clean_repository(sample: Path, tmp_path: Path) -> None:
    res = _try_repo(sample, tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "provision inventory check" in out and "provision cabling lint" in out
    assert "ok: site 'example'" in out  # the hook really ran the check
    assert "lint fabric.yaml: clean" in out


def test_the_hooks_fail_on_a_typo_and_a_reused_port(sample: Path, tmp_path: Path) -> None:
    site = sample / "inventory" / "dc1" / "site.yml"
    site.write_text(site.read_text().replace("\n  uplink_gbps: 100\n", "\n  uplink_gbpz: 100\n"))
    fabric = sample / "fabric.yaml"
    text = fabric.read_text()
    start = text.index("links:\n") + len("links:\n")
    first = text[start:].split("\n", 1)[0]
    fabric.write_text(text[:start] + first + "\n" + text[start:])  # the same port twice
    res = _try_repo(sample, tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "unknown key 'uplink_gbpz'" in out and "did you mean 'uplink_gbps'?" in out
    assert "CAB003" in out and "port-reused" in out
