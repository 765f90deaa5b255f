"""`provision health` over real SSH (a throw-away sshd on loopback) against this very machine,
which has no GPU and no InfiniBand: the GPU/IB checks must say not_applicable, and a host whose
profile expects 8 GPUs must fail with the right remedy, state and work order. node_exporter then
serves the textfile the run wrote."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.exceptions import ExitCode
from provisioner.state import NodeState, StateStore
from tests.support import machine

SSHD = Path("/usr/sbin/sshd")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
runner = CliRunner()

pytestmark = machine.needs("root")

GPU_CHECKS = ("gpu.count", "gpu.ecc", "gpu.row_remap", "gpu.xid", "nvswitch.sxid", "gpu.nvlink",
              "gpu.throttle", "gpu.gpudirect", "docker.gpu", "pcie.links", "pcie.acs", "ib.ports",
              "ib.counters", "firmware.versions")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port}")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    machine.require_tools([str(SSHD), "ssh", "ssh-keygen"], "scripts/deps/60-health.list")
    d = tmp_path_factory.mktemp("sshd")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client_key")], check=True)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nLogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_port(port, proc, "sshd")
        yield {"port": port, "dir": d}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _site(tmp: Path, sshd: dict[str, object], textfile_dir: Path) -> Path:
    d = sshd["dir"]
    site = tmp / "site"
    site.mkdir()
    host_vars = f"{{ansible_host: 127.0.0.1, ansible_port: {sshd['port']}}}"
    (site / "site.yml").write_text(f"""\
site: healthlab
settings:
  ssh_user: root
  ssh_private_key: {d}/client_key
  golden_after: 2
  health:
    counter_interval_s: 0.2
    known_hosts: {tmp}/known_hosts
    textfile_dir: {textfile_dir}
    kernel_log_allow: ["."]      # this shared CI machine's own kernel noise is not under test
    disk_warn_pct: 99.5
    disk_fail_pct: 99.9
networks:
  provisioning: {{cidr: 198.18.0.0/24, reserved: ["198.18.0.0-198.18.0.9"]}}
  bmc: {{cidr: 198.18.1.0/24}}
credentials:
  fake: {{username: root, password: {{env: PROVISIONER_TEST_UNUSED}}}}
profiles:
  vm:
    provisioning_nic: {{rule: first-onboard-up}}
  hgx:
    gpus: 8
    gpu_model: H100
    nvswitch: true
    ib_hcas: 8
    ib_rate_gbps: 400
    provisioning_nic: {{rule: first-onboard-up}}
racks:
  - name: r1
    index: 1
    units: 42
    location: {{room: lab, row: A}}
    host_name_template: "node{{u:02d}}"
    defaults:
      profile: vm
      bmc: {{vendor: generic, credentials: fake}}
    hosts:
      - {{u: 1, vars: {host_vars}}}
      - {{u: 2, profile: hgx, vars: {host_vars}}}
      - {{u: 3, vars: {{ansible_host: 127.0.0.1, ansible_port: {_free_port()}}}}}
""")
    return site


@pytest.fixture()
def env(tmp_path: Path, sshd: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    textfile_dir = tmp_path / "textfile"
    return {"site": _site(tmp_path, sshd, textfile_dir), "textfile": textfile_dir, "tmp": tmp_path}


def _docs(output: str) -> dict[str, dict]:
    docs = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return {d["host"]: d for d in docs}


def test_gpu_less_host_reports_not_applicable_and_becomes_golden(env: dict[str, Path]) -> None:
    site = str(env["site"])
    res = runner.invoke(app, ["health", "--site", site, "--any-state", "--json", "node01"])
    assert res.exit_code == 0, res.output
    doc = _docs(res.stdout)["node01"]
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["host.reachable"]["status"] == "pass"
    for cid in GPU_CHECKS:
        assert checks[cid]["status"] == "not_applicable", (cid, checks[cid]["summary"])
    assert checks["disk.usage"]["status"] == "pass" and "/" in checks["disk.usage"]["observed"]
    assert checks["kernel.log"]["status"] == "pass"
    assert doc["verdict"] == "healthy" and doc["clean_streak"] == 1
    # Second clean run in a row: golden (golden_after: 2), and `hosts --golden` lists it.
    res = runner.invoke(app, ["health", "--site", site, "--any-state", "--json", "node01"])
    assert res.exit_code == 0, res.output
    assert _docs(res.stdout)["node01"]["verdict"] == "golden"
    res = runner.invoke(app, ["hosts", "--site", site, "--golden"])
    assert res.exit_code == 0 and res.stdout.split() == ["node01"]


def test_textfile_is_served_by_node_exporter(env: dict[str, Path]) -> None:
    assert NODE_EXPORTER is not None, ("prometheus-node-exporter not installed: ./scripts/"
                                       "install-deps installs it (scripts/deps/60-health.list)")
    res = runner.invoke(app, ["health", "--site", str(env["site"]), "--any-state", "node01"])
    assert res.exit_code == 0, res.output
    prom = env["textfile"] / "provisioner_health.prom"
    assert prom.is_file() and not list(env["textfile"].glob(".provisioner_health.prom.*"))
    port = _free_port()
    proc = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={env['textfile']}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, proc, "node_exporter")
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert 'node_health_check{check="gpu.count",host="node01",status="not_applicable"} 1' in body
    assert 'node_health_check{check="host.reachable",host="node01",status="pass"} 1' in body
    assert 'node_health_verdict{host="node01",remedy="none",verdict="healthy"} 1' in body
    assert 'node_health_last_run_timestamp_seconds{host="node01"}' in body
    assert 'node_textfile_scrape_error 0' in body


def test_gpu_host_without_driver_fails_with_remedy_state_and_ticket(env: dict[str, Path]) -> None:
    site = str(env["site"])
    junit = env["tmp"] / "health.xml"
    res = runner.invoke(app, ["health", "--site", site, "--any-state", "--junit", str(junit),
                              "--no-textfile", "node01", "node02", "node03"])
    assert res.exit_code == ExitCode.PARTIAL_FAILURE, res.output
    assert "node02" in res.output and "need attention" in res.output
    store = StateStore.for_site("healthlab")
    rec = store.get("node02")
    assert rec.state is NodeState.FAILED and rec.reason.startswith("health: gpu.count fail")
    # No NVIDIA device on the bus of a host whose profile has 8 GPUs: a hardware work order.
    assert rec.facts["health"]["remedy"]["kind"] == "repair"
    # The unreachable host (nothing listens on its port) fails with a reboot remedy.
    unreach = store.get("node03")
    assert unreach.state is NodeState.FAILED and "host.reachable" in unreach.reason
    assert unreach.facts["health"]["remedy"]["kind"] == "reboot"
    assert store.get("node01").state is not NodeState.FAILED
    xml = junit.read_text()
    assert '<testsuite name="node02"' in xml and '<failure message="0 of 8 GPUs on the PCIe bus"' in xml
    res = runner.invoke(app, ["ticket", "--site", site, "node02", "--json"])
    assert res.exit_code == 0, res.output
    wo = json.loads(res.stdout)
    assert wo["host"] == "node02" and wo["location"] == "rack r1 U2 (room lab, row A)"
    assert wo["items"][0]["check"] == "gpu.count" and wo["remedy"] == "repair"
    assert wo["items"][0]["component"] == "GPU baseboard: 8 GPU(s) missing from PCIe"
    res = runner.invoke(app, ["ticket", "--site", site, "node02"])
    assert "WORK ORDER  node02" in res.stdout and "[repair] GPU baseboard" in res.stdout
    res = runner.invoke(app, ["ticket", "--site", site, "node01"])
    assert res.exit_code == ExitCode.BAD_INPUT and "nothing to repair" in res.output
    res = runner.invoke(app, ["hosts", "--site", site, "--failed", "--json"])
    assert {r["host"] for r in json.loads(res.stdout)} == {"node02", "node03"}
    res = runner.invoke(app, ["hosts", "--site", site, "--failed", "--remedy", "reboot", "--names"])
    assert res.exit_code == 0 and res.stdout.split() == ["node03"]


def test_deep_run_on_a_gpu_less_host_marks_deep_checks_not_applicable(env: dict[str, Path]) -> None:
    res = runner.invoke(app, ["health", "--site", str(env["site"]), "--any-state", "--deep",
                              "--json", "--no-textfile", "--skip", "zfs.docker", "node01"])
    assert res.exit_code == 0, res.output
    checks = {c["id"]: c for c in _docs(res.stdout)["node01"]["checks"]}
    for cid in ("gpu.dcgm_diag", "gpu.matmul", "gpu.nvlink_bw", "ib.write_bw"):
        assert checks[cid]["status"] == "not_applicable", (cid, checks[cid]["summary"])
    assert "zfs.docker" not in checks


def test_changed_host_key_is_an_error_with_the_fix(env: dict[str, Path], sshd: dict[str, object]) -> None:
    site = str(env["site"])
    res = runner.invoke(app, ["health", "--site", site, "--any-state", "--no-textfile", "node01"])
    assert res.exit_code == 0, res.output
    known = env["tmp"] / "known_hosts"
    other = env["tmp"] / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    fake = (other.with_suffix(".pub")).read_text().split()[:2]
    host = known.read_text().split()[0]
    known.write_text(f"{host} {fake[0]} {fake[1]}\n")  # what a re-imaged host looks like
    res = runner.invoke(app, ["health", "--site", site, "--any-state", "--json", "--no-textfile", "node01"])
    assert res.exit_code == ExitCode.PARTIAL_FAILURE, res.output
    (check,) = _docs(res.stdout)["node01"]["checks"]
    assert check["id"] == "host.reachable" and check["status"] == "error"
    assert "host key" in check["summary"] and "ssh-keygen -f" in check["remedy"]["detail"]


def test_hosts_not_yet_deployed_are_skipped(env: dict[str, Path]) -> None:
    res = runner.invoke(app, ["health", "--site", str(env["site"]), "node01"])
    assert res.exit_code == 0, res.output
    assert "skipped node01: state enrolled" in res.output
    assert StateStore.for_site("healthlab").health_history("node01") == []


def test_topology_capture_refuses_gpu_less_hosts_and_manifests_keep_ansible_working(
        env: dict[str, Path]) -> None:
    site = str(env["site"])
    res = runner.invoke(app, ["health", "--site", site, "node01", "--capture-topology", "--json"])
    assert res.exit_code == ExitCode.BAD_INPUT and "has no GPUs" in res.output, res.output
    # node02's profile has 8 GPUs; this machine shows none: said, and nothing written.
    res = runner.invoke(app, ["health", "--site", site, "node02", "--capture-topology"])
    assert res.exit_code == ExitCode.BAD_INPUT and "shows no GPU" in res.output, res.output
    assert not (env["site"] / ".provisioner").exists() and not (env["site"] / "topology").exists()
    # A manifest (as a GPU host's capture writes it) where the capture puts it: the vm profile
    # now says the host has a GPU in slot 0, which this machine has not.
    path = env["site"] / ".provisioner" / "topology" / "vm.yml"
    path.parent.mkdir(parents=True)
    path.write_text("profile: vm\ncaptured_from: node09\ngpus:\n- index: 0\n"
                    "  model: NVIDIA H100 80GB HBM3\n")
    res = runner.invoke(app, ["health", "--site", site, "--any-state", "--json", "node01"])
    assert res.exit_code == int(ExitCode.PARTIAL_FAILURE), res.output
    topo = {c["id"]: c for c in _docs(res.stdout)["node01"]["checks"]}["host.topology"]
    assert topo["status"] == "fail" and topo["remedy"]["kind"] == "repair"
    assert topo["evidence"][0].startswith("gpu.missing: GPU0: expected NVIDIA H100 80GB HBM3")
    # Ansible still reads the site (ansible-inventory, as `provision rack` runs it).
    res = runner.invoke(app, ["inventory", "check", site])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["health", "--site", site, "node01", "node02", "--capture-topology"])
    assert res.exit_code != 0 and "one golden host" in res.output
