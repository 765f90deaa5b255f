"""The settings.maas block: validation errors name file, line and key; the key is resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.deploy.maas.backend import MAASBackend, tag_name
from provisioner.deploy.maas.settings import maas_settings, resolve_api_key
from provisioner.deploy.maas.userdata import encode, user_data
from provisioner.exceptions import CredentialError, DeployError, InventoryError
from provisioner.inventory import Site, load_site

SITE = Path(__file__).resolve().parents[3] / "fixtures" / "maas" / "site" / "site.yml"
URL_LINE = "    url: http://maas.example.net:5240/MAAS\n"


def site_with(tmp_path: Path, old: str, new: str) -> Site:
    text = SITE.read_text()
    assert old in text
    path = tmp_path / "site.yml"
    path.write_text(text.replace(old, new))
    return load_site(path)


def test_fixture_settings_are_valid():
    s = maas_settings(load_site(SITE))
    assert s.url == "http://maas.example.net:5240/MAAS"
    assert s.distro_series == "jammy" and s.kernel == "hwe-22.04" and s.storage_layout == "flat"


def test_missing_url_names_file_line_and_key(tmp_path):
    # the block is typed in the site schema: the site itself does not load
    with pytest.raises(InventoryError) as exc:
        site_with(tmp_path, URL_LINE, "")
    msg = str(exc.value)
    assert "site.yml:" in msg and "[settings.maas.url]" in msg
    assert "missing required key 'url'" in msg


def test_plain_api_key_is_refused(tmp_path):
    with pytest.raises(InventoryError, match="never the key itself") as exc:
        site_with(tmp_path, "api_key: {env: MAAS_API_KEY}", "api_key: ck:tk:plainsecret")
    assert "plainsecret" not in str(exc.value)
    line = 1 + SITE.read_text().splitlines().index("    api_key: {env: MAAS_API_KEY}")
    assert f"{tmp_path / 'site.yml'}:{line} [settings.maas.api_key]" in str(exc.value)


def test_unknown_key_and_bad_url(tmp_path):
    with pytest.raises(InventoryError, match="unknown key 'storage_layuot'"):
        site_with(tmp_path, "    storage_layout: flat", "    storage_layuot: flat")
    with pytest.raises(InventoryError, match="is not a URL like"):
        site_with(tmp_path, URL_LINE, "    url: maas:5240\n")


def test_a_maas_site_without_the_block_is_told_so(tmp_path):
    lines = SITE.read_text().splitlines(keepends=True)
    start = lines.index("  maas:\n")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    "))
    path = tmp_path / "site.yml"
    path.write_text("".join(lines[:start] + lines[end:]))
    site = load_site(path)
    assert site.settings.maas is None
    with pytest.raises(InventoryError, match=r"\[settings.maas\].*needs settings.maas"):
        maas_settings(site)


def test_host_link_speed_has_one_default_and_is_the_backends_to_tell(tmp_path):
    from provisioner.settings import DEFAULT_HOST_LINK_GBPS

    site = load_site(SITE)
    assert MAASBackend().host_link_gbps(site) == DEFAULT_HOST_LINK_GBPS
    faster = site_with(tmp_path, URL_LINE, URL_LINE + "    host_link_gbps: 25\n")
    assert MAASBackend().host_link_gbps(faster) == 25.0


def test_api_key_from_env_and_file(tmp_path, monkeypatch):
    site = load_site(SITE)
    monkeypatch.delenv("MAAS_API_KEY", raising=False)
    with pytest.raises(CredentialError, match="MAAS_API_KEY is not set"):
        resolve_api_key(site, maas_settings(site))
    monkeypatch.setenv("MAAS_API_KEY", "ck:tk:sec")
    assert resolve_api_key(site, maas_settings(site)).token_key == "tk"

    keyfile = tmp_path / "maas.key"  # tmp_path is outside any git work tree
    keyfile.write_text("ck2:tk2:sec2\n")
    site = site_with(tmp_path, "api_key: {env: MAAS_API_KEY}", f"api_key: {{file: {keyfile}}}")
    key = resolve_api_key(site, maas_settings(site))
    assert (key.consumer_key, key.token_secret.reveal()) == ("ck2", "sec2")


def test_user_data_creates_the_site_user():
    site = load_site(SITE)
    text = user_data(site, site.hosts[0])
    assert text.startswith("#cloud-config\n")
    assert "name: provision" in text and "ops@laptop" in text and "host: gpu-m01-u03" in text
    import base64

    assert base64.b64decode(encode(text)).decode() == text


def test_tag_names_are_valid_maas_tags():
    assert tag_name("", "rack", "m01") == "rack-m01"
    assert tag_name("dc1-", "profile", "hgx h100/v2") == "dc1-profile-hgx_h100_v2"


def test_backend_needs_the_site_before_use():
    with pytest.raises(DeployError, match="before prepare"):
        MAASBackend()._connect()


def test_api_key_from_ansible_vault(tmp_path, monkeypatch):
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    (tmp_path / "vault-pass").write_text("correct horse\n")
    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(b"correct horse"))])
    (tmp_path / "secrets.vault.yml").write_bytes(
        vault.encrypt("maas_api_key: ck3:tk3:sec3\n")
    )
    monkeypatch.setenv("PROVISIONER_VAULT_PASSWORD_FILE", str(tmp_path / "vault-pass"))
    site = site_with(tmp_path, "api_key: {env: MAAS_API_KEY}",
                     "api_key: {vault: secrets.vault.yml, key: maas_api_key}")
    key = resolve_api_key(site, maas_settings(site))
    assert (key.consumer_key, key.token_key, key.token_secret.reveal()) == ("ck3", "tk3", "sec3")
