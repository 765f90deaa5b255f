"""Bulk BMC operations' bookkeeping: each host's history says what was done and how it ended."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from provisioner.exceptions import CredentialError, ExitCode
from provisioner.http_policy import deadline
from provisioner.inventory import load_site
from provisioner.redfish.errors import BMCDeadline
from provisioner.state import StateStore
from provisioner.workflow.bulk import STEPWISE, ActionResult, record_outcomes, run_on_hosts
from provisioner.workflow.discover import site_targets


def test_each_outcome_is_an_event_in_its_hosts_history(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite", site="t")
    store.ensure_hosts(["a", "b"])
    record_outcomes(store, [
        ActionResult("a", detail="On"),
        ActionResult("b", reason="BMCAuthError", error="401 from the BMC"),
    ], "power", "power on")
    (a,) = [e for e in store.events("a") if e.kind == "power"]
    (b,) = [e for e in store.events("b") if e.kind == "power"]
    assert (a.message, a.data) == ("power on: ok", None)
    assert (b.message, b.data) == ("power on: BMCAuthError", {"error": "401 from the BMC"})


def test_credentials_that_cannot_be_resolved_stop_the_run_before_any_bmc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The example's BMCs (10.11.0.x) are nowhere: asking one would time out, not raise.
    monkeypatch.delenv("PROVISIONER_BMC_PASSWORD", raising=False)
    site = load_site("example")
    hosts = list(site.hosts[:3])
    asked: list[str] = []
    with pytest.raises(CredentialError, match="PROVISIONER_BMC_PASSWORD is not set"):
        run_on_hosts(site, hosts, lambda bmc: asked.append("op") or "")
    with pytest.raises(CredentialError, match="PROVISIONER_BMC_PASSWORD is not set"):
        site_targets(site, hosts)
    assert asked == [] and CredentialError.exit_code == ExitCode.BAD_INPUT


def test_a_surprise_on_one_host_is_one_log_line_and_its_result(
        caplog: pytest.LogCaptureFixture) -> None:
    site = load_site("example")
    hosts = list(site.hosts[:2])

    class Fake:
        warnings: list[str] = []

        def close(self) -> None:
            pass

    def op(bmc: object) -> str:
        raise RuntimeError("a bug")

    caplog.set_level(logging.INFO)
    results = run_on_hosts(site, hosts, op, opener=lambda s, h: Fake())  # type: ignore[arg-type,return-value]
    assert [r.reason for r in results] == ["internal error"] * 2
    assert results[0].error == "RuntimeError: a bug"
    assert "Traceback" not in caplog.text and "failed unexpectedly: RuntimeError" in caplog.text


class _Opened:
    """What an opener returns here: the deadline armed while the BMC was opened."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.opened_under = deadline.allowed_s()

    def close(self) -> None:
        pass


def test_each_hosts_conversation_runs_under_the_site_deadline_plus_its_waits() -> None:
    # #32 item 7: power, boot, bios and firmware verbs all run through run_on_hosts.
    site = load_site("example")
    hosts = list(site.hosts[:2])
    base = site.settings.redfish.host_deadline_s

    def seen(bmc: object) -> str:
        return f"{bmc.opened_under:g} {deadline.allowed_s():g}"  # type: ignore[attr-defined]

    plain = run_on_hosts(site, hosts, seen, opener=lambda s, h: _Opened())  # type: ignore[arg-type,return-value]
    assert [r.detail for r in plain] == [f"{base:g} {base:g}"] * 2
    waited = run_on_hosts(site, hosts, seen, opener=lambda s, h: _Opened(),  # type: ignore[arg-type,return-value]
                          waits_s=30)
    assert {r.detail for r in waited} == {f"{base + 30:g} {base + 30:g}"}


def test_a_stepwise_operation_arms_its_own_deadlines_after_a_bounded_opening() -> None:
    site = load_site("example")
    base = site.settings.redfish.host_deadline_s

    def seen(bmc: object) -> str:
        return f"{bmc.opened_under:g} {deadline.allowed_s()}"  # type: ignore[attr-defined]

    (res,) = run_on_hosts(site, site.hosts[:1], seen, opener=lambda s, h: _Opened(),  # type: ignore[arg-type,return-value]
                          waits_s=STEPWISE)
    assert res.detail == f"{base:g} None"


def test_a_host_past_its_deadline_names_the_setting_and_the_waits() -> None:
    site = load_site("example")

    def late(bmc: object) -> str:
        raise BMCDeadline("gave up: the BMC's answers took longer than the 630s allowed for "
                          "this host", bmc="h (BMC x)", path="/redfish/v1/Systems/1",
                          hint="raise settings.redfish.discovery_deadline_s")

    (res,) = run_on_hosts(site, site.hosts[:1], late, opener=lambda s, h: _Opened(),  # type: ignore[arg-type,return-value]
                          waits_s=30)
    assert res.reason == "deadline exceeded"
    assert "settings.redfish.host_deadline_s (600 s) + 30 s of waits" in (res.error or "")
    assert "discovery_deadline_s" not in (res.error or "")
