"""The Redfish transport's pure policies: where a redirect may go, which JSON is refused."""

from __future__ import annotations

import pytest

from provisioner.redfish.errors import BMCLimitExceeded
from provisioner.redfish.transport import (
    _same_host_https,
    check_members,
    loggable_url,
    parse_json,
)


@pytest.mark.parametrize("origin, target, allowed", [
    ("https://10.0.0.5", "https://10.0.0.5/redfish/v1/Systems/", True),
    ("https://10.0.0.5:443", "https://10.0.0.5/x", True),
    # Another port of the address can be another BMC (a port-forwarding jump host, a
    # chassis manager's nodes): it gets no credentials.
    ("https://10.0.0.5:443", "https://10.0.0.5:8443/x", False),
    ("https://10.0.0.5:8443", "https://10.0.0.5/x", False),
    ("http://10.0.0.5:8000", "https://10.0.0.5/x", True),  # upgraded to the standard port
    ("http://10.0.0.5", "https://10.0.0.5:9443/x", False),
    ("https://10.0.0.5", "https://10.0.0.5:99999/x", False),  # no port at all
    ("https://BMC.example", "https://bmc.example/x", True),
    ("http://10.0.0.5", "https://10.0.0.5/x", True),  # the usual http -> https hop
    ("http://10.0.0.5:8000", "http://10.0.0.5:8000/x", True),  # the very origin named
    ("https://10.0.0.5", "http://10.0.0.5/x", False),  # a downgrade to clear text
    ("http://10.0.0.5:8000", "http://10.0.0.5:8001/x", False),
    ("https://10.0.0.5", "https://10.0.0.6/x", False),
    ("https://10.0.0.5", "https://10.0.0.5.evil.example/x", False),
    ("https://10.0.0.5", "https:///x", False),
])
def test_redirect_targets(origin, target, allowed):
    assert _same_host_https(origin, target) is allowed


def test_logged_urls_carry_no_user_info():
    assert loggable_url("https://root:pw@10.0.0.5:443/redfish/v1/?$expand=.") == \
        "https://10.0.0.5:443/redfish/v1/?$expand=."


@pytest.mark.parametrize("raw, message", [
    (b"[" * 200_000 + b"]" * 200_000, "nested deeper"),
    (b"[" * 65 + b"]" * 65, "nested deeper"),
    (b'{"a": 1e999}', "out of range"),
    (b'{"a": -1e999}', "out of range"),
    (b'{"a": NaN}', "not a JSON number"),
    (b'{"a": Infinity}', "not a JSON number"),
    (b'{"a": ' + b"9" * 41 + b"}", "41 digits"),
])
def test_json_no_bmc_sends_is_refused(raw, message):
    with pytest.raises(BMCLimitExceeded, match=message):
        parse_json(raw, bmc="b", path="/p")


def test_ordinary_json_parses():
    assert parse_json(b"  ", bmc="b", path="/p") == {}
    assert parse_json(b"<html>", bmc="b", path="/p") is None
    assert parse_json(b"\xff\xfe{", bmc="b", path="/p") is None
    assert parse_json(b'{"a": [1, 2.5, -3e5, {"b": null}]}', bmc="b", path="/p") == {
        "a": [1, 2.5, -3e5, {"b": None}]}
    assert parse_json(b"[" * 64 + b"]" * 64, bmc="b", path="/p") is not None


def test_member_cap():
    check_members({"Members": [{}] * 10}, 10, bmc="b", path="/c")
    with pytest.raises(BMCLimitExceeded, match="11 collection members"):
        check_members({"Members": [{}] * 11}, 10, bmc="b", path="/c")
