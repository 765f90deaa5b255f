"""``provision cabling ...`` end to end, in-process, with the exit codes CI relies on."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
import yaml
from typer.testing import CliRunner

from provisioner.cli.main import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["cabling", *args])


@pytest.fixture
def small(fixtures):
    return str(fixtures / "small-fabric.yaml")


def test_plan_lint_simulate_validate_roundtrip(tmp_path):
    plan = tmp_path / "plan.yaml"
    r = run("plan", "--hosts", "60", "--radix", "16", "--tiers", "3", "-o", str(plan))
    assert r.exit_code == 0, r.output
    assert "3-tier plan" in r.output
    assert run("lint", str(plan)).exit_code == 0
    fab, down = tmp_path / "fab.txt", tmp_path / "down.txt"
    r = run("simulate", str(plan), "-o", str(fab))
    assert r.exit_code == 0 and "0 injected fault(s)" in r.output
    assert run("validate", "-m", str(plan), "--ibnetdiscover", str(fab)).exit_code == 0
    r = run("simulate", str(plan), "-o", str(fab), "--faults-per-kind", "2", "--iblinkinfo-output", str(down))
    assert r.exit_code == 0 and "14 injected fault(s)" in r.output
    svg = tmp_path / "v.svg"
    r = run("validate", "-m", str(plan), "--ibnetdiscover", str(fab), "--iblinkinfo", str(down),
            "--format", "json", "--svg", str(svg))
    assert r.exit_code == 3
    data = json.loads(r.stdout[: r.stdout.rindex("}") + 1])
    assert data["by_kind"]["swapped"] == 2 and data["by_kind"]["moved"] == 2
    # With two sources merged, a finding points at the file its line is in.
    assert all(f["where"].startswith(f"{fab}:") for f in data["findings"] if f["kind"] == "unexpected")
    ET.parse(svg)


def test_plan_to_stdout_and_csv(tmp_path):
    r = run("plan", "--hosts", "4", "--hcas", "2", "--radix", "8")
    assert r.exit_code == 0 and yaml.safe_load(r.stdout.split("2-tier plan")[0])["fabric"]["tiers"] == 2
    csv = tmp_path / "p.csv"
    assert run("plan", "--hosts", "4", "--hcas", "2", "--radix", "8", "-o", str(csv)).exit_code == 0
    assert csv.read_text().startswith("cable,a_device")
    js = tmp_path / "p.json"
    assert run("plan", "--hosts", "4", "--hcas", "2", "--radix", "8", "-o", str(js)).exit_code == 0
    assert run("lint", str(js)).exit_code == 0
    r = run("plan", "--hosts", "511", "--tiers", "2")
    assert r.exit_code == 2 and "use --tiers 3" in r.output


def test_lint_formats_and_exit_codes(tmp_path, small, small_data):
    r = run("lint", small, "--format", "junit")
    assert r.exit_code == 0 and ET.fromstring(r.stdout).get("failures") == "0"
    small_data["links"] = [lk for lk in small_data["links"] if lk["a"] != "l0:6"]  # breaks 2:1 blocking
    warn = tmp_path / "warn.yaml"
    warn.write_text(yaml.safe_dump(small_data))
    assert run("lint", str(warn)).exit_code == 0  # a warning alone passes...
    r = run("lint", str(warn), "--strict", "--format", "json", "-o", str(tmp_path / "r.json"))
    assert r.exit_code == 3  # ...unless --strict
    assert json.loads((tmp_path / "r.json").read_text())["by_kind"] == {"CAB008": 1, "CAB009": 1}
    small_data["links"].append({"a": "l0:7", "b": "l0:8"})
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(small_data))
    r = run("lint", str(bad), "-o", str(tmp_path / "r.txt"), "--svg", str(tmp_path / "p.html"))
    assert r.exit_code == 3 and "CAB005" in (tmp_path / "r.txt").read_text()
    assert "<svg" in (tmp_path / "p.html").read_text()
    assert run("lint", str(bad), "--skip", "CAB005", "--skip", "CAB011").exit_code == 0
    r = run("lint", str(tmp_path / "missing.yaml"))
    assert r.exit_code == 2 and "manifest not found" in r.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("devices:\n  - name: a\n    kind: router\n")
    r = run("lint", str(broken))
    assert r.exit_code == 2 and "broken.yaml:3" in r.output


def test_rules_lists_catalogue():
    r = run("rules")
    assert r.exit_code == 0 and re.search(r"CAB006\s+error\s+fabric-islands", r.stdout)


def test_validate_sources_and_errors(tmp_path, fixtures, small):
    r = run("validate", "-m", small, "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"), "--format", "junit")
    assert r.exit_code == 3 and "swap the cables in l1 ports 3 and 4" in r.stdout
    r = run("validate", "-m", small, "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"), "-f", "worklist")
    assert r.exit_code == 3 and "rack r01 (5)" in r.stdout
    r = run("validate", "-m", small, "--ufm-dir", str(fixtures / "ufm"), "--limit", "0")
    assert r.exit_code == 3 and "fix: reseat or replace the cable between h4 mlx5_1 and l1 port 4" in r.stdout
    r = run("validate", "-m", small)
    assert r.exit_code == 2 and "no discovery source given" in r.output
    warn = ["--warn-only", "swapped", "--warn-only", "down", "--warn-only", "degraded_width",
            "--warn-only", "degraded_speed"]
    r = run("validate", "-m", small, "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"), *warn)
    assert r.exit_code == 0 and "0 error(s), 5 warning(s)" in r.output
    r = run("validate", "-m", small, "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"), "--warn-only", "x")
    assert r.exit_code == 2 and "unknown finding kind(s) x" in r.output
    r = run("validate", "-m", small, "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"),
            "--ibstat", str(tmp_path / "none"))
    assert r.exit_code == 2 and "ibstat folder not found" in r.output
    r = run("validate", "-m", small, "-m", small, "--lldp", str(fixtures / "lldp"))
    assert r.exit_code == 2 and "only UFM NDT files can be combined" in r.output
    r = run("validate", "-m", str(fixtures / "roce-plan.yaml"), "--lldp", str(fixtures / "lldp"),
            "--node-name-map", str(tmp_path / "nnm"))
    assert r.exit_code == 2 and "cannot read node-name-map" in r.output


def test_import_as_built_and_json(tmp_path, fixtures):
    out = tmp_path / "asbuilt.yaml"
    r = run("import", "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"), "-o", str(out))
    assert r.exit_code == 0 and "as-built:" in r.output
    data = yaml.safe_load(out.read_text())
    names = {d["name"]: d for d in data["devices"]}
    assert names["l0"]["kind"] == "switch" and names["l0"]["guid"] == "0002c90300000a01"
    assert names["h1"]["hca_guids"] == {"mlx5_0": "946dae0300000101"}
    # Validated against the fabric it came from, the as-built names only the faults that fabric has:
    # the 2x link and the link at HDR among NDR ones (written at their tier's rate, not baked in), and
    # the link whose port is not Active.
    r = run("validate", "-m", str(out), "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo"), "-f", "json")
    assert r.exit_code == 3 and json.loads(r.stdout[: r.stdout.rindex("}") + 1])["by_kind"] == {
        "degraded_width": 1, "degraded_speed": 1, "down": 1}
    r = run("import", "--ufm-dir", str(fixtures / "ufm"), "--json")
    parsed = json.loads(r.stdout)
    assert r.exit_code == 0 and len(parsed["links"]) == 11 and parsed["down_ports"][0]["state"] == "Polling"
    csv = tmp_path / "asbuilt.csv"
    assert run("import", "--lldp", str(fixtures / "lldp"), "-o", str(csv)).exit_code == 0
    assert "gpu002,eth2" in csv.read_text()


def test_name_switches(tmp_path):
    plan = tmp_path / "plan.yaml"
    assert run("plan", "--hosts", "8", "--hcas", "2", "--radix", "8", "-o", str(plan)).exit_code == 0
    fab = tmp_path / "fab.txt"
    assert run("simulate", str(plan), "-o", str(fab)).exit_code == 0
    fab.write_text(re.sub(r'"MF0;[^"]+"', '"Quantum Mellanox Technologies"', fab.read_text()))
    nnm = tmp_path / "names.map"
    r = run("name-switches", "-m", str(plan), "--ibnetdiscover", str(fab), "-o", str(nnm))
    assert r.exit_code == 0 and "0 ambiguous, 0 unmatched" in r.output
    assert re.search(r'0x[0-9a-f]{16} "r00\d-l1"', nnm.read_text())
    r = run("validate", "-m", str(plan), "--ibnetdiscover", str(fab), "--node-name-map", str(nnm))
    assert r.exit_code == 0
    fab.write_text(re.sub(r'"gpu\d+ mlx5_\d"', '"MT4129 ConnectX7 Mellanox Technologies"', fab.read_text()))
    r = run("name-switches", "-m", str(plan), "--ibnetdiscover", str(fab))
    assert r.exit_code == 3 and "unmatched" in r.output


def test_convert_and_schema(tmp_path, small, repo_root):
    csv = tmp_path / "c.csv"
    assert run("convert", small, "-o", str(csv)).exit_code == 0
    back = tmp_path / "back.json"
    assert run("convert", str(csv), "-o", str(back)).exit_code == 0
    assert len(json.loads(back.read_text())["links"]) == 12
    r = run("convert", str(back))
    assert r.exit_code == 0 and "links:" in r.stdout
    ndt = tmp_path / "p.ndt"
    assert run("convert", small, "-o", str(ndt)).exit_code == 0
    assert run("lint", str(ndt)).exit_code == 0
    r = run("schema")
    assert r.exit_code == 0 and r.stdout == (repo_root / "docs" / "cabling-manifest.schema.json").read_text()


def test_diff_two_plans(tmp_path, small, small_data):
    new = tmp_path / "new.yaml"
    for lk in small_data["links"]:
        if lk["a"] == "h3:mlx5_1":
            lk["b"] = "l1:4"
        elif lk["a"] == "h4:mlx5_1":
            lk["b"] = "l1:3"
    small_data["links"].append({"a": "l0:7", "b": "s1:3"})
    new.write_text(yaml.safe_dump(small_data))
    r = run("diff", small, str(new))
    assert r.exit_code == 3, r.output
    assert "swap the cables in l1 ports 3 and 4" in r.stdout and "connect l0 port 7 to s1 port 3" in r.stdout
    assert run("diff", small, small).exit_code == 0


def test_slurm_topology(tmp_path, small):
    out = tmp_path / "topology.conf"
    assert run("slurm-topology", small, "-o", str(out)).exit_code == 0
    assert "SwitchName=s1 Switches=l0+l1" in out.read_text()


def test_draw_and_simulate_errors(tmp_path, small):
    out = tmp_path / "f.svg"
    assert run("draw", small, "-o", str(out)).exit_code == 0
    ET.parse(out)
    r = run("simulate", small, "-o", str(tmp_path / "x.txt"), "--faults-per-kind", "5")
    assert r.exit_code == 2 and "cannot inject 5 faults of each kind" in r.output


def test_python_dash_m_cabling_runs_alone(fixtures):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "cabling", "lint", str(fixtures / "small-fabric.yaml")],
                       capture_output=True, text=True, timeout=120, cwd=fixtures.parents[2])
    assert r.returncode == 0 and "clean" in r.stdout
    r = subprocess.run([sys.executable, "-c", "import sys, cabling.cli; print('provisioner' in sys.modules)"],
                       capture_output=True, text=True, timeout=120, cwd=fixtures.parents[2])
    assert r.stdout.strip() == "False"  # the package stands alone


def test_validate_to_json_loads_only_what_it_uses(fixtures, tmp_path):
    """The end-to-end time of validate is mostly imports: no planner, simulator, renderer, rich,
    networkx or provisioner module may come with it."""
    import subprocess
    import sys

    script = (
        "import os, runpy, sys\n"
        f"sys.argv = ['cabling', 'validate', '-m', {str(fixtures / 'small-fabric.yaml')!r}, '--iblinkinfo',"
        f" {str(fixtures / 'small-fabric.iblinkinfo')!r}, '-f', 'json', '-o', {str(tmp_path / 'r.json')!r}]\n"
        "heavy = ('rich', 'networkx', 'provisioner', 'requests', 'cabling.plan', 'cabling.simulate',"
        " 'cabling.report.svg', 'cabling.report.fabricmap', 'cabling.naming')\n"
        "real_exit = os._exit\n"
        "def report(code):\n"
        "    print('rc', code)\n"
        "    print(sorted({m for m in sys.modules if m.startswith(heavy)}))\n"
        "    sys.stdout.flush()\n"
        "    real_exit(0)\n"
        "os._exit = report  # python -m cabling ends with os._exit\n"
        "runpy.run_module('cabling', run_name='__main__')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=fixtures.parents[2])
    assert r.stdout.splitlines() == ["rc 3", "[]"], r.stdout + r.stderr
    assert (tmp_path / "r.json").exists()


def test_python_dash_m_cabling_exits_with_the_findings_code_and_flushed_output(fixtures, tmp_path):
    import subprocess
    import sys

    base = [sys.executable, "-m", "cabling", "validate", "-m", str(fixtures / "small-fabric.yaml"),
            "--iblinkinfo", str(fixtures / "small-fabric.iblinkinfo")]
    r = subprocess.run([*base, "-f", "json", "-o", str(tmp_path / "r.json")], capture_output=True, text=True,
                       timeout=120, cwd=fixtures.parents[2])
    assert r.returncode == 3 and "error(s)" in r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["findings"]
    r = subprocess.run(base, capture_output=True, text=True, timeout=120, cwd=fixtures.parents[2])
    assert r.returncode == 3 and "fix: swap the cables in l1 ports 3 and 4" in r.stdout
    r = subprocess.run([sys.executable, "-m", "cabling", "lint", str(tmp_path / "none.yaml")], capture_output=True,
                       text=True, timeout=120, cwd=fixtures.parents[2])
    assert r.returncode == 2 and "manifest not found" in r.stderr


def test_discovery_from_a_pipe_is_read_once_and_a_device_is_refused(tmp_path):
    """`--ibnetdiscover <(ssh sm ibnetdiscover)` is a pipe: the format check must not eat its head
    (a 4 KiB sniff used to, and the parse then began mid-block); `/dev/zero` is refused, not read."""
    import os
    import threading

    plan = tmp_path / "plan.yaml"
    assert run("plan", "--hosts", "60", "--radix", "16", "--tiers", "3", "-o", str(plan)).exit_code == 0
    fab = tmp_path / "fab.txt"
    assert run("simulate", str(plan), "-o", str(fab)).exit_code == 0
    assert fab.stat().st_size > 4096  # more than the sniffed head
    fifo = tmp_path / "fabric.pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(fab.read_bytes()))
    writer.start()
    r = run("validate", "-m", str(plan), "--ibnetdiscover", str(fifo))
    writer.join(timeout=30)
    assert r.exit_code == 0, r.output
    r = run("validate", "-m", str(plan), "--ibnetdiscover", "/dev/zero")
    assert r.exit_code == 2 and "it is a device, not a file" in r.output
