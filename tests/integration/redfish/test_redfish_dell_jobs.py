"""The iDRAC job queue, against the recorded R750 mockup with job states edited in a temp copy.

The copy (never committed) gains a Managers/iDRAC.Embedded.1/Jobs collection holding a BIOS job
that stays Scheduled and one that Failed, as a real iDRAC's queue can.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.bmc.base import BootTarget
from provisioner.bmc.factory import open_redfish
from provisioner.bmc.vendors.dell import DellBMC
from provisioner.inventory import NicRule
from provisioner.redfish.client import ClientOptions
from provisioner.redfish.errors import BMCJobFailed, BMCStateTimeout, BMCVerifyFailed
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import sushy_static
from provisioner.workflow.nic_choice import NicPolicy
from tests.conftest import corpus_path

JOBS = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"


def _job(jid: str, state: str, message: str) -> dict:
    return {"@odata.id": f"{JOBS}/{jid}", "Id": jid, "Name": "ConfigBIOS:BIOS.Setup.1-1",
            "JobType": "BIOSConfiguration", "JobState": state, "PercentComplete": 0,
            "Messages": [{"Message": message, "MessageId": "IDRAC.2.7.SYS053"}]}


def _write(path: Path, doc: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "index.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def idrac(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The edited mockup served by sushy-static; yields its URL and its request log."""
    src = corpus_path("redfish", "dell-idrac9-poweredge-r750-ib-libredfish", "mockup",
                      "redfish", "v1")
    root = tmp_path_factory.mktemp("idrac")
    mockup = root / "v1"
    shutil.copytree(src, mockup)
    jobs = mockup / "Managers" / "iDRAC.Embedded.1" / "Jobs"
    _write(jobs, {"@odata.id": JOBS, "Members": [{"@odata.id": f"{JOBS}/JID_100"},
                                                 {"@odata.id": f"{JOBS}/JID_200"}]})
    _write(jobs / "JID_100", _job("JID_100", "Scheduled", "Task successfully scheduled."))
    _write(jobs / "JID_200", _job("JID_200", "Failed", "Unable to apply the BIOS settings."))
    with sushy_static(mockup, root) as url:
        yield url, root / f"static-{url.rsplit(':', 1)[1]}.log"


def _open(url: str) -> DellBMC:
    bmc = open_redfish(url, "root", Secret("calvin"), ClientOptions(verify_tls=False, retries=0),
                       boot_port=NicPolicy(rule=NicRule(port_id="NIC.Embedded.1-1-1")).choose)
    assert isinstance(bmc, DellBMC)
    bmc.poll_interval_s = 0.05
    return bmc


def test_scheduled_bios_job_that_never_runs_times_out(idrac):
    url, log = idrac
    bmc = _open(url)
    bmc.job_timeout_s = 0.5
    try:
        with pytest.raises(BMCStateTimeout, match="BIOS job JID_100 still Scheduled"):
            bmc.set_boot(BootTarget.PXE)
    finally:
        bmc.close()
    sent = log.read_text()
    # Only what differs is sent: PxeDev1Interface already names the Embedded port.
    assert '{"Attributes": {"PxeDev1EnDis": "Enabled"}' in sent
    assert "PxeDev1Interface" not in sent
    assert '"ApplyTime": "OnReset"' in sent
    assert "TargetSettingsURI" in sent  # the PATCH made no job: one was created
    assert '"ResetType": "ForceRestart"' in sent  # the host was on: restarted to run it


def test_failed_job_carries_the_idrac_message(idrac):
    bmc = _open(idrac[0])
    try:
        with pytest.raises(BMCJobFailed, match="Unable to apply the BIOS settings") as info:
            bmc._wait_job(f"{JOBS}/JID_200")
        assert info.value.reason == "job failed"
    finally:
        bmc.close()


def test_vanished_job_id_is_judged_by_the_attributes(idrac, monkeypatch):
    url, log = idrac
    bmc = _open(url)
    bmc.job_timeout_s = 3600  # a vanished job must not be waited for
    # The PATCH is sent to the real peer; the job it "created" is one neither queue knows.
    monkeypatch.setattr(bmc, "_create_job", lambda settings: f"{JOBS}/JID_GONE")
    before = len(log.read_text())
    try:
        # sushy-static never applies the PATCH: read-back of the attributes is the verdict.
        with pytest.raises(BMCVerifyFailed, match="PxeDev1EnDis"):
            bmc.set_boot(BootTarget.PXE)
    finally:
        bmc.close()
    sent = log.read_text()[before:]
    # Both job queues were asked about the job before it was judged vanished.
    assert f"GET {JOBS}/JID_GONE " in sent
    assert "GET /redfish/v1/JobService/Jobs/JID_GONE " in sent


def test_http_boot_names_the_port_in_httpdev1(idrac):
    # HttpDev1 is already Enabled but on NIC.Slot.5-1 in the recording: only the port changes.
    url, log = idrac
    before = len(log.read_text())
    bmc = _open(url)
    bmc.job_timeout_s = 0.2
    try:
        with pytest.raises(BMCStateTimeout):
            bmc.set_boot(BootTarget.HTTP)
    finally:
        bmc.close()
    sent = log.read_text()[before:]
    assert '{"Attributes": {"HttpDev1Interface": "NIC.Embedded.1-1-1"}' in sent


def test_port_already_enabled_means_no_bios_job_and_no_reboot(tmp_path):
    src = corpus_path("redfish", "dell-idrac9-poweredge-r750-ib-libredfish", "mockup",
                      "redfish", "v1")
    mockup = tmp_path / "v1"
    shutil.copytree(src, mockup)
    bios = mockup / "Systems" / "System.Embedded.1" / "Bios" / "index.json"
    doc = json.loads(bios.read_text())
    doc["Attributes"]["PxeDev1EnDis"] = "Enabled"
    bios.write_text(json.dumps(doc))
    with sushy_static(mockup, tmp_path) as url:
        bmc = _open(url)
        try:
            with pytest.raises(BMCVerifyFailed, match="BootSourceOverrideTarget"):
                bmc.set_boot(BootTarget.PXE)  # the static mockup never applies the override
        finally:
            bmc.close()
        sent = (tmp_path / f"static-{url.rsplit(':', 1)[1]}.log").read_text()
    assert "Attributes" not in sent and "ResetType" not in sent
    assert '"BootSourceOverrideTarget": "Pxe"' in sent
