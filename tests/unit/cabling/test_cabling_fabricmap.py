"""The fabric map's layout: tiers and groups from the topology when the manifest has no roles."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cabling.asbuilt import as_built
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.report.fabricmap import device_tiers, map_data, render_map
from cabling.rules import lint
from cabling.simulate import build_clean, render_ibnetdiscover
from tests.conftest import corpus_path


def test_an_imported_fabric_without_roles_gets_the_plans_tiers_and_units() -> None:
    plan = plan_fat_tree(PlanSpec(hosts=64, hcas=4, radix=16, tiers=3))
    imported = as_built(parse_ibnetdiscover(render_ibnetdiscover(plan, build_clean(plan)), "f.txt"))
    assert not any(d.role for d in imported.devices)
    want = {d.name.casefold(): d.tier for d in plan.devices}
    assert device_tiers(imported) == want
    data = map_data(imported)
    tiers = {t: [g for g in data["groups"] if g[1] == t] for t in range(4)}
    plan_data = map_data(plan)
    # The same number of host units and leaf units as the plan's scalable units.
    for t in (0, 1):
        assert sorted(g[6] for g in tiers[t]) == sorted(g[6] for g in plan_data["groups"] if g[1] == t)
    assert all(g[0].startswith("gpu[") for g in tiers[0])
    assert sum(n for _a, _b, n in data["edges"]) == len(imported.links)


def test_the_real_director_fabric_is_drawn_in_tiers() -> None:
    text = corpus_path("ib", "ufm-ndt-cabling-validation-dgx-a100-director",
                       "ibnetdiscover_director.txt").read_bytes().decode("utf-8", "replace")
    m = as_built(parse_ibnetdiscover(text, "director.txt"))
    tiers = device_tiers(m)
    hosts = {k for k, d in m.device_map().items() if d.kind == "host"}
    assert {tiers[k] for k in hosts} == {0}
    assert set(tiers.values()) >= {0, 1, 2}  # leaves, and the director chassis above them
    data = map_data(m)
    assert len(data["groups"]) < len(m.devices) / 4


def test_the_page_is_self_contained_and_escapes_names() -> None:
    plan = plan_fat_tree(PlanSpec(hosts=8, hcas=2, radix=8))
    plan.devices[0].name = "gpu</script><b>x"
    for lk in plan.links:
        if lk.a.device == "gpu001":
            object.__setattr__(lk.a, "device", "gpu</script><b>x")
    page = render_map(plan, lint(plan))
    assert page.count("</script>") == 2  # the data block and the script, nothing injected
    assert not re.search(r"(?:src|href)=['\"]?(?:https?:)?//", page)
    assert "<link" not in page and "@import" not in page
    payload = re.search(r"<script id='data' type='application/json'>(.*?)</script>", page, re.S)
    assert payload and json.loads(payload.group(1).replace("<\\/", "</"))["devices"]


def test_validate_draws_the_map_with_the_guids_the_fabric_reported(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cabling.cli import cabling_app

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "cabling"
    page = tmp_path / "map.html"
    r = CliRunner().invoke(cabling_app, ["validate", "-m", str(fixtures / "small-fabric.yaml"), "--iblinkinfo",
                                         str(fixtures / "small-fabric.iblinkinfo"), "-f", "json", "--svg", str(page)])
    assert r.exit_code == 3, r.output
    payload = re.search(r"<script id='data' type='application/json'>(.*?)</script>", page.read_text(), re.S)
    assert payload
    devices = {d[0]: d[6] for d in json.loads(payload.group(1).replace("<\\/", "</"))["devices"]}
    assert "946dae0300000101" in devices["h1"].split()  # h1 mlx5_0's port GUID, from iblinkinfo only
    assert "0002c90300000a01" in devices["l0"].split()
