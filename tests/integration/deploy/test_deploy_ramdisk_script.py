"""The ramdisk's deploy.sh under busybox, against fake disks (plain files) and the real HTTP server.

Covers the paths the VM test does not: a sha256 mismatch (the target's partition table is
cleared and the failure reported), no disk matching the hint (nothing written), and an image
that verifies but has no partition table. Data disks stay byte-for-byte unchanged in each case.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.deploy.embedded.gate import Admission
from provisioner.deploy.embedded.http import DeployServer
from provisioner.deploy.embedded.sessions import FAILED, START, VERIFIED, HostSession
from provisioner.deploy.ramdisk import FILES
from tests.support import machine
from tests.support.ramdisk_rig import busybox_bin, start_deploy
from tests.support.waiting import wait_until

MARKER = b"zfs-pool-member-do-not-touch" * 100
IMAGE = bytes(range(256)) * 8192  # 2 MiB, no partition table


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict]:
    machine.require_tools(["busybox"], "scripts/deps/50-deploy.list")
    busybox = shutil.which("busybox")
    assert busybox
    bindir = busybox_bin(busybox, tmp_path / "bin")
    for d, serial in (("vdy", "DATA-1"), ("vdz", "ROOT-1")):
        sysd = tmp_path / "sys/block" / d
        (sysd / "device").mkdir(parents=True)
        (sysd / "size").write_text(str(8 << 11) + "\n")  # 8 MiB
        (sysd / "serial").write_text(serial + "\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "vdy").write_bytes(MARKER)
    (dev / "vdz").write_bytes(b"\xaa" * (8 << 20))
    server = DeployServer(bind="127.0.0.1", port=0, public_url="")
    (tmp_path / "image.raw").write_bytes(IMAGE)
    server.files["images/test.raw"] = tmp_path / "image.raw"
    server.start()
    yield {"tmp": tmp_path, "server": server, "bin": bindir, "dev": dev}
    server.stop()


def run_deploy(rig: dict, *, sha: str, hint: str) -> tuple[HostSession, subprocess.CompletedProcess[str]]:
    server: DeployServer = rig["server"]
    tmp: Path = rig["tmp"]
    base = f"http://127.0.0.1:{server.port}"
    session = HostSession(host="h1", mac="52:54:00:00:00:01", method="image", ipxe_script="")
    server.register(session)
    env = {
        "DEPLOY_TOKEN": session.token.reveal(),
        "CALLBACK_URL": f"{base}/callback/h1",
        "IMAGE_URL": f"{base}/files/images/test.raw",
        "IMAGE_SHA256": sha,
        "IMAGE_SIZE": str(len(IMAGE)),
        "ROOT_PART": "",
        "SEED_URL": f"{base}/deploy/h1/seed",
        "HINT_ARGS": hint,
    }
    conf = tmp / "deploy.env"
    conf.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()))
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.run(
        [str(rig["bin"] / "sh"), str(FILES / "deploy.sh"), str(conf)],
        env={
            "PATH": f"{rig['bin']}:/usr/sbin:/usr/bin:/sbin:/bin",
            "DEVDIR": str(rig["dev"]),
            "SYSFS": str(tmp / "sys"),
            "TMPDIR": str(work),
            "DEPLOY_LOG": str(work / "deploy.log"),
            "PICK_DISK": str(FILES / "pick-disk.sh"),
            "DEPLOY_NO_SHELL": "1",
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return session, proc


def test_sha256_mismatch_clears_the_target_and_reports(rig: dict) -> None:
    session, proc = run_deploy(rig, sha="0" * 64, hint="--serial ROOT-1")
    assert START in session.reports, proc.stdout + proc.stderr
    log = session.reports[FAILED].log
    assert f"FAILED: image sha256 mismatch: expected {'0' * 64}, got {hashlib.sha256(IMAGE).hexdigest()}" in log
    assert "root disk: /dev/vdz" in log
    # streamed again from the ramdisk once (IMAGE_ATTEMPTS defaults to 2), then reported
    assert log.count("streaming the image again") == 1 and "(2/2)" in log
    target = (rig["dev"] / "vdz").read_bytes()
    # nothing of the unverified image stays: what the streams wrote is cleared, the first MiB
    # (never written) and the last (the backup GPT's place) are zero, the rest is as it was
    assert target[: len(IMAGE)] == bytes(len(IMAGE))
    assert target[len(IMAGE): 7 << 20] == b"\xaa" * ((7 << 20) - len(IMAGE))
    assert target[7 << 20:] == bytes(1 << 20)
    assert f"clearing the {len(IMAGE)} bytes the image streams wrote to /dev/vdz" in log
    assert (rig["dev"] / "vdy").read_bytes() == MARKER


def test_no_matching_disk_writes_nothing(rig: dict) -> None:
    session, _ = run_deploy(rig, sha=hashlib.sha256(IMAGE).hexdigest(), hint="--serial NOPE")
    log = session.reports[FAILED].log
    assert "FAILED: root disk hint: no disk matches the hint serial=NOPE; refusing to guess" in log
    assert "vdy serial=DATA-1" in log and "vdz serial=ROOT-1" in log
    assert (rig["dev"] / "vdz").read_bytes() == b"\xaa" * (8 << 20)
    assert (rig["dev"] / "vdy").read_bytes() == MARKER


def test_verified_image_is_written_to_the_hinted_disk_only(rig: dict) -> None:
    sha = hashlib.sha256(IMAGE).hexdigest()
    session, _ = run_deploy(rig, sha=sha, hint="--serial ROOT-1")
    log = session.reports[FAILED].log
    assert f"sha256 verified: {sha}" in log
    # this image has no partition table to grow: refused after the write, which is in place
    assert "FAILED: the image on /dev/vdz has no partition table" in log
    assert (rig["dev"] / "vdz").read_bytes()[: len(IMAGE)] == IMAGE
    assert (rig["dev"] / "vdy").read_bytes() == MARKER


# -- the image-stream gate: deploy.sh waits its turn on 503 ----------------------------------


def gated_host(rig: dict, server: DeployServer, host: str, extra: dict[str, str]) -> tuple[HostSession, subprocess.Popen[str], Path]:
    """Start deploy.sh for ``host`` on its own fake disks against ``server`` (not waited for)."""
    root: Path = rig["tmp"] / host
    session = HostSession(host=host, mac="52:54:00:00:00:01", method="image", ipxe_script="")
    proc = start_deploy(rig["bin"], server, session, root, hashlib.sha256(IMAGE).hexdigest(),
                        conf=extra, image_size=len(IMAGE))
    return session, proc, root


def gated_server(rig: dict, hold_s: float) -> DeployServer:
    server = DeployServer(bind="127.0.0.1", port=0, public_url="", max_image_streams=1,
                          retry_after_s=1, hold_s=hold_s)
    server.files["images/test.raw"] = rig["tmp"] / "image.raw"
    server.gated_files.add("images/test.raw")
    server.start()
    return server


@pytest.fixture
def gated(rig: dict) -> Iterator[DeployServer]:
    """No hold: busy answers are plain 503s (the server's hold slots full, or an older server)."""
    server = gated_server(rig, hold_s=0)
    yield server
    server.stop()


@pytest.fixture
def held(rig: dict) -> Iterator[DeployServer]:
    """The default server: busy requests wait in it. A 60 s hold, so that a stream not handed
    over at once shows as a busy answer in the host's log."""
    server = gated_server(rig, hold_s=60)
    yield server
    server.stop()


def test_two_hosts_one_stream_both_finish_in_ticket_order(rig: dict, gated: DeployServer) -> None:
    gate = gated.gate
    assert gate is not None
    admitted: list[str] = []
    real_admit = gate.try_admit

    def spy(key: str, **kw: Any) -> Admission:
        a = real_admit(key, **kw)
        if a.admitted:
            admitted.append(key)
        return a

    gate.try_admit = spy  # type: ignore[method-assign]
    # the only stream is busy at first, so that both hosts meet a 503 whatever the timing
    assert real_admit("host holder").admitted
    sa, pa, ra = gated_host(rig, gated, "ha", {})
    wait_until(lambda: "host ha" in gate.waiting(), "ha's first 503")
    sb, pb, rb = gated_host(rig, gated, "hb", {})
    wait_until(lambda: "host hb" in gate.waiting(), "hb's first 503")
    gate.release("host holder")
    out_a, _ = pa.communicate(timeout=120)
    out_b, _ = pb.communicate(timeout=120)
    sha = hashlib.sha256(IMAGE).hexdigest()
    for session, root, out in ((sa, ra, out_a), (sb, rb, out_b)):
        log = session.reports[FAILED].log
        assert "image streams busy (503): retrying every 1s" in log, out
        assert "image stream admitted after" in log, out
        assert f"sha256 verified: {sha}" in log, out
        assert (root / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE
        # the fake disk's image has no partition table: that is where these runs stop
        assert "FAILED: the image on /dev/vdz has no partition table" in log
    assert admitted == ["host ha", "host hb"]  # first asked, first served
    assert gate.active == 0


def test_host_gives_up_after_image_wait_and_reports_it(rig: dict, gated: DeployServer) -> None:
    assert gated.gate is not None and gated.gate.try_admit("host holder").admitted  # never freed
    session, proc, root = gated_host(rig, gated, "hc", {"IMAGE_WAIT_S": "2"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    log = session.reports[FAILED].log
    assert "FAILED: the deploy server's image streams stayed busy (503) for over 2s" in log
    assert "settings.embedded.max_image_streams" in log
    assert (root / "dev/vdz").read_bytes() == b"\xaa" * (8 << 20)  # nothing written


def admitted_hosts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split("(host ")[1].split(")")[0] for r in caplog.records
            if "admitted for" in r.getMessage()]


def test_second_host_gets_the_stream_the_moment_the_first_finishes(
    rig: dict, held: DeployServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="provisioner.deploy.http")
    gate = held.gate
    assert gate is not None and gate.try_admit("host holder").admitted
    sa, pa, ra = gated_host(rig, held, "ha", {})
    wait_until(lambda: gate.stats().held == 1, "ha to wait in the server")
    sb, pb, rb = gated_host(rig, held, "hb", {})
    wait_until(lambda: gate.stats().held == 2, "hb to wait in the server")
    gate.release("host holder")
    out_a, _ = pa.communicate(timeout=120)
    out_b, _ = pb.communicate(timeout=120)
    sha = hashlib.sha256(IMAGE).hexdigest()
    for session, root, out in ((sa, ra, out_a), (sb, rb, out_b)):
        log = session.reports[FAILED].log
        # one request each, answered with the stream: no busy answer, no retry
        assert "busy" not in log, out
        assert f"sha256 verified: {sha}" in log, out
        assert (root / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE
        assert "FAILED: the image on /dev/vdz has no partition table" in log
    assert admitted_hosts(caplog) == ["ha", "hb"]  # first asked, first served
    assert gate.active == 0 and gate.stats().admitted == 3


def test_a_held_503_is_asked_again_at_once(rig: dict, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="provisioner.deploy.http")
    server = gated_server(rig, hold_s=0.3)  # holds run out while the stream stays taken
    try:
        gate = server.gate
        assert gate is not None and gate.try_admit("host holder").admitted
        session, proc, root = gated_host(rig, server, "hc", {"IMAGE_RETRY_S": "30"})
        # two held 503s: hc asked again after the first without its 30 s retry wait
        wait_until(lambda: sum("after a hold" in r.getMessage() for r in caplog.records) >= 2,
                   "hc's second held 503")
        gate.release("host holder")
        out, _ = proc.communicate(timeout=60)  # with a 30 s retry it would take far longer
        log = session.reports[FAILED].log
        assert "image streams busy: queued at the server" in log, out
        assert "image stream admitted after" in log, out
        assert "retrying every" not in log, out
        assert (root / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE
    finally:
        server.stop()


def test_a_corrupt_stream_is_streamed_again_and_then_verifies(
    rig: dict, held: DeployServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = rig["tmp"] / "image.raw"
    bad = rig["tmp"] / "corrupt.raw"
    bad.write_bytes(IMAGE[:-1] + b"\x00")  # one byte off: the sha256 cannot match
    held.files["images/test.raw"] = bad
    sent = []
    real = HostSession.image_sent

    def then_good(self: HostSession) -> None:  # the next stream is sound
        sent.append(self.image_streams)
        held.files["images/test.raw"] = good
        real(self)

    monkeypatch.setattr(HostSession, "image_sent", then_good)
    session, proc, root = gated_host(rig, held, "hr", {})
    out, _ = proc.communicate(timeout=120)
    log = session.reports[FAILED].log
    assert "image sha256 mismatch" in log and "streaming the image again (2/2)" in log, out
    assert f"sha256 verified: {hashlib.sha256(IMAGE).hexdigest()}" in log, out
    assert (root / "dev/vdz").read_bytes()[: len(IMAGE)] == IMAGE
    assert "FAILED: the image on /dev/vdz has no partition table" in log  # the fake disk's end
    # the server sent two whole streams, then the host's "verified" report confirmed the second
    assert sent == [1, 2, 2] and session.image_streams == 2 and session.image_sent_at is not None
    assert VERIFIED in session.reports


def _refusing(monkeypatch: pytest.MonkeyPatch, kind: str, status: int, times: int) -> list[int]:
    """The server answers ``status`` to the first ``times`` reports of ``kind``; returns the
    statuses it answered, one per report that reached it."""
    from provisioner.deploy.embedded.sessions import CallbackRefused

    answered: list[int] = []
    real = HostSession.report

    def report(self: HostSession, k: str, *args: Any, **kwargs: Any) -> None:
        if k == kind and len(answered) < times:
            answered.append(status)
            raise CallbackRefused(status, "refused by the test")
        if k == kind:
            answered.append(200)
        real(self, k, *args, **kwargs)

    monkeypatch.setattr(HostSession, "report", report)
    return answered


def test_a_report_refused_with_503_is_sent_again(rig: dict,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # stand-in for the server's connection limit, or any passing server error
    answered = _refusing(monkeypatch, START, 503, times=2)
    session, proc = run_deploy(rig, sha=hashlib.sha256(IMAGE).hexdigest(), hint="--serial ROOT-1")
    assert answered == [503, 503, 200], proc.stdout
    assert START in session.reports and "callback started failed" not in proc.stdout


def test_a_report_refused_with_4xx_is_not_sent_again(rig: dict,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    answered = _refusing(monkeypatch, START, 409, times=5)
    session, proc = run_deploy(rig, sha=hashlib.sha256(IMAGE).hexdigest(), hint="--serial ROOT-1")
    assert answered == [409], proc.stdout  # a replay or a bad token: asking again cannot help
    assert "callback started failed: " in proc.stdout and "409" in proc.stdout
    assert START not in session.reports and FAILED in session.reports  # the deploy went on
