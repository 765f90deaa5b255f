"""Redfish error texts, Retry-After parsing and log redaction."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from provisioner.http_policy import logsafe
from provisioner.redfish.client import _parse_retry_after
from provisioner.redfish.errors import BMCAuthError, ExtendedMessage, parse_extended_info


def test_error_text_names_bmc_path_status_and_bmc_message():
    err = BMCAuthError("GET rejected", bmc="gpu-r01-u02 (BMC 10.11.0.12)",
                       path="/redfish/v1/Systems", status=401,
                       extended=[ExtendedMessage("Base.1.8.NoValidSession", "No session")])
    text = str(err)
    assert "gpu-r01-u02" in text and "/redfish/v1/Systems" in text and "HTTP 401" in text
    assert "Base.1.8.NoValidSession: No session" in text
    assert err.message_ids() == ["Base.1.8.NoValidSession"]


def test_extended_info_fallbacks():
    assert parse_extended_info({"error": {"code": "X", "message": "plain"}}) == [
        ExtendedMessage("X", "plain")]
    assert parse_extended_info("<html>") == []
    assert parse_extended_info({"error": "text"}) == []
    # Action results carry ExtendedInfo at the top level.
    top = {"@Message.ExtendedInfo": [{"MessageId": "Base.1.8.Success", "Message": "ok"}]}
    assert parse_extended_info(top)[0].message_id == "Base.1.8.Success"


def test_retry_after_seconds_and_http_date():
    assert _parse_retry_after("7") == 7.0
    assert _parse_retry_after(None) is None
    assert _parse_retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    value = _parse_retry_after(later)
    assert value is not None and 25 <= value <= 31


def test_redact():
    text = logsafe.redact(
        "\tX-Auth-Token: 0123abcd\n\tAuthorization: Basic cm9vdDpjYWx2aW4=\n"
        '{"UserName": "root", "Password": "calvin"} '
        "{'x-auth-token': 'deadbeef'}"
    )
    for secret in ("0123abcd", "cm9vdDpjYWx2aW4=", "calvin", "deadbeef"):
        assert secret not in text
    assert "root" in text


def test_filter_rewrites_records(caplog):
    logsafe.install(("test.redfish.redact",))
    logger = logging.getLogger("test.redfish.redact")
    with caplog.at_level(logging.INFO, logger="test.redfish.redact"):
        logger.info("headers %s", {"X-Auth-Token": "feedface"})
    assert "feedface" not in caplog.text
    assert "<redacted>" in caplog.text


def test_remembered_secrets_are_redacted_in_any_words_until_every_holder_forgets():
    password = "canary-Pa55-one-of-two"
    logsafe.remember([password, "ab"])  # too short to be worth mangling messages for
    logsafe.remember([password])  # a second client of the same site
    assert logsafe.redact(f"cannot parse user admin with {password}!") == \
        "cannot parse user admin with ***!"
    assert logsafe.redact("ab stays") == "ab stays"
    logsafe.forget([password])
    assert password not in logsafe.redact(password)  # the other client still holds it
    logsafe.forget([password])
    assert logsafe.redact(password) == password


def test_an_error_quoting_a_secret_is_scrubbed_everywhere_it_is_shown():
    error = BMCAuthError("POST refused", bmc="bmc1", path="/x", status=400,
                         extended=[ExtendedMessage("Base.1.GeneralError", "bad s3cr3t-pw",
                                                   "retry with s3cr3t-pw")],
                         hint="s3cr3t-pw")
    error.scrub(["s3cr3t-pw"])
    shown = f"{error} {error!r} {error.extended} {error.hint}"
    assert "s3cr3t-pw" not in shown and "bad ***" in str(error)
