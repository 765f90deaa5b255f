"""Error counters (ibqueryerrors) judged against the fabric's own median, and what --watch reports.
The ibqueryerrors text is in infiniband-diags 44's format (as tests/integration/cabling/test_cabling_live.py
gets it from the real tool); the fabric is rendered by ``cabling simulate``."""

from __future__ import annotations

import pytest

from cabling.counters import counter_findings, thresholds
from cabling.diff import validate
from cabling.discovery.ibnetdiscover import parse_ibnetdiscover
from cabling.discovery.ibqueryerrors import parse_ibqueryerrors
from cabling.errors import CablingInputError
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.resolve import resolve
from cabling.simulate import build_clean, render_ibnetdiscover
from cabling.watch import Sweep, Watch

REAL = """Errors for "gpu003 mlx5_1"
   GUID 0x946dae0300003005 port 1: [PortRcvErrors == 12]
Errors for 0xfc6a1c0300000012 "MF0;r005-l2:QM9700/U1"
   GUID 0xfc6a1c0300000012 port ALL: [SymbolErrorCounter == 5000] [LinkDownedCounter == 7]
   GUID 0xfc6a1c0300000012 port 5: [SymbolErrorCounter == 5000]
   GUID 0xfc6a1c0300000012 port 6: [LinkDownedCounter == 7]
       Link info:     82    6[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>  0x946dae0300006005     23    1[  ] "gpu006 mlx5_1" (Could be 12X )

## Summary: 123 nodes checked, 2 bad nodes found
##          817 ports checked, 3 ports have errors beyond threshold
## Thresholds: [SymbolErrorCounter = 0][LinkErrorRecoveryCounter = 0][LinkDownedCounter = 0][PortRcvErrors = 0]
## Suppressed:
"""


def test_ibqueryerrors_output_is_read_per_port_with_the_ports_checked():
    report = parse_ibqueryerrors(REAL, "iqe.txt")
    assert report.checked == 817
    assert [(p.guid, p.port, p.counters) for p in report.ports] == [
        ("946dae0300003005", 1, {"PortRcvErrors": 12}),
        ("fc6a1c0300000012", 5, {"SymbolErrorCounter": 5000}),
        ("fc6a1c0300000012", 6, {"LinkDownedCounter": 7}),
    ]
    assert report.values("SymbolErrorCounter").count(0) == 816
    with pytest.raises(CablingInputError, match=r"iqe\.txt:2: cannot read ibqueryerrors line"):
        parse_ibqueryerrors(REAL.replace("port 1: [", "port one: ["), "iqe.txt")
    with pytest.raises(CablingInputError, match="this is not ibqueryerrors output"):
        parse_ibqueryerrors("hello\n".replace("hello", ""), "x")


@pytest.fixture(scope="module")
def fabric():
    plan = plan_fat_tree(PlanSpec(hosts=16, hcas=8, speed="HDR"))
    fab = parse_ibnetdiscover(render_ibnetdiscover(plan, build_clean(plan)), "fab.txt")
    return plan, fab, resolve(fab, plan)


def _switch_port_lines(fab, counter: str, value: int, every: int) -> list[str]:
    lines = []
    for g, node in sorted(fab.nodes.items()):
        if node.kind == "switch":
            lines.append(f'Errors for 0x{g} "{node.desc}"')
            lines += [f"   GUID 0x{g} port {p}: [{counter} == {value}]" for p in range(1, 65, every)]
    return lines


def test_a_port_is_named_above_ten_times_the_fabrics_median_not_a_fixed_number(fabric):
    plan, fab, found = fabric
    leaf = next(g for g, n in fab.nodes.items() if "r005-l2:" in n.desc)
    # A fabric whose counters were never cleared: most switch ports count ~20 symbol errors.
    noisy = _switch_port_lines(fab, "SymbolErrorCounter", 20, 1)
    noisy = [ln for ln in noisy if not ln.startswith(f"   GUID 0x{leaf} port 5:")
             and not ln.startswith(f"   GUID 0x{leaf} port 6:")]
    noisy += [f"   GUID 0x{leaf} port 5: [SymbolErrorCounter == 150]",
              f"   GUID 0x{leaf} port 6: [SymbolErrorCounter == 5000]"]
    text = "\n".join([*noisy, "", "## Summary: 28 nodes checked", "##          900 ports checked"]) + "\n"
    report = parse_ibqueryerrors(text, "noisy.txt")
    assert thresholds(report)["SymbolErrorCounter"].median == 20
    (f,) = counter_findings(report, fab, found, plan)
    assert f.kind == "link_errors" and "5000 symbol errors at r005-l2 port 6" in f.message
    assert "(fabric median 20, named above 200)" in f.message and "gpu006 mlx5_1" in f.message
    # The same 150 on a quiet fabric (median 0) is named: the level, not the number, decides.
    quiet = parse_ibqueryerrors(f"Errors for 0x{leaf} \"x\"\n   GUID 0x{leaf} port 5: [SymbolErrorCounter == 150]\n"
                                "## Summary\n##          900 ports checked\n", "quiet.txt")
    (q,) = counter_findings(quiet, fab, found, plan)
    assert "150 symbol errors at r005-l2 port 5 (fabric median 0, named above 10)" in q.message
    assert "gpu005 mlx5_1" in q.message and "(cable C00021)" in q.message


def test_counter_findings_take_their_place_in_the_report(fabric):
    plan, fab, found = fabric
    leaf = next(g for g, n in fab.nodes.items() if "r005-l2:" in n.desc)
    text = REAL.replace("0xfc6a1c0300000012", f"0x{leaf}").replace("0x946dae0300003005", "0x0c42a103ffffff01")
    report = parse_ibqueryerrors(text, "iqe.txt")
    extra = counter_findings(report, fab, found, plan)
    kinds = [f.kind for f in validate(plan, found, extra).findings]
    assert kinds == ["flapping", "link_errors", "link_errors"]
    # That HCA port GUID is not in this fabric: the port is named by its description instead.
    rcv = next(f for f in extra if "receive errors" in f.message)
    assert rcv.endpoints == ["gpu003:mlx5_1", "r005-l2:3"]


def _sweep(n, links, counters=None):
    return Sweep(n, 100.0 * n, {frozenset(((a.split(":")[0], a.split(":")[1]), (b.split(":")[0], b.split(":")[1]))):
                                (a, b, state) for a, b, state in links}, counters or {})


def test_watch_names_a_link_that_bounced_and_one_that_changed_once():
    w = Watch()
    up = [("h1:mlx5_0", "l1:1", "active"), ("h2:mlx5_0", "l1:2", "active")]
    assert w.add(_sweep(1, up)) == []
    gone = w.add(_sweep(2, [up[1]], {"l1:3": {"SymbolErrorCounter": 4}}))
    assert [c.text for c in gone] == ["link h1:mlx5_0 <-> l1:1 went away", "l1:3: SymbolErrorCounter +4 (now 4)"]
    back = w.add(_sweep(3, [up[0], ("h2:mlx5_0", "l1:2", "initialize")], {"l1:3": {"SymbolErrorCounter": 30}}))
    assert [c.what for c in back] == ["back", "state", "counter"]
    found = {f.kind: f for f in w.findings()}
    assert "bounced during the watch (3 sweeps, 200 s)" in found["flapping"].message  # h1: up, down, up
    assert "went from active to initialize" in found["changed"].message  # h2: out of Active once
    assert found["link_errors"].data["grew"] == {"SymbolErrorCounter": 30}
