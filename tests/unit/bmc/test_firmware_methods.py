"""Which way a firmware image goes to each recorded BMC (SimpleUpdate, multipart push, raw
HttpPushUri push), with which Targets, apply time and protocol: the UpdateService (and its
SimpleUpdate ActionInfo) of real recordings, and of variations written by the project."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.bmc.firmware_methods import (
    GENERIC,
    Method,
    NoUpdateMethod,
    UpdateService,
    choose,
    parse_update_service,
)
from provisioner.bmc.redfish_bmc.firmware import RedfishFirmwareUpdate
from provisioner.bmc.vendors import vendor_class
from provisioner.bmc.vendors.dell import DellBMC
from provisioner.bmc.vendors.hpe import HpeBMC
from provisioner.redfish.errors import BMCJobFailed
from tests.conftest import corpus_path

HTTP = "http://10.0.0.5:8089/firmware/abc/image.bin"
FW = "/redfish/v1/UpdateService/FirmwareInventory"


def _mockup(name: str) -> Path:
    base = corpus_path("redfish", name, "mockup")
    return base / "redfish" / "v1" if (base / "redfish").is_dir() else base


def service_of(name: str) -> UpdateService:
    """A recording's UpdateService, with its SimpleUpdate ActionInfo where recorded."""
    root = _mockup(name)
    body = json.loads((root / "UpdateService" / "index.json").read_text())
    action = body.get("Actions", {}).get("#UpdateService.SimpleUpdate", {})
    info = None
    if "@Redfish.ActionInfo" in action:
        rel = action["@Redfish.ActionInfo"].removeprefix("/redfish/v1/").strip("/")
        info = json.loads(corpus_path(*(root / rel / "index.json").relative_to(
            corpus_path()).parts).read_text())
    return parse_update_service("/redfish/v1/UpdateService", body, info)


def variation(name: str) -> dict[str, Any]:
    return json.loads(corpus_path("redfish", "project-firmware-update-variations",
                                  name).read_text())


def quirks(vendor: str) -> Any:
    return vendor_class(vendor).firmware_quirks


@pytest.mark.parametrize("recording", ["dell-idrac9-poweredge-r750-ib-libredfish",
                                       "dell-idrac9-r750-two-dpu-libredfish"])
def test_dell_simpleupdate_without_targets_bios_staged_on_reset(recording):
    svc = service_of(recording)
    assert svc.multipart_uri == "/redfish/v1/UpdateService/MultipartUpload"
    bios = choose(svc, image_url=HTTP, target=f"{FW}/Installed-159-1.8.2__BIOS.Setup.1-1",
                  at_reset=True, quirks=quirks("dell"))
    assert (bios.method, bios.targets, bios.apply_time, bios.protocol) == (
        Method.SIMPLE, (), "OnReset", "HTTP")
    idrac = choose(svc, image_url=HTTP, target=f"{FW}/Installed-25227-6.00.30.00__iDRAC"
                   ".Embedded.1-1", quirks=quirks("dell"))
    assert (idrac.method, idrac.targets, idrac.apply_time) == (Method.SIMPLE, (), "Immediate")
    # Served over a protocol iDRAC does not fetch: the DUP is pushed, still untargeted,
    # OnReset (taken though not listed), with the empty Oem object iDRAC wants.
    ftp = choose(svc, image_url="ftp://10.0.0.5/i.exe", target=f"{FW}/x", at_reset=True,
                 kind="bios", quirks=quirks("dell"))
    assert (ftp.method, ftp.uri, ftp.targets, ftp.apply_time, ftp.parameters) == (
        Method.MULTIPART, "/redfish/v1/UpdateService/MultipartUpload", (), "OnReset",
        {"Oem": {}})
    # A generic BMC with the same service gets no apply time the service does not list.
    assert choose(svc, image_url="ftp://x/y", target=f"{FW}/x", at_reset=True).apply_time is None


@pytest.mark.parametrize("recording", ["hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish",
                                       "hpe-ilo5-proliant-dl325-gen10plus-csm",
                                       "hpe-ilo5-proliant-xl675d-gen10plus-a100-csm"])
def test_hpe_ilo5_simpleupdate_and_never_its_form_upload(recording):
    svc = service_of(recording)
    assert svc.push_uri == "/cgi-bin/uploadFile"
    req = choose(svc, image_url=HTTP, target=f"{FW}/3", at_reset=True, quirks=quirks("hpe"))
    assert (req.method, req.targets, req.apply_time, req.protocol) == (
        Method.SIMPLE, (), None, "HTTP")
    with pytest.raises(NoUpdateMethod, match="not the DMTF push"):
        choose(svc, image_url="ftp://10.0.0.5/x.fwpkg", target=f"{FW}/3", quirks=quirks("hpe"))
    # Without the quirk the same service would be sent a raw push it cannot take.
    assert choose(svc, image_url="ftp://x/y", target=f"{FW}/3").method is Method.HTTP_PUSH


def test_lenovo_xcc_targets_only_the_backup_bank_it_lists():
    svc = service_of("lenovo-xcc-sr670v2-libredfish")
    assert svc.simple_targets == (f"{FW}/BMC-Backup",)
    uefi = choose(svc, image_url=HTTP, target=f"{FW}/UEFI", at_reset=True,
                  quirks=quirks("lenovo"))
    assert (uefi.method, uefi.targets, uefi.protocol) == (Method.SIMPLE, (), "HTTP")
    backup = choose(svc, image_url=HTTP, target=f"{FW}/BMC-Backup", quirks=quirks("lenovo"))
    assert backup.targets == (f"{FW}/BMC-Backup",)
    # Served over a protocol XCC does not fetch: pushed to /mfwupdate, Immediate.
    ftp = choose(svc, image_url="ftp://10.0.0.5/x.uxz", target=f"{FW}/UEFI",
                 quirks=quirks("lenovo"))
    assert (ftp.method, ftp.uri, ftp.targets, ftp.apply_time) == (
        Method.MULTIPART, "/mfwupdate", (), "Immediate")
    # The generic reading of the same ActionInfo would push the UEFI image with Targets.
    assert choose(svc, image_url=HTTP, target=f"{FW}/UEFI").method is Method.MULTIPART


def test_supermicro_pushes_with_its_targets_and_preserve_options():
    svc = service_of("supermicro-sys-821ge-tnhr-hgx-h100-libredfish")
    sm = quirks("supermicro")
    bmc = choose(svc, image_url=HTTP, target=f"{FW}/BMC", kind="bmc", quirks=sm)
    assert (bmc.method, bmc.uri, bmc.targets, bmc.apply_time) == (
        Method.MULTIPART, "/redfish/v1/UpdateService/upload", ("/redfish/v1/Managers/1",),
        "Immediate")
    assert bmc.parameters["Oem"]["Supermicro"]["BMC"]["PreserveCfg"] is True
    bios = choose(svc, image_url=HTTP, target=f"{FW}/BIOS", kind="bios", at_reset=True,
                  quirks=sm)
    assert bios.targets == ("/redfish/v1/Systems/1/Bios",)
    assert bios.parameters["Oem"]["Supermicro"]["BIOS"]["PreserveNVRAM"] is True
    gpu = choose(svc, image_url=HTTP, target=f"{FW}/HGX_FW_GPU_SXM_1", quirks=sm)
    assert (gpu.method, gpu.targets, gpu.parameters) == (
        Method.MULTIPART, (f"{FW}/HGX_FW_GPU_SXM_1",), {})


def test_supermicro_simpleupdate_targets_from_its_actioninfo():
    # Read generically (or with the push refused), its SimpleUpdate ActionInfo decides.
    svc = service_of("supermicro-sys-821ge-tnhr-hgx-h100-libredfish")
    assert svc.protocols == ("HTTP", "HTTPS", "FTP")
    for member in ("BIOS", "BMC", "HGX_FW_GPU_SXM_1", "HGX_FW_NVSwitch_3",
                   "CPLD_Backplane_1"):  # the last one by its listed pattern
        req = choose(svc, image_url=HTTP, target=f"{FW}/{member}")
        assert (req.method, req.targets) == (Method.SIMPLE, (f"{FW}/{member}",)), member
    nic = choose(svc, image_url=HTTP, target=f"{FW}/NIC1")
    assert (nic.method, nic.uri, nic.targets) == (
        Method.MULTIPART, "/redfish/v1/UpdateService/upload", (f"{FW}/NIC1",))
    big = choose(svc, image_url=HTTP, target=f"{FW}/BIOS", kind="bios",
                 quirks=quirks("supermicro"), image_size=1 << 40)
    assert big.method is Method.MULTIPART  # no MaxImageSizeBytes stated: no limit


def test_dgx_h100_pushes_hgx_components_with_targets():
    svc = service_of("nvidia-dgx-h100-libredfish")
    assert svc.simple_targets == ()  # its SimpleUpdate ActionInfo has no Targets parameter
    for member in ("HGX_FW_GPU_SXM_1", "HGX_FW_BMC_0", "HostBIOS_0"):
        req = choose(svc, image_url=HTTP, target=f"{FW}/{member}", at_reset=True,
                     quirks=quirks("nvidia"))
        assert (req.method, req.uri, req.targets, req.apply_time) == (
            Method.MULTIPART, "/redfish/v1/UpdateService/upload", (f"{FW}/{member}",), None)
    # An image larger than MaxImageSizeBytes cannot be pushed: SimpleUpdate, untargeted.
    big = choose(svc, image_url=HTTP, image_size=500_000_000, target=f"{FW}/HGX_FW_BMC_0")
    assert (big.method, big.untargeted) == (Method.SIMPLE, True)


@pytest.mark.parametrize("recording", ["nvidia-gb200-nvl-tray-libredfish",
                                       "nvidia-gh200-libredfish"])
def test_gb200_gh200_have_no_simpleupdate_multipart_immediate(recording):
    svc = service_of(recording)
    assert svc.simple_update is None
    gpu = choose(svc, image_url=HTTP, target=f"{FW}/HGX_FW_GPU_0", quirks=quirks("nvidia"))
    assert (gpu.method, gpu.uri, gpu.targets, gpu.apply_time) == (
        Method.MULTIPART, "/redfish/v1/UpdateService/update-multipart",
        (f"{FW}/HGX_FW_GPU_0",), "Immediate")
    uefi = choose(svc, image_url=HTTP, target=f"{FW}/UEFI", at_reset=True)
    assert uefi.apply_time is None  # OnReset is not offered for the multipart push


def test_bluefield3_simpleupdate_with_targets():
    svc = service_of("nvidia-bluefield3-dpu-bmc-libredfish")
    req = choose(svc, image_url=HTTP, target=f"{FW}/DPU_OS", quirks=quirks("nvidia"))
    assert (req.method, req.targets, req.protocol) == (Method.SIMPLE, (f"{FW}/DPU_OS",), "HTTP")


def test_a_service_that_cannot_target_gets_the_image_untargeted():
    dmtf = service_of("dmtf-public-rackmount1")  # ActionInfo without Targets, no push targets
    req = choose(dmtf, image_url=HTTP, target=f"{FW}/BMC")
    assert (req.method, req.targets, req.untargeted) == (Method.SIMPLE, (), True)
    assert "no Targets" in req.describe()
    gigabyte = service_of("gigabyte-h262-z63-ami-csm")  # AMI: HTTP and FTP only, no push
    assert choose(gigabyte, image_url=HTTP, target=f"{FW}/BMC").untargeted
    with pytest.raises(NoUpdateMethod) as err:
        choose(gigabyte, image_url="https://10.0.0.5/x.bin", target=f"{FW}/BMC")
    assert "only over HTTP, FTP, not HTTPS" in str(err.value)
    assert "no MultipartHttpPushUri" in str(err.value) and "no HttpPushUri" in str(err.value)


def test_sushy_sample_pushes_with_httppushuritargets():
    body = json.loads(corpus_path("redfish", "sushy-unit-test-json-samples", "json_samples",
                                  "updateservice.json").read_text())
    svc = parse_update_service("/redfish/v1/UpdateService", body)
    assert svc.push_targets and svc.push_uri == "/FWUpdate"
    # No TransferProtocol stated (its ActionInfo is not in the samples): SimpleUpdate first.
    req = choose(svc, image_url="ftp://x/y", target=f"{FW}/BMC")
    assert (req.method, req.targets, req.protocol) == (Method.SIMPLE, (f"{FW}/BMC",), None)
    push = choose(replace(svc, simple_update=None), image_url=HTTP, target=f"{FW}/BMC")
    assert (push.method, push.targets) == (Method.HTTP_PUSH, (f"{FW}/BMC",))


def test_variation_ftp_only_simpleupdate_pushes_multipart_with_apply_time():
    svc = parse_update_service("/redfish/v1/UpdateService",
                               variation("updateservice-ftp-only-simpleupdate.json"))
    req = choose(svc, image_url=HTTP, image_size=1 << 20, target=f"{FW}/BIOS", at_reset=True)
    assert (req.method, req.targets, req.apply_time) == (
        Method.MULTIPART, (f"{FW}/BIOS",), "OnReset")
    with pytest.raises(NoUpdateMethod, match="exceeds MaxImageSizeBytes"):
        choose(svc, image_url=HTTP, image_size=1 << 30, target=f"{FW}/BIOS")


def test_variation_httppush_only_targets_and_apply_time():
    svc = parse_update_service("/redfish/v1/UpdateService",
                               variation("updateservice-httppush-only.json"))
    req = choose(svc, image_url=HTTP, target=f"{FW}/NIC.Slot.1", at_reset=True)
    assert (req.method, req.uri, req.targets, req.apply_time) == (
        Method.HTTP_PUSH, "/redfish/v1/UpdateService/FirmwareImage", (f"{FW}/NIC.Slot.1",),
        "OnReset")


class _Tasks:
    """A BMC whose task answers with recorded payloads in turn (the client's get only)."""

    def __init__(self, bodies: list[dict[str, Any]], cls: type = object) -> None:
        self.bodies, self.name = bodies, "bmc1"
        self.client = self
        self.firmware_quirks = cls.firmware_quirks if cls is not object else GENERIC

    def get(self, path: str) -> dict[str, Any]:
        return self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]


def _updates(bmc: _Tasks) -> RedfishFirmwareUpdate:
    return RedfishFirmwareUpdate(bmc, sleep=lambda s: None)  # type: ignore[arg-type]


def _wait(bmc: _Tasks, **kw: Any) -> str:
    return _updates(bmc).wait_update_task("/t", timeout_s=5, poll_s=0, **kw)


def test_task_payloads_real_and_written():
    dgx_failed = json.loads((_mockup("nvidia-dgx-h100-libredfish") / "TaskService" / "Tasks"
                             / "3" / "index.json").read_text())
    with pytest.raises(BMCJobFailed, match="ForceRestart' is unsuccessful"):
        _wait(_Tasks([dgx_failed]))
    sushy = corpus_path("redfish", "sushy-unit-test-json-samples", "json_samples")
    pending = json.loads((sushy / "task2.json").read_text())
    done = json.loads((sushy / "task.json").read_text())
    assert _wait(_Tasks([pending]), until_staged=True) == "staged"
    assert _wait(_Tasks([pending, pending, done])) == "completed"
    scheduled = variation("task-dell-scheduled.json")
    assert _wait(_Tasks([scheduled], DellBMC), until_staged=True) == "staged"
    with pytest.raises(Exception, match="still Running"):  # not staged for a generic BMC
        _updates(_Tasks([scheduled])).wait_update_task("/t", timeout_s=0, poll_s=0,
                                                       until_staged=True)
    with pytest.raises(BMCJobFailed, match="Verification of image"):
        _wait(_Tasks([variation("task-pushed-image-refused.json")]))


def test_ilo_update_without_task_waits_on_its_oem_state():
    svc = service_of("hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish")
    idle = json.loads((_mockup("hpe-ilo5-proliant-dl385-gen10plus-v2-libredfish")
                       / "UpdateService" / "index.json").read_text())
    writing = {**idle, "Oem": {"Hpe": {**idle["Oem"]["Hpe"], "State": "Writing"}}}
    bmc = _Tasks([writing, writing, idle], HpeBMC)
    _updates(bmc).wait_untasked_update(svc, timeout_s=5, poll_s=0)
    assert bmc.bodies == [idle]  # it kept asking until iLO was idle again
    with pytest.raises(BMCJobFailed, match="UpdateBadParameter"):
        _updates(_Tasks([variation("updateservice-ilo-flash-error.json")], HpeBMC)
                 ).wait_untasked_update(svc, timeout_s=5, poll_s=0)
    # Other vendors' services have no such report: nothing is read.
    generic = _Tasks([writing, idle])
    _updates(generic).wait_untasked_update(svc, timeout_s=5, poll_s=0)
    assert generic.bodies == [writing, idle]


def test_a_push_uri_given_as_a_url_stays_on_the_bmc():
    body = variation("updateservice-ftp-only-simpleupdate.json")
    body["MultipartHttpPushUri"] = "https://elsewhere.example:8443/upload?x=1"
    svc = parse_update_service("/redfish/v1/UpdateService", body)
    assert svc.multipart_uri == "/upload?x=1"


_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)
_keys = st.sampled_from([
    "Actions", "MultipartHttpPushUri", "HttpPushUri", "HttpPushUriTargets",
    "HttpPushUriOptions", "MaxImageSizeBytes",
    "MultipartHttpPushUri@Redfish.OperationApplyTimeSupport"])


@settings(max_examples=150, deadline=None)
@given(body=st.dictionaries(_keys, _json_value, max_size=6),
       info=st.none() | st.dictionaries(st.just("Parameters"), _json_value, max_size=1),
       target=st.none() | st.text(min_size=1, max_size=20))
def test_any_service_document_gives_a_way_or_says_why(body, info, target):
    """Whatever a BMC's UpdateService and ActionInfo hold, choosing either gives a request
    or NoUpdateMethod, never another error."""
    svc = parse_update_service("/redfish/v1/UpdateService", body, info)
    for quirk in (GENERIC, quirks("dell"), quirks("hpe"), quirks("supermicro")):
        try:
            req = choose(svc, image_url=HTTP, image_size=1000, target=target, quirks=quirk)
        except NoUpdateMethod as exc:
            assert str(exc)
        else:
            assert req.uri.startswith("/") and not req.uri.startswith("//")
