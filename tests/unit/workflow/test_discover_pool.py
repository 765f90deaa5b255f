"""The discovery pool: every host gets a result, in order, whatever its BMC does."""

from __future__ import annotations

import os

import pytest

from provisioner.redfish.errors import BMCAuthError, BMCTimeout
from provisioner.workflow.discover import (
    REASON_BUG,
    DiscoveryTarget,
    default_processes,
    discover_all,
)


def _fail(exc: Exception):
    def opener():
        raise exc

    return opener


def _targets(n: int) -> list[DiscoveryTarget]:
    out = []
    for i in range(n):
        exc: Exception = (BMCTimeout("no answer", bmc=f"h{i}") if i % 3 else
                          BMCAuthError("bad password", bmc=f"h{i}"))
        if i == 4:
            exc = ZeroDivisionError("a bug")
        out.append(DiscoveryTarget(f"h{i:03d}", _fail(exc)))
    return out


@pytest.mark.parametrize("processes", [1, 2])
def test_every_host_gets_its_reason_in_order(processes):
    seen: list[str] = []
    targets = _targets(9)
    results = discover_all(targets, max_parallel=4, processes=processes,
                           on_result=lambda r: seen.append(r.host))
    assert [r.host for r in results] == [t.name for t in targets]
    assert sorted(seen) == [t.name for t in targets]
    assert results[0].reason == "auth failed" and "bad password" in (results[0].error or "")
    assert results[1].reason == "timeout"
    assert results[4].reason == REASON_BUG and "ZeroDivisionError" in (results[4].error or "")


def test_a_dead_worker_process_is_reported_not_hung():
    def die():
        os._exit(3)

    targets = [DiscoveryTarget("ok-ish", _fail(BMCTimeout("slow"))),
               DiscoveryTarget("killer", die)]
    results = discover_all(targets, max_parallel=1, processes=2)
    assert results[0].reason == "timeout"
    assert results[1].reason == REASON_BUG
    assert "worker process died" in (results[1].error or "")


def test_default_processes():
    cores = os.cpu_count() or 1
    assert default_processes(10, 512) == 1
    assert default_processes(512, 512) == min(4, 2 * cores)  # 128 BMCs per interpreter
    assert default_processes(512, 128) == 1  # the site allows 128 at once: one process
    assert default_processes(100_000, 100_000) == 2 * cores
    assert discover_all([]) == []
