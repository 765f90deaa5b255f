"""site.yml after an install: the hosts' new SSH host keys are pinned, then checked strictly."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from provisioner.inventory import load_site
from provisioner.lab.plan import LabPlan
from provisioner.workflow import configure
from provisioner.workflow.configure import KeyTarget, known_hosts_file, replace_known_hosts

OLD = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOL"
NEW = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEW"
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOTHEROTHEROTHEROTHEROTHEROTHEROTHEROTHERO"


@pytest.fixture
def lab_site(tmp_path: Path, write_lab_site: Callable[[LabPlan], LabPlan]) -> LabPlan:
    return write_lab_site(LabPlan(netns="plabk", state_dir=tmp_path / "state", inventory_dir=tmp_path))


def test_stale_entries_go_plain_or_hashed_and_others_stay(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(
        f"10.0.0.1 {OLD}\n"
        f"10.0.0.2 {OTHER}\n"
        f"[10.0.0.1]:2222 {OTHER}\n"
        f"10.0.0.10,10.0.0.1 {OTHER}\n"
        "# a comment\n"
    )
    # ssh-keygen -H hashes every name, as HashKnownHosts=yes would have written them.
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    replace_known_hosts(known, {"10.0.0.1": [f"10.0.0.1 {NEW}"]})
    lines = known.read_text().splitlines()
    assert lines[-1] == f"10.0.0.1 {NEW}"
    assert sum(OLD in line for line in lines) == 0
    # 10.0.0.2, port 2222 and 10.0.0.10 are other hosts (-H split the two-name line in two)
    assert sum(OTHER in line for line in lines) == 3
    assert "# a comment" in lines
    found = subprocess.run(
        ["ssh-keygen", "-F", "10.0.0.1", "-f", str(known)], capture_output=True, text=True
    )
    assert NEW.split()[1] in found.stdout and OLD.split()[1] not in found.stdout


def test_first_pin_creates_the_file(tmp_path):
    known = tmp_path / "ssh" / "known_hosts"
    replace_known_hosts(known, {"[10.0.0.5]:2200": [f"[10.0.0.5]:2200 {NEW}"]})
    assert known.read_text() == f"[10.0.0.5]:2200 {NEW}\n"
    assert KeyTarget("h", "10.0.0.5", 2200).known_hosts_name == "[10.0.0.5]:2200"
    assert KeyTarget("h", "10.0.0.5").known_hosts_name == "10.0.0.5"


def test_targets_are_the_addresses_ansible_uses(lab_site):
    site = load_site("lab", inventory_dir=lab_site.inventory_dir)
    targets = configure.key_targets(site, ["lab-host02"])
    assert targets == [
        KeyTarget("lab-host02", str(site.host("lab-host02").addresses["provisioning"]))
    ]
    assert known_hosts_file(site) == lab_site.ssh_dir / "known_hosts"


def test_playbook_runs_strictly_against_the_pinned_keys(lab_site, tmp_path, monkeypatch):
    site = load_site("lab", inventory_dir=lab_site.inventory_dir)
    addr = str(site.host("lab-host01").addresses["provisioning"])
    known = lab_site.ssh_dir / "known_hosts"
    known.write_text(f"{addr} {OLD}\n")
    scanned: list[KeyTarget] = []

    def fake_scan(target: KeyTarget, **_kw: object) -> list[str]:
        scanned.append(target)
        return [f"{target.address} {NEW}"] if target.host == "lab-host01" else []

    fake = tmp_path / "ansible-playbook"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" "timeout=$ANSIBLE_TIMEOUT"\n')
    fake.chmod(0o755)
    monkeypatch.delenv("ANSIBLE_TIMEOUT", raising=False)
    monkeypatch.setattr(configure, "scan_host_key", fake_scan)
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(fake))
    code, recaps, output = configure.run_playbook(site.path, ["lab-host01", "lab-host02"])
    assert code == 0 and recaps == {}
    assert sorted(t.host for t in scanned) == ["lab-host01", "lab-host02"]  # at once
    assert known.read_text() == f"{addr} {NEW}\n"
    assert output.startswith("host key not pinned: lab-host02: ssh-keyscan ")
    argv = output.splitlines()
    i = argv.index("--ssh-extra-args")
    assert argv[i + 1] == f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes"
    assert argv[argv.index("--limit") + 1] == "lab-host01,lab-host02"
    assert argv[-1] == "timeout=60"  # fresh hosts answer slowly; the caller's setting wins


def test_keyscan_retries_a_host_that_missed_the_deadline(monkeypatch):
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        out = "" if len(calls) < 2 else f"# 10.0.0.7:22 SSH-2.0-OpenSSH_9.2p1\n10.0.0.7 {NEW}\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(configure.subprocess, "run", fake_run)
    assert configure.scan_host_key(KeyTarget("h", "10.0.0.7")) == [f"10.0.0.7 {NEW}"]
    # a short deadline: a host that accepts the connection and never answers costs 2 x 10 s
    assert calls[0] == ["ssh-keyscan", "-T", "10", "-p", "22", "10.0.0.7"] and len(calls) == 2
    calls.clear()

    def silent(argv: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "")

    monkeypatch.setattr(configure.subprocess, "run", silent)
    assert configure.scan_host_key(KeyTarget("h", "10.0.0.7")) == []
    assert len(calls) == 2  # one retry, not more


def test_no_pinning_when_asked(lab_site, tmp_path, monkeypatch):
    site = load_site("lab", inventory_dir=lab_site.inventory_dir)
    fake = tmp_path / "ansible-playbook"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(configure.shutil, "which", lambda *_a, **_k: str(fake))
    monkeypatch.setattr(configure, "scan_host_key", lambda *_a, **_k: pytest.fail("scanned"))
    _, _, output = configure.run_playbook(site.path, ["lab-host01"], pin_keys=False)
    assert "--ssh-extra-args" not in output.splitlines()


def test_a_host_that_accepts_and_never_answers_fails_with_its_reason_after_one_retry(tmp_path):
    """The real ssh-keyscan against a loopback listener whose connections complete and never get
    a byte (a host whose sshd hangs): the reason after one retry; nothing pinned."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)  # the kernel completes each connection; nobody ever answers on it
    srv.setblocking(False)
    port = srv.getsockname()[1]

    def connections() -> int:
        """How many connections ssh-keyscan made since the last call (the queue drained)."""
        n = 0
        while True:
            try:
                conn, _ = srv.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    known = tmp_path / "known_hosts"
    target = KeyTarget("h", "127.0.0.1", port)
    with srv:
        # one attempt: ssh-keyscan connects once per key type
        assert configure.scan_host_key(target, timeout_s=1, attempts=1) == []
        per_attempt = connections()
        why = configure.pin_host_key(known, target, timeout_s=1)
        again = connections()
    assert why == (f"ssh-keyscan [127.0.0.1]:{port} gave no host key within 1 s (2 attempts): "
                   "SSH accepts connections but does not answer")
    assert per_attempt >= 1 and again == 2 * per_attempt  # one retry, not more
    assert not known.exists()
