"""A link below the rate of its tier is a fault, never the plan: import writes the tier's rate and
warns, name-switches warns, lint flags a plan that disagrees with its tier's rate. On real
recordings (tests/fixtures/corpus/ib, tests/fixtures/cabling/real; PROVENANCE beside them)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from cabling.asbuilt import as_built
from cabling.cli import cabling_app
from cabling.discovery.ibnetdiscover import load_ibnetdiscover
from cabling.manifest import dump_manifest, load_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.rates import slow_links, tier_rates
from cabling.simulate import build_clean, render_ibnetdiscover
from tests.conftest import corpus_path

runner = CliRunner()
X5 = ("ib", "ibnetdiscover-ens-lyon-x5-qdr-ddr", "X5.topofile")


def test_each_tier_runs_at_the_rate_most_of_its_links_trained_at():
    m = as_built(load_ibnetdiscover(corpus_path(*X5)))
    rates = {r.name: (r.width, r.speed, r.speed_count, r.links) for r in tier_rates(m).values()}
    assert rates == {"host-leaf": ("4x", "QDR", 66, 89), "leaf-spine": ("4x", "QDR", 64, 64),
                     "spine-core": ("4x", "QDR", 6, 6)}
    slow = slow_links(m)
    assert len(slow) == 23 and {s.speed for s in slow} == {"DDR"}
    assert slow[0].describe() == "4xDDR, below the 4xQDR of 66 of the 89 host-leaf links"


def test_import_writes_the_tier_rate_and_warns_so_validate_names_the_faults(tmp_path):
    # The real X5 fabric has 23 host links at DDR among QDR ones: importing it used to write them
    # into the as-built at DDR, so validate and lint of the as-built were clean.
    topo = corpus_path(*X5)
    out = tmp_path / "asbuilt.yaml"
    r = runner.invoke(cabling_app, ["import", "--ibnetdiscover", str(topo), "-o", str(out)])
    assert r.exit_code == 0, r.output
    warnings = [ln for ln in r.output.splitlines() if ln.startswith("warning: link ")]
    assert len(warnings) == 23 and "trained at 4xDDR, below the 4xQDR of 66 of the 89 host-leaf links" in warnings[0]
    assert "23 link(s) below their tier's rate" in r.output
    m = load_manifest(out)
    assert (m.fabric.speed, m.fabric.width) == ("QDR", "4x") and not any(lk.speed for lk in m.links)
    v = runner.invoke(cabling_app, ["validate", "-m", str(out), "--ibnetdiscover", str(topo), "-f", "json"])
    assert v.exit_code == 3 and '"degraded_speed": 23' in v.stdout
    assert runner.invoke(cabling_app, ["lint", str(out), "--strict"]).exit_code == 0


def test_a_1x_link_of_a_real_fabric_is_written_at_4x_and_named(tmp_path, fixtures):
    topo = fixtures / "real" / "junousi-ibtopotool-1.topo"
    out = tmp_path / "asbuilt.yaml"
    r = runner.invoke(cabling_app, ["import", "--ibnetdiscover", str(topo), "-o", str(out)])
    assert r.exit_code == 0 and r.output.count("trained at 1xSDR") == 2
    v = runner.invoke(cabling_app, ["validate", "-m", str(out), "--ibnetdiscover", str(topo)])
    assert v.exit_code == 3 and re.search(r"2 degraded_width", v.output)


def test_lint_flags_an_as_built_with_the_fault_baked_in(tmp_path):
    # What import wrote before: each link at its trained rate, one uplink at DDR among QDR.
    m = as_built(load_ibnetdiscover(corpus_path(*X5)))
    path = tmp_path / "old-asbuilt.yaml"
    path.write_text(dump_manifest(m))
    r = runner.invoke(cabling_app, ["lint", str(path), "--strict"])
    assert r.exit_code == 3 and r.output.count("CAB013") >= 23
    assert "is planned at 4xDDR; 66 of the 89 host-leaf links are at 4xQDR" in r.output


def test_name_switches_warns_about_links_below_their_tier(tmp_path):
    plan = plan_fat_tree(PlanSpec(hosts=4, hcas=2, radix=8, speed="HDR"))
    sim = build_clean(plan)
    sim.links[-1].speed = "EDR"
    plan_path, fab = tmp_path / "plan.yaml", tmp_path / "fab.txt"
    plan_path.write_text(dump_manifest(plan))
    fab.write_text(render_ibnetdiscover(plan, sim))
    r = runner.invoke(cabling_app, ["name-switches", "-m", str(plan_path), "--ibnetdiscover", str(fab),
                                    "-o", str(tmp_path / "map")])
    assert r.exit_code == 0, r.output
    assert "trained at 4xEDR, below the 4xHDR of 7 of the 8 leaf-spine links" in r.output
