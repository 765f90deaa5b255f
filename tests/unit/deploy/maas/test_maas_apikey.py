"""The MAAS API key: parsing, and never showing the secret part."""

from __future__ import annotations

import pytest

from provisioner.deploy.maas.apikey import parse_api_key
from provisioner.deploy.maas.errors import MAASAPIKeyError
from provisioner.secrets import Secret


def test_key_splits_into_its_three_parts():
    key = parse_api_key(Secret("ck:tk:topsecret\n"))
    assert (key.consumer_key, key.token_key, key.token_secret.reveal()) == ("ck", "tk", "topsecret")
    assert "topsecret" not in repr(key) and "topsecret" not in str(key)


@pytest.mark.parametrize("bad", ["", "ck:tk", "ck::secretpart", "a:b:c:d"])
def test_malformed_key_is_refused_without_echoing_it(bad):
    with pytest.raises(MAASAPIKeyError) as exc:
        parse_api_key(bad, source="settings.maas.api_key in site.yml")
    assert "consumer_key:token_key:token_secret" in str(exc.value)
    assert "secretpart" not in str(exc.value)
    assert exc.value.exit_code == 2
