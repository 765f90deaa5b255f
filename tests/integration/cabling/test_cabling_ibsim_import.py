"""Adopting a fabric from what the real tools print: a link below its tier's rate is a fault to fix,
never the plan, whether the as-built comes from ibnetdiscover or from iblinkinfo.

Peer: ibsim 0.10 answering MADs for a 16-host plan built with one spine uplink at EDR among HDR
ones and one host link at 1x, swept by OpenSM 3.3 and read by infiniband-diags 44 (Debian 12).
"""

from __future__ import annotations

import json

import pytest

from cabling.cli import cabling_app
from cabling.ibsim.netfile import BuiltFabric
from cabling.manifest import dump_manifest, load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from tests.integration.cabling.ibsim_case import capture, kinds, need_stack, runner, start


@pytest.mark.parametrize("tool", ["ibnetdiscover", "iblinkinfo"])
def test_import_warns_about_slow_links_writes_the_tier_rate_and_validate_names_them(tmp_path, tool):
    need_stack()
    plan = tmp_path / "plan.yaml"
    plan.write_text(dump_manifest(plan_fat_tree(PlanSpec(hosts=16, hcas=8, speed="HDR"))))
    built = BuiltFabric(load_manifest(plan))
    built.rate("r005-l2:33", speed="EDR")
    built.rate("gpu004:mlx5_3", width="1x")
    with start(built, tmp_path / "sim") as sim:
        out = capture(sim, tmp_path / "out", tool)[tool]
    asbuilt = tmp_path / "asbuilt.yaml"
    r = runner.invoke(cabling_app, ["import", f"--{tool}", str(out), "-o", str(asbuilt)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert text.count("warning: link ") == 2, r.output
    assert "trained at 4xEDR, below the 4xHDR of 255 of the 256 leaf-spine links" in text
    assert "trained at 1xHDR, below the 4xHDR of 127 of the 128 host-leaf links" in text
    m = load_manifest(asbuilt)
    assert (m.fabric.speed, m.fabric.width) == ("HDR", "4x") and not any(lk.speed or lk.width for lk in m.links)
    assert runner.invoke(cabling_app, ["lint", str(asbuilt), "--strict"]).exit_code == 0
    report = tmp_path / "r.json"
    v = runner.invoke(cabling_app, ["validate", "-m", str(asbuilt), f"--{tool}", str(out), "-f", "json",
                                    "-o", str(report)])
    assert v.exit_code == 3, v.output
    assert kinds(json.loads(report.read_text())) == {"degraded_speed": 1, "degraded_width": 1}
    # name-switches against the plan warns about the same two links.
    n = runner.invoke(cabling_app, ["name-switches", "-m", str(plan), f"--{tool}", str(out),
                                    "-o", str(tmp_path / "map")])
    assert n.exit_code == 0 and " ".join(n.output.split()).count("warning: link ") == 2, n.output
