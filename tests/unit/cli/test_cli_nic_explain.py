"""`discover --explain`'s table: each port's verdict, shortened only where the lines under the
table carry the detail."""

from __future__ import annotations

import io

from rich.console import Console

from provisioner.cli.nic_explain import explain_table


def _port(id_: str, mac: str, why_not: list[str], **kw: object) -> dict[str, object]:
    return {"id": id_, "mac": mac, "link": "unknown", "chosen": not why_not, "why_not": why_not,
            **kw}


def _render(explain: dict[str, object]) -> str:
    out = Console(file=io.StringIO(), width=80, color_system=None)
    out.print(explain_table("r1-u01", explain))
    return out.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_a_mac_prefix_reason_keeps_the_whole_prefix() -> None:
    text = _render({"rule": "mac_prefix=52:54:00:18:00", "ports": [
        _port("1", "52:54:00:18:00:01", []),
        _port("2", "3c:ec:ef:00:00:02", ["MAC does not start with 52:54:00:18:00"]),
    ]})
    cells = "".join(line.split("│")[5].strip() for line in text.splitlines()
                    if line.startswith("│") and len(line.split("│")) > 5)
    # read down the wrapped verdict cells, spaces aside
    assert "MACdoesnotstartwith52:54:00:18:00" in cells.replace(" ", "")


def test_details_printed_under_the_table_are_left_out_of_the_cell() -> None:
    text = _render({"rule": "onboard", "ports": [
        _port("1", "52:54:00:18:00:01", []),
        _port("2", "52:54:00:18:00:02",
              ["not onboard (add-in, from /redfish/v1/Chassis/1/NetworkAdapters/2)"]),
        _port("3", "52:54:00:18:00:03", ["never a PXE port: the BMC's USB host interface"],
              excluded="the BMC's USB host interface"),
    ]})
    assert "not onboard (add-in)" in text
    assert "never a PXE port" in text and "USB host interface" not in text
    assert "/redfish/v1/Chassis" not in text
