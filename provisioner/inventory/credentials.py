"""Resolve a site's named credentials references at run time, without ever exposing the secret."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from provisioner.exceptions import CredentialError
from provisioner.inventory.spec import SecretRef
from provisioner.inventory.yamlsrc import FileRefused, read_regular, safe_load_bounded
from provisioner.secrets import Secret

if TYPE_CHECKING:
    from provisioner.inventory.model import Site

VAULT_PASSWORD_ENVS = ("PROVISIONER_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_PASSWORD_FILE")
MAX_SECRET_FILE_BYTES = 64 * 1024
MAX_VAULT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Credentials:
    """A user name and its password; the password prints as ``***``."""

    username: str
    password: Secret


def resolve_credentials(site: Site, ref_name: str) -> Credentials:
    """Return the credentials the site calls ``ref_name``."""
    spec = site.credentials.get(ref_name)
    if spec is None:
        raise CredentialError(
            f"site {site.name!r} has no credentials reference {ref_name!r}",
            hint=f"define it under `credentials:` in {site.path}",
        )
    where = f"credentials {ref_name!r} in {site.path}"
    return Credentials(spec.username, resolve_secret(site, spec.password, where))


def resolve_secret(site: Site, ref: SecretRef, where: str) -> Secret:
    """Read one secret from the environment, a file outside the repository, or a vault."""
    if ref.env:
        value = os.environ.get(ref.env)
        if value is None:
            raise CredentialError(
                f"environment variable {ref.env} is not set ({where})",
                hint=f"export {ref.env}=... before running provision",
            )
        return Secret(value)
    if ref.file:
        path = site.resolve_path(ref.file)
        _refuse_if_committable(path, where)
        try:
            raw = read_small_file(path, MAX_SECRET_FILE_BYTES, "secret file", where)
        except FileNotFoundError:
            raise CredentialError(
                f"secret file {path} does not exist ({where})",
                hint="create it (mode 0600) or fix the path",
            ) from None
        except OSError as exc:
            raise CredentialError(f"cannot read secret file {path}: {exc.strerror} ({where})") from None
        try:
            return Secret(raw.decode("utf-8").rstrip("\r\n"))
        except UnicodeDecodeError:
            # Never say which byte: that is part of the secret.
            raise CredentialError(
                f"secret file {path} is not UTF-8 text ({where})",
                hint="write the password as UTF-8 text on one line",
            ) from None
    assert ref.vault and ref.key  # guaranteed by SecretRef's validator
    return Secret(_read_vault(site.resolve_path(ref.vault), ref.key, where))


def read_small_file(path: Path, limit: int, what: str, where: str) -> bytes:
    """A regular file's bytes, at most ``limit`` of them: a secret path pointing at
    /dev/zero, a FIFO or a huge file is refused instead of read forever."""
    try:
        return read_regular(path, limit)
    except FileRefused as refused:
        if refused.too_large:
            raise CredentialError(f"{what} {path} is over {limit // 1024} KiB ({where})",
                                  hint="a secret file holds one password on one line") from None
        raise CredentialError(f"{what} {path} is not a regular file ({where})",
                              hint="point it at a file holding the secret") from None


def _refuse_if_committable(path: Path, where: str) -> None:
    """A secret file inside a git work tree must be ignored by git, or it will be committed."""
    directory = path.parent if path.parent.exists() else Path.cwd()
    try:
        top = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return  # no git: nothing can commit it
    if top.returncode != 0:
        return
    ignored = subprocess.run(
        ["git", "-C", str(directory), "check-ignore", "-q", str(path)],
        capture_output=True,
        check=False,
    )
    if ignored.returncode != 0:
        raise CredentialError(
            f"secret file {path} is inside the git repository {top.stdout.strip()} and not "
            f"ignored ({where})",
            hint="keep secrets outside the repository (e.g. ~/.config/provisioner/), "
            "or use an env variable or Ansible Vault",
        )


def _read_vault(path: Path, key: str, where: str) -> str:
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.errors import AnsibleError
    from ansible.parsing.vault import VaultLib, VaultSecret

    pw_file = next((os.environ[e] for e in VAULT_PASSWORD_ENVS if os.environ.get(e)), None)
    if not pw_file:
        raise CredentialError(
            f"vault {path} needs a password ({where})",
            hint="set PROVISIONER_VAULT_PASSWORD_FILE (or ANSIBLE_VAULT_PASSWORD_FILE) to a file "
            "holding the vault password",
        )
    try:
        password = read_small_file(Path(pw_file).expanduser(), MAX_SECRET_FILE_BYTES,
                                   "vault password file", where).strip()
        blob = read_small_file(path, MAX_VAULT_BYTES, "vault", where)
    except OSError as exc:
        raise CredentialError(f"cannot read {exc.filename}: {exc.strerror} ({where})") from None
    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(password))])
    try:
        plain = vault.decrypt(blob)
    except AnsibleError:
        raise CredentialError(
            f"cannot decrypt vault {path} ({where})",
            hint="check the vault password file; encrypt with `ansible-vault encrypt`",
        ) from None
    try:
        data = safe_load_bounded(plain)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError):
        # The parser's message quotes the offending line: a secret. Name the file only.
        raise CredentialError(
            f"vault {path} does not hold valid YAML ({where})",
            hint="`ansible-vault edit` it: it must be a mapping of key: value lines",
        ) from None
    if not isinstance(data, dict) or key not in data:
        raise CredentialError(
            f"vault {path} has no key {key!r} ({where})",
            hint="`ansible-vault edit` it and add the key",
        )
    value = data[key]
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise CredentialError(
            f"vault {path} key {key!r} is not a single value ({where})",
            hint="give the key one text value: `key: the-password`",
        )
    return str(value)
