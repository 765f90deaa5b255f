"""`provision health` over a fleet of real sshd "hosts" on loopback (provisioner.testing.sshfleet:
one address per host, recorded HGX H100 outputs behind a shim PATH): one SSH session per host
does everything (textfile included), and every host's counter wait overlaps with every other's.

The overlap is proven, not timed: each host's second `nvidia-smi nvlink -e` (the read after the
counter interval) waits until every host has made its first one. A run that kept fewer
sessions open than hosts (the former default of 32 at a time) would leave the first hosts
waiting for the last: the barrier gives up after a hang guard and says so."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.testing.sshfleet import Recordings, SshFleet
from tests.conftest import corpus_path
from tests.support import machine

pytestmark = machine.needs("root")
runner = CliRunner()
FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
HOSTS = 40  # more than the 32 sessions the former runner kept open
HANG_S = 120


def _barrier(folder: Path, hosts: int) -> str:
    """nvidia-smi for the two counter reads: the first marks this host as waiting, the second
    waits for every host to have marked itself (or gives up after HANG_S, recording it)."""
    nvsmi = corpus_path("pcie-gpu", "nvidia-smi-q-8xh100-and-others-gpud",
                        "nvidia-smi-query.535.161.08.out.0.valid")
    d = shlex.quote(str(folder))
    return f"""case "$*" in
  "-q") exec cat {shlex.quote(str(nvsmi))} ;;
  "nvlink --status") exec cat {shlex.quote(str(FIX / "nvlink-status.h100x8.18-links.txt"))} ;;
  "topo -m") exec cat {shlex.quote(str(FIX / "topo-m.535.h100x8-10nic.txt"))} ;;
  "nvlink -e") ;;
  *) exit 2 ;;
esac
me=$(echo "$SSH_CONNECTION" | cut -d' ' -f3)
if [ ! -e {d}/"$me" ]; then touch {d}/"$me"; exit 0; fi
for _ in $(seq {HANG_S * 10}); do
  [ "$(ls {d} | wc -l)" -ge {hosts} ] && exit 0
  sleep 0.1
done
touch {d}/"gave-up-$me"; exit 0"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("fleet")
    barrier = work / "barrier"
    barrier.mkdir()
    rec = Recordings(
        lspci=corpus_path("pcie-gpu", "lspci-vvv-hgx-h100-gpud", "lspci-vvv"),
        ibstat=corpus_path("ib", "ibstat-a100-h100-gpud", "ibstat.47.0.h100.all.active.0"),
        kernel_log=corpus_path("pcie-gpu", "dmesg-nvrm-xid-gpud", "dmesg.decode.iso.xid13.log"),
        dcgm_metrics=FIX / "dcgm-exporter.metrics.txt",
        extra={"nvidia-smi": _barrier(barrier, HOSTS)},
    )
    with SshFleet(work / "ssh", HOSTS, rec, log_level="VERBOSE") as f:
        yield f, barrier, work


def test_one_session_per_host_all_waits_overlapping_textfile_in_the_same_session(
        fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f, barrier, _ = fleet
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    textfiles = tmp_path / "textfile"
    site = tmp_path / "site"
    site.mkdir()
    profile = {"gpus": 8, "gpu_model": "H100 80GB HBM3", "nvswitch": True, "ib_hcas": 8,
               "ib_rate_gbps": 400}
    (site / "site.yml").write_text(f.site_yaml(profile=profile, health={
        "counter_interval_s": 0.1, "textfile_dir": str(textfiles), "kernel_log_allow": ["."]}))
    res = runner.invoke(app, ["health", "--site", str(site), "--any-state", "--json"])
    assert res.exit_code in (0, 3), res.output
    docs = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(docs) == HOSTS and len({d["host"] for d in docs}) == HOSTS
    assert not list(barrier.glob("gave-up-*")), "a host waited for the others: waits did not overlap"
    for doc in docs:
        checks = {c["id"]: c for c in doc["checks"]}
        assert checks["host.reachable"]["status"] == "pass", doc["host"]
        assert checks["gpu.count"]["status"] == "pass", checks["gpu.count"]
        assert checks["gpu.nvlink"]["status"] == "pass", checks["gpu.nvlink"]
    # One SSH connection per host: the textfile went over the collecting session. Every host
    # answered over SSH (reachable, above), so as many logins as hosts is one login each.
    assert f.logins() == HOSTS
    prom = (textfiles / "provisioner_health.prom").read_text()
    assert 'node_health_verdict{host="node-r' in prom and "node_health_check{" in prom
    assert not list(textfiles.glob(".provisioner_health.prom.*"))  # no temp file left behind
