"""--deep: matmul and NVLink bandwidth judged against the host's median; ib_write_bw pairs with
error counters read before and after (driven through a scripted SSH client)."""

from __future__ import annotations

from pathlib import Path

from provisioner.health.checks import run_checks
from provisioner.health.checks.base import Context, result
from provisioner.health.collector import Section
from provisioner.health.config import Expectations, HealthSettings
from provisioner.health.deep_measure import (
    COUNTERS_SCRIPT,
    pair_up,
    parse_ib_write_bw,
    parse_matmul,
    parse_nvbandwidth,
)
from provisioner.health.model import HostReport, RemedyKind, Status
from provisioner.health.runner import HostPlan, ib_pair_bandwidth
from provisioner.health.ssh_client import SshClient, SshResult, SshTarget

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "health"
EXP = Expectations(gpus=2, nvswitch=True, ib_ports=1, ib_rate_gbps=400,
                   settings=HealthSettings(dcgm_exporter=False))


def ctx(**texts: str) -> dict[str, object]:
    sections = {k: Section(k, 0, v) for k, v in texts.items()}
    c = Context("h", sections, EXP, deep=True)
    return {r.id: r for r in run_checks(c)}


def test_parsers():
    assert parse_matmul((FIX / "gpu-matmul.one-slow.txt").read_text()) == {0: 652.4, 1: 410.9}
    m = parse_nvbandwidth((FIX / "nvbandwidth.d2d-read-ce.one-slow-pair.txt").read_text())
    assert len(m) == 6 and m[(1, 2)] == 122.40 and (0, 0) not in m
    assert parse_ib_write_bw((FIX / "ib_write_bw.client.ndr.txt").read_text()) == (0.0, 392.63)
    assert parse_ib_write_bw("Couldn't connect to 10.0.0.2:18515") is None
    assert pair_up(["a", "b", "c"]) == [("a", "b"), ("c", "a")]
    assert pair_up(["a"]) == []


def test_slow_gpu_and_slow_nvlink_pair_are_named():
    res = ctx(nvsmi=(FIX / "nvidia-smi-q.h100x2.good.txt").read_text(),
              gpu_matmul=(FIX / "gpu-matmul.one-slow.txt").read_text(),
              nvbandwidth=(FIX / "nvbandwidth.d2d-read-ce.one-slow-pair.txt").read_text())
    mm = res["gpu.matmul"]
    assert mm.status is Status.FAIL and mm.remedy.kind is RemedyKind.REPAIR
    assert mm.remedy.part == "GPU at PCI 0000:2a:00.0 module 2 serial 1654922007777"
    bw = res["gpu.nvlink_bw"]
    assert bw.status is Status.FAIL and bw.observed["slow"] == {"1<-2": 122.4}
    assert "GPU index 2" in bw.remedy.part


def test_deep_tools_absent():
    res = {r.id: r for r in run_checks(Context("h", {"gpu_matmul": Section("gpu_matmul", 127, ""),
                                                     "nvbandwidth": Section("nvbandwidth", 127, "")},
                                               EXP, deep=True))}
    assert res["gpu.matmul"].status is Status.NOT_APPLICABLE
    assert res["gpu.nvlink_bw"].status is Status.FAIL  # the image should ship nvbandwidth


class ScriptedSsh(SshClient):
    """Answers like real hosts would: counters rise on host b's port, the client prints BW."""

    def __init__(self, bw: str) -> None:
        super().__init__()
        self.bw = bw
        self.reads: dict[str, int] = {}
        self.commands: list[tuple[str, str]] = []

    def run(self, target: SshTarget, remote: str, stdin: str = "") -> SshResult:
        self.commands.append((target.name, remote))
        if remote == COUNTERS_SCRIPT:
            n = self.reads[target.name] = self.reads.get(target.name, -1) + 1
            errors = n * 3 if target.name == "b" else 0
            return SshResult(0, f"mlx5_0/1 symbol_error 0\nmlx5_0/1 link_downed {errors}\n", "")
        if "ib_write_bw" in remote and remote.startswith("for i"):
            return SshResult(0, self.bw, "")
        return SshResult(0, "", "")


def _reports(names):
    ok = result("ib.ports", Status.PASS, "ok", observed={"good": ["mlx5_0/1"]})
    return [HostReport(host=n, run_id="r", started_at="t", duration_s=0, results=[ok]) for n in names]


def test_ib_pairs_name_the_side_whose_counters_rise():
    client = ScriptedSsh((FIX / "ib_write_bw.client.ndr.txt").read_text().replace("392.63", "180.10"))
    plans = [HostPlan(SshTarget(n, f"10.0.0.{i}", "root"), EXP) for i, n in enumerate("ab")]
    out = {r.host: {x.id: x for x in r.results} for r in ib_pair_bandwidth(client, plans, _reports("ab"))}
    b = out["b"]["ib.write_bw"]
    assert b.status is Status.FAIL and b.remedy.part == "HCA mlx5_0/1 cable/transceiver"
    assert b.observed["counters_rise"] == {"mlx5_0/1": {"link_downed": 3}}
    assert out["a"]["ib.write_bw"].status is Status.WARN
    server = next(c for h, c in client.commands if h == "b" and "ib_write_bw" in c)
    assert "-d mlx5_0" in server and "-p 18515" in server


def test_ib_pairs_pass_at_rate_and_odd_host_pairs_with_the_first():
    client = ScriptedSsh((FIX / "ib_write_bw.client.ndr.txt").read_text())
    client.reads = {}
    plans = [HostPlan(SshTarget(n, f"10.0.0.{i}", "root"), EXP) for i, n in enumerate("acd")]
    reps = ib_pair_bandwidth(client, plans, _reports("acd"))
    for r in reps:
        (bw,) = [x for x in r.results if x.id == "ib.write_bw"]
        assert bw.status is Status.PASS, (r.host, bw.summary)
    lone = ib_pair_bandwidth(client, plans[:1], _reports("a"))
    assert lone[0].results[-1].status is Status.NOT_APPLICABLE


def test_textfile_publish_reports_failures_and_skips_unreachable_hosts():
    from provisioner.health.runner import publish_textfiles

    class Client(ScriptedSsh):
        def run(self, target, remote, stdin=""):
            self.commands.append((target.name, remote))
            return SshResult(1, "", "mkdir: cannot create directory: Read-only file system")

    client = Client("")
    plans = [HostPlan(SshTarget(n, "10.0.0.1", "root"), EXP) for n in ("up", "down")]
    down = result("host.reachable", Status.FAIL, "no route")
    reports = [HostReport(host="up", run_id="r", started_at="t", duration_s=0, results=[]),
               HostReport(host="down", run_id="r", started_at="t", duration_s=0, results=[down])]
    problems = publish_textfiles(client, plans, reports, "/var/lib/node_exporter/textfile_collector")
    assert problems == {"up": "mkdir: cannot create directory: Read-only file system",
                        "down": "unreachable"}
    assert [h for h, _ in client.commands] == ["up"]
