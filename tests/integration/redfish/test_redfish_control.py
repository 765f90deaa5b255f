"""Power, boot and virtual media through a real sushy-emulator (fake driver)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from provisioner.bmc.base import BootTarget, PowerAction, PowerState
from provisioner.bmc.factory import open_redfish
from provisioner.bmc.redfish_bmc import RedfishBMC
from provisioner.redfish.client import ClientOptions
from provisioner.redfish.errors import BMCStateTimeout, BMCUnsupported, RedfishError
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import (
    fake_system,
    fault_proxy,
    sushy_emulator,
    write_emulator_config,
)

UUID = "9d3c2b1a-1111-4a39-9c1e-5a7d3c2b1a10"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Iterator[str]:
    conf = write_emulator_config(tmp_path_factory.mktemp("ctl"),
                                 [fake_system(UUID, "ctl", ["52:54:00:18:00:0a"], "Off")])
    with sushy_emulator(conf) as url:
        yield url


@pytest.fixture(scope="module")
def iso_url(tmp_path_factory) -> Iterator[str]:
    """A tiny ISO on a local HTTP server, which the emulator downloads like a BMC would."""
    www = tmp_path_factory.mktemp("www")
    (www / "boot.iso").write_bytes(b"\0" * 2048)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/boot.iso"
    server.shutdown()


@pytest.fixture
def bmc(emulator) -> Iterator[RedfishBMC]:
    b = open_redfish(emulator, "admin", Secret("unused"), ClientOptions(verify_tls=False))
    b.poll_interval_s = 0.5
    yield b
    b.close()


def test_virtual_media_insert_and_eject(bmc, iso_url):
    bmc.insert_media(iso_url)
    _path, media = bmc._virtual_media()
    assert media["Image"] == iso_url and media["Inserted"] is True
    before = bmc.client.requests_made
    bmc.insert_media(iso_url)  # already in: nothing sent but the reads
    assert bmc.client.requests_made - before <= 3
    bmc.eject_media()
    assert bmc._virtual_media()[1]["Inserted"] is False
    bmc.eject_media()  # nothing inserted: a no-op


def test_boot_override_persistent_then_once(bmc):
    bmc.set_boot(BootTarget.CD, persistent=True)
    assert bmc.system(refresh=True)["Boot"]["BootSourceOverrideTarget"] == "Cd"
    assert not bmc.warnings
    bmc.set_boot(BootTarget.PXE)
    assert bmc.warnings == ["BMC made the one-time boot override persistent"]


@pytest.fixture
def strict_etag_bmc(emulator, tmp_path) -> Iterator[RedfishBMC]:
    """The emulator behind an AMI-like strong-ETag front (stand-in for an AMI MegaRAC BMC,
    e.g. the DGX H100's): ETag as a header only, 428 without If-Match, 412 on a stale one."""
    with fault_proxy(emulator, tmp_path, args=["--strict-etag"]) as (url,):
        b = open_redfish(url, "admin", Secret("unused"), ClientOptions(verify_tls=False))
        yield b
        b.close()


def test_boot_override_on_a_bmc_that_demands_an_etag(strict_etag_bmc):
    bmc = strict_etag_bmc
    assert "@odata.etag" not in bmc.system(refresh=True)
    bmc.set_boot(BootTarget.PXE, persistent=True)  # 428, then again with the header's ETag
    bmc.set_boot(BootTarget.CD, persistent=True)  # the first PATCH used that ETag up
    assert bmc.system(refresh=True)["Boot"]["BootSourceOverrideTarget"] == "Cd"


def test_stale_etag_is_replaced_once_and_other_refusals_are_not_retried(strict_etag_bmc):
    client = strict_etag_bmc.client
    path = strict_etag_bmc.system_path()
    client.patch(path, {"Boot": {"BootSourceOverrideTarget": "Hdd"}}, etag='"stale"')
    assert strict_etag_bmc.system(refresh=True)["Boot"]["BootSourceOverrideTarget"] == "Hdd"
    before = client.requests_made
    with pytest.raises(RedfishError) as info:
        client.patch("/redfish/v1/Systems/no-such-system", {"AssetTag": "x"})
    assert info.value.status == 428 and client.requests_made - before == 2  # PATCH, GET 404


def test_wait_power_times_out_with_the_state_seen(bmc):
    with pytest.raises(BMCStateTimeout, match="did not reach power state Paused"):
        bmc.wait_power(PowerState.PAUSED, 0.3)


def test_power_on_and_cycle_without_a_power_cycle_reset_type(bmc):
    # The emulator offers no PowerCycle: a cycle is done as ForceRestart.
    assert "PowerCycle" not in bmc.reset_types()
    bmc.power(PowerAction.ON)
    bmc.wait_power(PowerState.ON, 30)
    bmc.power(PowerAction.ON)  # already on: no-op
    bmc.power(PowerAction.CYCLE)
    bmc.wait_power(PowerState.ON, 30)
    bmc.power(PowerAction.OFF)  # applied by the emulator 1-11 s later; not waited for here


def test_bmc_without_virtual_media_says_so(tmp_path, iso_url):
    # The "minimum" feature set serves Systems only: no Managers, no virtual media.
    conf = write_emulator_config(tmp_path, [fake_system(UUID, "min", ["52:54:00:18:00:0b"])])
    with sushy_emulator(conf, extra_args=["--feature-set", "minimum"]) as url:
        b = open_redfish(url, "admin", Secret("unused"), ClientOptions(verify_tls=False))
        try:
            with pytest.raises(BMCUnsupported, match="no virtual CD/DVD drive"):
                b.insert_media(iso_url)
            with pytest.raises(BMCUnsupported, match="no Manager to set the clock"):
                b.set_clock()
            # No Manager, no NICs, no storage: still read, with what there is.
            facts = b.discover()
            assert facts.uuid == UUID and facts.power_state
            assert facts.bmc_datetime is None and facts.nics == [] and facts.drives == []
        finally:
            b.close()


def test_clock_skew_is_measured_and_fixed(bmc):
    bmc.set_clock(datetime(2020, 1, 1, tzinfo=UTC))
    skewed = bmc.discover()
    assert skewed.clock_skew_s is not None and skewed.clock_skew_s < -150_000_000
    assert bmc.set_clock() == pytest.approx(0, abs=5)
    assert abs(bmc.discover().clock_skew_s or 99) < 5
