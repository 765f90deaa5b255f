"""`verify_tls: false` warns per host on every command that opens that BMC; `inventory check`
finds missing or unreadable CA bundles and secret files, naming the key, the host and the fix."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode, InventoryError, ProvisionerError
from provisioner.inventory import load_site
from provisioner.workflow import bmc_access as factory

REPO = Path(__file__).resolve().parents[3]
CA = (REPO / "inventory/example/bmc-ca.pem").read_text()
runner = CliRunner()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_site(tmp_path: Path, *, redfish: str = "", host_bmc: str = "", password: str = "{env: H14_PW}",
               extra: str = "") -> Path:
    port = closed_port()
    d = tmp_path / "site"
    d.mkdir(exist_ok=True)
    (d / "site.yml").write_text(f"""\
site: tls
settings:
  redfish: {{timeout_s: 1, retries: 0{redfish}}}
credentials:
  bmc: {{username: root, password: {password}}}
profiles:
  p: {{gpus: 8, provisioning_nic: {{port_id: NIC.1}}}}
racks:
  - name: r1
    index: 1
    hosts:
      - {{name: h1, u: 1, profile: p, bmc: {{address: 127.0.0.1, port: {port}, credentials: bmc{host_bmc}}}}}
      - {{name: h2, u: 3, profile: p, bmc: {{address: 127.0.0.2, port: {port}, credentials: bmc}}}}
{extra}""")
    return d / "site.yml"


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("H14_PW", "canary-pw-14")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    factory._warned.clear()


def test_unverified_tls_warns_once_per_host(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    site = load_site(write_site(tmp_path, redfish=", verify_tls: false"))
    caplog.set_level(logging.WARNING)
    for _ in range(2):
        for host in site.hosts:
            with pytest.raises(ProvisionerError):
                factory.open_bmc(site, host)  # nothing listens: the login fails after the warning
    warnings = [r.getMessage() for r in caplog.records if "NOT verified" in r.getMessage()]
    assert len(warnings) == 2
    assert warnings[0].startswith("warning: h1: TLS certificate of BMC https://127.0.0.1:")
    assert warnings[1].startswith("warning: h2: ")
    assert all("canary-pw-14" not in w for w in warnings)


def test_verified_hosts_do_not_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "ca.pem").write_text(CA)
    site = load_site(write_site(tmp_path, redfish=f", ca_bundle: {tmp_path / 'ca.pem'}",
                                host_bmc=", verify_tls: false"))
    caplog.set_level(logging.WARNING)
    for host in site.hosts:
        with pytest.raises(ProvisionerError):
            factory.open_bmc(site, host)
    warnings = [r.getMessage() for r in caplog.records if "NOT verified" in r.getMessage()]
    assert [w.split(":")[1].strip() for w in warnings] == ["h1"]


def test_discover_prints_the_warning_for_each_host(tmp_path: Path) -> None:
    site = write_site(tmp_path, redfish=", verify_tls: false")
    proc = subprocess.run(
        [sys.executable, "-m", "provisioner.cli.main", "discover", "--site", str(site)],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == ExitCode.PARTIAL_FAILURE, proc.stderr
    for host in ("h1", "h2"):
        assert proc.stderr.count(f"warning: {host}: TLS certificate of BMC") == 1, proc.stderr
    assert "canary-pw-14" not in proc.stdout + proc.stderr


def test_inventory_check_lists_unverified_hosts(tmp_path: Path) -> None:
    res = runner.invoke(app, ["inventory", "check", str(write_site(tmp_path, host_bmc=", verify_tls: false"))])
    assert res.exit_code == 0, res.output
    assert "warning: 1 host(s) do not verify their BMC's TLS certificate (verify_tls: false): h1" in res.output


def check(site: Path) -> tuple[int, str]:
    res = runner.invoke(app, ["inventory", "check", str(site)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, res.output


def test_missing_site_ca_bundle(tmp_path: Path) -> None:
    site = write_site(tmp_path, redfish=", ca_bundle: certs/bmc-ca.pem")
    code, out = check(site)
    assert code == ExitCode.BAD_INPUT
    assert f"site.yml:3 [settings.redfish.ca_bundle]: CA bundle {site.parent / 'certs/bmc-ca.pem'} " \
           "does not exist (the site's default for every BMC)" in out
    assert "hint: point ca_bundle at the PEM file" in out
    load_site(site)  # without check_files the loader itself does not open files


def test_host_ca_bundle_that_is_not_pem(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a certificate\n")
    code, out = check(write_site(tmp_path, host_bmc=f", ca_bundle: {tmp_path / 'notes.txt'}"))
    assert code == ExitCode.BAD_INPUT
    assert "[racks[0].hosts[0].bmc.ca_bundle]" in out
    assert "holds no PEM certificate (host h1 in rack r1)" in out


def test_readable_ca_bundle_passes(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text(CA)
    code, out = check(write_site(tmp_path, redfish=f", ca_bundle: {tmp_path / 'ca.pem'}"))
    assert code == 0, out


def test_missing_secret_file(tmp_path: Path) -> None:
    code, out = check(write_site(tmp_path, password=f"{{file: {tmp_path / 'nope'}}}"))
    assert code == ExitCode.BAD_INPUT
    assert "[credentials.bmc.password.file]: secret file" in out and "does not exist" in out
    assert "hint: create it (mode 0600" in out


def test_secret_path_that_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "vault.d").mkdir()
    code, out = check(write_site(tmp_path, password=f"{{vault: {tmp_path / 'vault.d'}, key: pw}}"))
    assert code == ExitCode.BAD_INPUT
    assert "[credentials.bmc.password.vault]: vault" in out and "is not a file" in out


def test_secret_file_that_git_would_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "pw").write_text("canary-pw-14\n")
    code, out = check(write_site(tmp_path, password=f"{{file: {repo / 'pw'}}}"))
    assert code == ExitCode.BAD_INPUT
    assert "inside the git repository" in out and "canary-pw-14" not in out


def test_several_file_problems_are_counted(tmp_path: Path) -> None:
    site = write_site(tmp_path, redfish=", ca_bundle: a.pem", host_bmc=", ca_bundle: b.pem",
                      password=f"{{file: {tmp_path / 'nope'}}}")
    with pytest.raises(InventoryError, match=r"a.pem does not exist .* \(and 2 more file problems\)"):
        load_site(site, check_files=True)
