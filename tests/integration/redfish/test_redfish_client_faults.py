"""The Redfish client against a real sushy-emulator, with faults injected by real sockets."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import requests

from provisioner.bmc.factory import open_redfish
from provisioner.redfish.client import ClientOptions, RedfishClient
from provisioner.redfish.errors import (
    BMCAuthError,
    BMCNotFound,
    BMCServerError,
    BMCTimeout,
    BMCTLSError,
    BMCUnreachable,
)
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import (
    fake_system,
    fault_proxy,
    free_port,
    make_tls,
    silent_listener,
    sushy_emulator,
    write_emulator_config,
)

USER, PASSWORD = "admin", "s3cret-Pa55"
UUID = "2b5b0b44-5a3e-4bd4-8d6c-0c0c0c0c0001"
FAST = ClientOptions(verify_tls=False, timeout_s=2.0, retries=2, backoff_s=0.05)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One sushy-emulator (fake driver, basic auth) with one system of two NICs."""
    d = tmp_path_factory.mktemp("emu")
    conf = write_emulator_config(
        d, [fake_system(UUID, "node1", ["52:54:00:18:00:01", "52:54:00:18:01:01"])],
        auth=(USER, PASSWORD),
    )
    with sushy_emulator(conf) as url:
        yield url


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    return make_tls(tmp_path_factory.mktemp("tls"))


def test_basic_auth_fallback_when_bmc_has_no_session_service(emulator):
    # sushy-emulator's service root offers no SessionService: basic auth is used.
    with RedfishClient(emulator, USER, Secret(PASSWORD), FAST) as client:
        assert client.auth_method == "basic"
        systems = client.get("/redfish/v1/Systems")
        assert systems["Members"]


def test_wrong_password_is_auth_failed_and_not_retried(emulator):
    client = RedfishClient(emulator, USER, Secret("wrong"), FAST)
    client.login()
    with pytest.raises(BMCAuthError) as info:
        client.get("/redfish/v1/Systems")
    # root + one GET: a 401 is never retried (it would count towards an account lockout).
    assert client.requests_made == 2
    assert "wrong" not in str(info.value)
    assert info.value.reason == "auth failed"
    client.close()


def test_missing_resource_is_not_found_without_retry(emulator):
    with RedfishClient(emulator, USER, Secret(PASSWORD), FAST) as client:
        before = client.requests_made
        with pytest.raises(BMCNotFound):
            client.get("/redfish/v1/Systems/no-such-system")
        assert client.requests_made == before + 1
        assert client.get_optional("/redfish/v1/Systems/no-such-system") is None


def test_500s_then_recovery_are_retried_with_backoff(emulator, tmp_path):
    slept: list[float] = []
    with fault_proxy(emulator, tmp_path, args=["--fail-first", "2"]) as (url,):
        client = RedfishClient(url, USER, Secret(PASSWORD), FAST, sleep=slept.append)
        client.login()  # the root GET meets both 500s and is retried
        assert client.root.get("Systems")
        client.close()
    assert len(slept) == 2
    assert slept[1] > slept[0]  # exponential


def test_retry_after_is_honoured(emulator, tmp_path):
    slept: list[float] = []
    with fault_proxy(emulator, tmp_path, args=["--fail-first", "1", "--fail-status", "503",
                                               "--retry-after", "3"]) as (url,):
        client = RedfishClient(url, USER, Secret(PASSWORD), FAST, sleep=slept.append)
        client.login()
        client.close()
    assert slept == [3.0]


def test_persistent_500_gives_up_with_extended_message(emulator, tmp_path):
    with fault_proxy(emulator, tmp_path, args=["--fail-first", "1000"]) as (url,):
        client = RedfishClient(url, USER, Secret(PASSWORD), FAST, sleep=lambda s: None)
        with pytest.raises(BMCServerError) as info:
            client.login()
    assert client.requests_made == FAST.retries + 1
    assert "Base.1.8.InternalError" in str(info.value)
    assert info.value.status == 500


def test_post_is_not_retried_on_500(emulator, tmp_path):
    # A reset POST that got a 500 may have been applied: repeating it could reboot twice.
    with fault_proxy(emulator, tmp_path, args=["--fail-posts"]) as (url,):
        client = RedfishClient(url, USER, Secret(PASSWORD), FAST, sleep=lambda s: None)
        client.login()
        before = client.requests_made
        with pytest.raises(BMCServerError):
            client.post(f"/redfish/v1/Systems/{UUID}/Actions/ComputerSystem.Reset",
                        {"ResetType": "On"})
        assert client.requests_made == before + 1
        client.close()


def test_silent_bmc_times_out(tmp_path):
    with silent_listener() as url:
        client = RedfishClient(url, USER, Secret(PASSWORD),
                               ClientOptions(verify_tls=False, timeout_s=0.5, retries=1,
                                             backoff_s=0.01))
        # a client without a read timeout would wait on the silent BMC until pytest-timeout
        with pytest.raises(BMCTimeout) as info:
            client.login()
        assert info.value.reason == "timeout"
        assert "no answer within 0.5s" in str(info.value)
        assert client.requests_made == 2


def test_closed_port_is_unreachable():
    url = f"http://127.0.0.1:{free_port()}"
    client = RedfishClient(url, USER, Secret(PASSWORD),
                           ClientOptions(verify_tls=False, retries=0))
    with pytest.raises(BMCUnreachable):
        client.login()


def test_tls_verified_against_site_ca_and_refused_otherwise(emulator, tmp_path, tls):
    other = make_tls(tmp_path / "other")
    with fault_proxy(emulator, tmp_path, tls=tls) as (url,):
        good = ClientOptions(verify_tls=True, ca_bundle=tls.ca, timeout_s=3, retries=0)
        with RedfishClient(url, USER, Secret(PASSWORD), good) as client:
            assert client.get("/redfish/v1/Systems")["Members"]
        bad = ClientOptions(verify_tls=True, ca_bundle=other.ca, timeout_s=3, retries=0)
        with pytest.raises(BMCTLSError) as info:
            RedfishClient(url, USER, Secret(PASSWORD), bad).login()
        assert "ca_bundle" in str(info.value)
        insecure = ClientOptions(verify_tls=False, timeout_s=3, retries=0)
        with RedfishClient(url, USER, Secret(PASSWORD), insecure) as client:
            assert client.get("/redfish/v1/Systems")["Members"]


def test_missing_ca_bundle_file_is_a_clear_error(tmp_path):
    with pytest.raises(BMCTLSError, match="does not exist"):
        RedfishClient("https://127.0.0.1:1", USER, Secret(PASSWORD),
                      ClientOptions(ca_bundle=tmp_path / "nope.pem"))


def test_sessions_are_always_logged_out(emulator, tmp_path):
    # A BMC with 2 session slots: ten runs in a row only work if each one logs out.
    with fault_proxy(emulator, tmp_path, args=["--sessions", "2"]) as (url,):
        for _ in range(10):
            bmc = open_redfish(url, USER, Secret(PASSWORD), FAST)
            assert bmc.client.auth_method == "session"
            bmc.discover()
            bmc.close()


def test_exhausted_session_slots_fall_back_to_basic_auth(emulator, tmp_path):
    # One slot, held by someone else: the BMC answers like an iDRAC (503, RAC0218).
    with fault_proxy(emulator, tmp_path, args=["--sessions", "1"]) as (url,):
        holder = RedfishClient(url, USER, Secret(PASSWORD), FAST)
        holder.login()
        assert holder.auth_method == "session"
        bmc = open_redfish(url, USER, Secret(PASSWORD), FAST)
        facts = bmc.discover()
        bmc.close()
        holder.close()
    assert bmc.client.auth_method == "basic"
    assert any("session slots" in w for w in facts.extra["warnings"])
    assert facts.nics


def test_secrets_never_logged(emulator, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with fault_proxy(emulator, tmp_path, args=["--sessions", "4"]) as (url,):
        bmc = open_redfish(url, USER, Secret(PASSWORD), FAST)
        bmc.discover()
        token = bmc.client._lib.get_session_key()
        bmc.close()
    assert token
    text = caplog.text
    assert PASSWORD not in text
    assert token not in text
    assert PASSWORD not in repr(bmc.client)


def test_redfish_library_debug_records_are_redacted(emulator, tmp_path, caplog):
    # The library logs request headers at DEBUG; our filter strips tokens from them.
    caplog.set_level(logging.DEBUG, logger="redfish.rest.v1")
    with fault_proxy(emulator, tmp_path, args=["--sessions", "4"]) as (url,):
        client = RedfishClient(url, USER, Secret(PASSWORD), FAST)
        client.login()
        client.get("/redfish/v1/Systems")
        token = client._lib.get_session_key()
        client.close()
    assert "X-Auth-Token" in caplog.text
    assert token not in caplog.text
    assert PASSWORD not in caplog.text



def test_expired_session_is_renewed_once(emulator, tmp_path):
    with fault_proxy(emulator, tmp_path, args=["--sessions", "1"]) as (url,):
        client = RedfishClient(url, USER, Secret(PASSWORD), FAST)
        client.login()
        old_token = client._lib.get_session_key()
        # The BMC forgets the session (idle timeout, BMC reset): its slot is free again.
        gone = requests.delete(url + client._session_location,
                               headers={"X-Auth-Token": old_token}, timeout=5)
        assert gone.status_code == 204
        assert client.get("/redfish/v1/Systems")["Members"]
        assert client.auth_method == "session"
        assert client._lib.get_session_key() != old_token
        client.close()
        # The renewed session was logged out too: the single slot is free.
        again = RedfishClient(url, USER, Secret(PASSWORD), FAST)
        again.login()
        assert again.auth_method == "session"
        again.close()
