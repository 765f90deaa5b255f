"""Tables fit 80 columns: columns drop by priority, identifiers are never cut, --wide shows all."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from provisioner.bmc.base import Drive, HostFacts, NicPort
from provisioner.cli.bmc_cmds import _discovery_table
from provisioner.cli.main import app
from provisioner.cli.tables import Col, fit_table, skew_text
from provisioner.inventory import load_site
from provisioner.workflow.discover import DiscoveryResult

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("state_dir")


@pytest.fixture(autouse=True)
def columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def _render(table: object, width: int = 80) -> str:
    out = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    out.print(table)
    return out.export_text()


def _assert_fits(text: str, width: int = 80) -> None:
    assert "…" not in text and "..." not in text, text
    for line in text.splitlines():
        assert len(line) <= width, line


def _facts(**kw: object) -> HostFacts:
    base: dict[str, object] = {
        "manufacturer": None,
        "model": None,
        "serial": "",
        "bmc_firmware": "1.0.0",
        "clock_skew_s": -0.4,
        "provisioning_mac": "52:54:00:12:34:56",
        "nics": [NicPort(id="1", mac="52:54:00:12:34:56")],
        "drives": [Drive(id="d1"), Drive(id="d2"), Drive(id="d3")],
        "extra": {"vendor": "generic"},
    }
    base.update(kw)
    return HostFacts(**base)  # type: ignore[arg-type]


def test_discovery_of_the_lab_fits_80_columns_and_is_honest(tmp_path: Path) -> None:
    site = load_site(REPO / "inventory" / "example" / "site.yml")
    lab_host = site.hosts[0]
    lab_host.vars["lab_domain"] = "lab-host01"  # how the lab's generated site marks its VMs
    real = site.hosts[1]
    results = [
        DiscoveryResult(lab_host.name, _facts()),
        DiscoveryResult(
            real.name,
            _facts(
                manufacturer="Dell Inc.",
                model="PowerEdge XE9680",
                serial="CN7016359D0123",
                bmc_firmware="7.10.30.00",
                clock_skew_s=312.6,
                extra={"vendor": "dell"},
                provisioning_mac="b0:26:28:ab:cd:ef",
            ),
        ),
        DiscoveryResult("gpu-r09-u01", None, "unreachable", "connection refused by 10.11.0.200:443"),
    ]
    text = _render(_discovery_table(results, 60, site, width=80))
    _assert_fits(text)
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert "emulated" in rows[lab_host.name] and "generic: ?" not in text
    assert "52:54:00:12:34:56" in rows[lab_host.name] and "b0:26:28:ab:cd:ef" in rows[real.name]
    assert "-0s" not in text and " 0s " in rows[lab_host.name]
    assert "+313s" in rows[real.name]
    assert "unreachable" in rows["gpu-r09-u01"]
    wide = _render(_discovery_table(results, 60, site, width=80, wide=True), width=200)
    assert "Dell Inc. PowerEdge XE9680" in wide and "7.10.30.00" in wide and "CN7016359D0123" in wide
    assert "not shown" not in wide


def test_fit_table_drops_by_priority_and_names_what_it_hid() -> None:
    cols = (Col("host"), Col("a", priority=1), Col("b", priority=2), Col("reason", wrap=True))
    rows = [["host-" + "x" * 20, "A" * 25, "B" * 25, "a long reason " * 10]]
    text = _render(fit_table("t", cols, rows, width=80))
    _assert_fits(text)
    assert "A" * 25 in text and "B" * 25 not in text
    assert "not shown: b (--wide shows them)" in text
    assert "host-" + "x" * 20 in text  # identifiers whole
    assert skew_text(None) == "-" and skew_text(-0.4) == "0s" and skew_text(-3.6) == "-4s"


@pytest.mark.parametrize(
    "argv",
    [
        ["inventory", "show", "--site", "example"],
        ["status", "--site", "example"],
        ["hosts", "--site", "example"],
    ],
)
def test_cli_tables_fit_80_columns(argv: list[str]) -> None:
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    _assert_fits(res.stdout)
    assert "gpu-r01-u03" in res.stdout


def test_inventory_show_wide_shows_every_column() -> None:
    narrow = runner.invoke(app, ["inventory", "show", "--site", "example"]).stdout
    assert "not shown:" in narrow and "ipoib" in narrow.split("not shown:")[1]
    res = runner.invoke(app, ["inventory", "show", "--site", "example", "--wide"])
    assert res.exit_code == 0, res.output
    header = next(line for line in res.stdout.splitlines() if "┃ host" in line)
    for col in ("rack", "profile", "BMC", "provisioning", "ipoib", "prov. MAC"):
        assert col in header
    assert "…" not in res.stdout


def test_status_shows_long_errors_wrapped_not_cut(tmp_path: Path) -> None:
    from provisioner.state import NodeState, StateStore

    store = StateStore.for_site("example")
    store.ensure_hosts(["gpu-r01-u03"])
    err = "no disk matches root_disk serial NO-SUCH-DISK-SERIAL (disks: vda S1, vdb S2, vdc S3)"
    store.transition("gpu-r01-u03", NodeState.FAILED, reason="deploy failed", error=err, force=True)
    res = runner.invoke(app, ["status", "--site", "example", "gpu-r01-u03"])
    assert res.exit_code == 0, res.output
    _assert_fits(res.stdout)
    # the last-error column, read down its wrapped lines, holds the whole message
    cells = [line.split("│")[4].strip() for line in res.stdout.splitlines() if line.startswith("│")]
    assert "".join(cells).replace(" ", "") == err.replace(" ", "")
