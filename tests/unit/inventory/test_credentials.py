"""Credentials references resolve from env, files outside the repo, and Ansible Vault."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from provisioner.exceptions import CredentialError
from provisioner.inventory import load_site
from provisioner.inventory.credentials import resolve_credentials

EXAMPLE = Path(__file__).resolve().parents[3] / "inventory" / "example" / "site.yml"


def site_with_password(tmp_path: Path, ref: str) -> Path:
    text = EXAMPLE.read_text().replace("password: {env: PROVISIONER_BMC_PASSWORD}", f"password: {ref}")
    d = tmp_path / "site"
    d.mkdir(exist_ok=True)
    (d / "site.yml").write_text(text)
    return d / "site.yml"


def test_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_BMC_PASSWORD", "calvin-123")
    creds = resolve_credentials(load_site("example"), "idrac")
    assert creds.username == "root"
    assert creds.password.reveal() == "calvin-123"
    assert "calvin" not in repr(creds) and "calvin" not in str(creds.password)
    assert "calvin" not in f"{creds.password}"


def test_env_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROVISIONER_BMC_PASSWORD", raising=False)
    with pytest.raises(CredentialError, match="PROVISIONER_BMC_PASSWORD is not set"):
        resolve_credentials(load_site("example"), "idrac")


def test_file_outside_repo(tmp_path: Path) -> None:
    secret = tmp_path / "bmc.password"
    secret.write_text("s3cret\n")
    creds = resolve_credentials(load_site(site_with_password(tmp_path, f"{{file: {secret}}}")), "idrac")
    assert creds.password.reveal() == "s3cret"


def test_file_inside_a_repo_must_be_ignored(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "pw").write_text("leaky")
    site = load_site(site_with_password(tmp_path, f"{{file: {repo / 'pw'}}}"))
    with pytest.raises(CredentialError, match="inside the git repository") as exc:
        resolve_credentials(site, "idrac")
    assert "leaky" not in str(exc.value)
    (repo / ".gitignore").write_text("pw\n")
    assert resolve_credentials(site, "idrac").password.reveal() == "leaky"


def test_file_missing(tmp_path: Path) -> None:
    site = load_site(site_with_password(tmp_path, f"{{file: {tmp_path / 'nope'}}}"))
    with pytest.raises(CredentialError, match="does not exist"):
        resolve_credentials(site, "idrac")


def test_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    site_file = site_with_password(tmp_path, "{vault: secrets.vault, key: idrac_password}")
    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(b"vault-pw"))])
    (site_file.parent / "secrets.vault").write_bytes(vault.encrypt("idrac_password: from-vault\n"))
    pwfile = tmp_path / "vault-pass"
    pwfile.write_text("vault-pw\n")
    site = load_site(site_file)
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    monkeypatch.delenv("PROVISIONER_VAULT_PASSWORD_FILE", raising=False)
    with pytest.raises(CredentialError, match="needs a password"):
        resolve_credentials(site, "idrac")
    monkeypatch.setenv("PROVISIONER_VAULT_PASSWORD_FILE", str(pwfile))
    assert resolve_credentials(site, "idrac").password.reveal() == "from-vault"
    pwfile.write_text("wrong\n")
    with pytest.raises(CredentialError, match="cannot decrypt"):
        resolve_credentials(site, "idrac")


def test_vault_needs_a_key(tmp_path: Path) -> None:
    from provisioner.exceptions import InventoryError

    with pytest.raises(InventoryError, match="needs `key`"):
        load_site(site_with_password(tmp_path, "{vault: secrets.vault}"))


def test_unknown_reference() -> None:
    with pytest.raises(CredentialError, match="no credentials reference 'other'"):
        resolve_credentials(load_site("example"), "other")


def test_a_vault_holding_an_alias_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    site_file = site_with_password(tmp_path, "{vault: secrets.vault, key: idrac_password}")
    bomb = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    bomb += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(b"vault-pw"))])
    text = "idrac_password: hunter2-canary\n" + "\n".join(bomb) + "\n"
    (site_file.parent / "secrets.vault").write_bytes(vault.encrypt(text))
    pwfile = tmp_path / "vault-pass"
    pwfile.write_text("vault-pw\n")
    monkeypatch.setenv("PROVISIONER_VAULT_PASSWORD_FILE", str(pwfile))
    site = load_site(site_file)
    with pytest.raises(CredentialError, match="does not hold valid YAML") as e:
        resolve_credentials(site, "idrac")
    assert "hunter2-canary" not in str(e.value)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "huge"])
def test_a_secret_path_that_is_no_small_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    # /dev/zero would be read until memory runs out; a FIFO without a writer waits forever.
    secret = tmp_path / "bmc.password"
    if kind == "dev-zero":
        secret.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(secret)
    elif kind == "directory":
        secret.mkdir()
    else:
        secret.write_bytes(b"x" * (64 * 1024 + 1))
    site = load_site(site_with_password(tmp_path, f"{{file: {secret}}}"))
    want = {"huge": "is over 64 KiB", "directory": "Is a directory"}.get(
        kind, "is not a regular file")
    with pytest.raises(CredentialError, match=want):
        resolve_credentials(site, "idrac")
