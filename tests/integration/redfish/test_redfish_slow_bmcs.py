"""Discovery of slow and partly broken BMCs: $expand, a few connections per BMC, deadlines.

Peers: every recording of test_redfish_vendor_trees.TREES served by sushy-static (which has no
$expand: a query makes it answer 404, so through it discovery reads member by member), and the
project's fault proxy (provisioner/testing/bmcproxy.py) in front of it as the stand-in for a
BMC that offers $expand (it inlines the recorded members), breaks it on purpose, answers 503
to concurrent requests, or hangs on one resource.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import shutil
from functools import partial
from typing import Any

import pytest

from provisioner.bmc.factory import open_redfish
from provisioner.redfish.client import ClientOptions
from provisioner.secrets import Secret
from provisioner.testing.redfish_peers import fault_proxy, sushy_static
from provisioner.workflow.discover import DiscoveryTarget, discover_all, facts_to_dict
from provisioner.workflow.nic_choice import NicPolicy, apply_nic_policy
from tests.support.redfish_trees import IDENTITY, ONBOARD, TREES, tree

PASSWORD = "calvin-7c1f"
OPTS = ClientOptions(verify_tls=False, timeout_s=10, retries=3, backoff_s=0.05,
                     connections=4)


def facts(url: str, opts: ClientOptions = OPTS) -> tuple[dict[str, Any], int]:
    """Normalised facts of one discovery (no clock, no address) and its request count."""
    policy = NicPolicy(rule=ONBOARD)
    bmc = open_redfish(url, "root", Secret(PASSWORD), opts, boot_port=policy.choose)
    try:
        read = bmc.discover()
        apply_nic_policy(read, policy)
        found = facts_to_dict(read)
    finally:
        bmc.close()
    requests = found["extra"].pop("requests")
    for key in ("bmc_datetime", "clock_skew_s"):
        found.pop(key)
    # Warnings name the BMC by address (their order is the same whatever the timing).
    found["extra"]["warnings"] = [re.sub(r"127\.0\.0\.1:\d+", "BMC", w)
                                  for w in found["extra"]["warnings"]]
    return found, requests


@pytest.mark.parametrize("key", sorted(TREES))
def test_expanded_and_member_by_member_reads_give_identical_facts(key, tmp_path):
    with sushy_static(tree(key), tmp_path) as plain:
        by_member, n_members = facts(plain)
        with fault_proxy(plain, tmp_path, args=["--expand"]) as (expanding,):
            expanded, n_expanded = facts(expanding)
    assert expanded == by_member
    # the serial the recording names (a few name none: stock OpenBMC, a redacted capture)
    want = IDENTITY.get(key)
    assert by_member["serial"] == want[3] if want else by_member["serial"]
    assert n_expanded <= n_members
    if key == "dgx-h100":
        # 66 firmware items, 47 chassis, 21 boot options, 14 PCIe devices... read one by one
        assert n_members >= 240 and n_expanded <= 50


@pytest.mark.parametrize("fault", ["500", "bare", "foreign", "partial", "truncated", "cut"])
@pytest.mark.parametrize("key", ["dgx-h100", "hpe"])
def test_a_broken_expand_falls_back_with_the_same_facts(key, fault, tmp_path):
    with sushy_static(tree(key), tmp_path) as plain:
        want, _ = facts(plain)
        with fault_proxy(plain, tmp_path, args=["--expand", "--expand-fault", fault]
                         ) as (broken,):
            got, _ = facts(broken)
    assert got == want


def test_a_bmc_refusing_concurrency_with_503_is_still_discovered(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with sushy_static(tree("dgx-h100"), tmp_path) as plain:
        want, _ = facts(plain)
        caplog.clear()
        with fault_proxy(plain, tmp_path, args=["--expand", "--busy", "1", "--delay", "0.05"]
                         ) as (busy,):
            got, _ = facts(busy)
    assert got == want
    assert "BMC refused concurrent requests" in caplog.text
    # Basic auth here (the recording has no sessions): neither the password nor its header.
    header = base64.b64encode(f"root:{PASSWORD}".encode()).decode()
    assert PASSWORD not in caplog.text and header not in caplog.text


def test_a_hung_bmc_is_cut_off_at_the_deadline_while_the_others_finish(tmp_path):
    # The Systems collection is read once, alone, right after logging in (to find the host's
    # System): hung there, the cut-off names it whatever the machine's load, whereas a path
    # read among discovery's parallel reads loses the race to any slow neighbour.
    hang = "/redfish/v1/Systems"
    with sushy_static(tree("dgx-h100"), tmp_path) as plain, \
            fault_proxy(plain, tmp_path, listen=("127.0.0.1",) * 3,
                        args=["--expand", "--delay", "0.02"]) as healthy, \
            fault_proxy(plain, tmp_path, args=["--expand", "--slow", f"{hang}=3600"]
                        ) as (hung,):
        urls = {f"dgx-{i}": url for i, url in enumerate(healthy)} | {"dgx-hung": hung}
        # The hung BMC answers after an hour: only its deadline can end its discovery, so
        # discover_all returning at all (pytest-timeout guards a hang) proves the cut-off. The
        # healthy ones get a deadline no loaded machine reaches, so load cannot fail them; the
        # hung one's 10 s is time enough to log in on a loaded machine.
        targets = [DiscoveryTarget(name, partial(open_redfish, url, "root", Secret(PASSWORD),
                                                 OPTS, name=f"{name} (BMC {url})",
                                                 boot_port=NicPolicy(rule=ONBOARD).choose),
                                   deadline_s=10.0 if name == "dgx-hung" else 600.0,
                                   nic=NicPolicy(rule=ONBOARD))
                   for name, url in urls.items()]
        results = {r.host: r for r in discover_all(targets, max_parallel=4)}
    for name in ("dgx-0", "dgx-1", "dgx-2"):
        assert results[name].ok, results[name].error
    stuck = results["dgx-hung"]
    assert stuck.reason == "deadline exceeded"
    assert stuck.facts is None
    error = stuck.error or ""
    assert "dgx-hung" in error and hang in error
    assert "settings.redfish.discovery_deadline_s" in error


def test_a_paged_collection_is_read_to_its_last_page(tmp_path):
    # A variation written by the project on its split-chassis tree: the Chassis collection
    # answers in two pages (Members@odata.nextLink), and the riser holding the host's
    # adapters is on the second. (sushy-static serves no query, hence a path for page 2.)
    paged = tmp_path / "paged"
    shutil.copytree(tree("split"), paged)
    listing = json.loads((paged / "Chassis" / "index.json").read_text())
    first, rest = listing["Members"][:1], listing["Members"][1:]
    assert any(m["@odata.id"].endswith("/riser") for m in rest)
    page2 = "/redfish/v1/ChassisPages/2"
    (paged / "Chassis" / "index.json").write_text(json.dumps(
        {**listing, "Members": first, "Members@odata.nextLink": page2}))
    (paged / "ChassisPages" / "2").mkdir(parents=True)
    (paged / "ChassisPages" / "2" / "index.json").write_text(json.dumps(
        {"@odata.id": "/redfish/v1/Chassis", "Members": rest,
         "Members@odata.count": len(listing["Members"])}))
    logs = tmp_path / "logs"
    logs.mkdir()
    with sushy_static(tree("split"), logs) as whole:
        want, _ = facts(whole)
    with sushy_static(paged, logs) as plain:
        got_plain, _ = facts(plain)
        with fault_proxy(plain, logs, args=["--expand"]) as (expanding,):
            got_expanded, _ = facts(expanding)
    assert got_plain == want and got_expanded == want
    assert any(nic["source"].startswith("/redfish/v1/Chassis/riser/") for nic in want["nics"])
