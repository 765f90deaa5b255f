"""#32 item 10 for the site's own files: each input kind has a size cap checked before it is
read, named in the refusal, and numbers no setting can hold are refused at their line (Python
refuses 4,300 digits in its own words, naming no line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provisioner.exceptions import CredentialError, InventoryError
from provisioner.inventory import load_site
from provisioner.inventory.credentials import (
    MAX_SECRET_FILE_BYTES,
    MAX_VAULT_BYTES,
    read_small_file,
)
from provisioner.inventory.yamlsrc import MAX_FILE_BYTES, MAX_NUMBER_DIGITS

SITE = (Path(__file__).resolve().parents[3] / "inventory" / "example" / "site.yml").read_text()


def _site(tmp_path: Path, text: str) -> Path:
    (tmp_path / "site").mkdir(exist_ok=True)
    path = tmp_path / "site" / "site.yml"
    path.write_text(text)
    return path


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "1" * 41, "1" * 41 + ".5", "0x" + "f" * 45])
def test_a_number_no_setting_holds_is_refused_at_its_line(tmp_path: Path, number: str) -> None:
    text = SITE.replace("uplink_gbps: 100", f"uplink_gbps: {number}")
    with pytest.raises(InventoryError) as err:
        load_site(_site(tmp_path, text))
    message = str(err.value)
    assert f"site.yml:{_line_of(text, 'uplink_gbps')} [settings.uplink_gbps]" in message
    assert f"too large for any value in a site file (at most {MAX_NUMBER_DIGITS})" in message
    assert "int_max_str_digits" not in message


def test_a_bios_value_of_thousands_of_digits_is_refused_at_its_line(tmp_path: Path) -> None:
    text = SITE.replace("      BootMode: Uefi", "      BootMode: Uefi\n"
                        f"      AcPwrRcvryUserDelay: {'7' * 4400}")
    assert text != SITE
    with pytest.raises(InventoryError) as err:
        load_site(_site(tmp_path, text))
    assert f"site.yml:{_line_of(text, 'AcPwrRcvryUserDelay')}" in str(err.value)
    assert "4,400 digits" in str(err.value)


def test_a_long_number_written_as_text_is_text(tmp_path: Path) -> None:
    text = SITE.replace("      BootMode: Uefi", "      BootMode: Uefi\n"
                        f"      AssetTag: \"{'7' * 60}\"")
    site = load_site(_site(tmp_path, text))
    assert {h.bios["AssetTag"].value for h in site.hosts if "AssetTag" in h.bios} == {"7" * 60}


def test_a_site_file_over_its_cap_is_refused_naming_the_cap(tmp_path: Path) -> None:
    path = _site(tmp_path, SITE)
    with path.open("r+b") as f:  # sparse: nothing is written, the size is what counts
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(InventoryError, match=f"over {MAX_FILE_BYTES // 2**20} MiB"):
        load_site(path)


@pytest.mark.parametrize(("limit", "what"), [(MAX_SECRET_FILE_BYTES, "secret file"),
                                             (MAX_VAULT_BYTES, "vault")])
def test_secret_and_vault_files_over_their_caps_name_the_cap(tmp_path: Path, limit: int,
                                                             what: str) -> None:
    path = tmp_path / "big"
    with path.open("wb") as f:
        f.truncate(limit + 1)
    os.chmod(path, 0o600)
    with pytest.raises(CredentialError, match=f"{what} .* is over {limit // 1024} KiB"):
        read_small_file(path, limit, what, "credentials.bmc.password")
