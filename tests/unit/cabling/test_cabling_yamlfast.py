"""The links fast path reads exactly what the YAML parser reads, or steps aside."""

from __future__ import annotations

import pytest
import yaml

from cabling.errors import CablingInputError
from cabling.manifest import dump_manifest, parse_manifest
from cabling.plan import PlanSpec, plan_fat_tree
from cabling.yamlfast import split_links


def _yaml(text: str) -> object:
    return yaml.load(text, Loader=yaml.CSafeLoader)


def test_the_plan_dump_is_read_as_yaml_reads_it_with_its_lines() -> None:
    text = dump_manifest(plan_fat_tree(PlanSpec(hosts=16, hcas=4, radix=8)))
    split = split_links(text)
    assert split is not None
    rest, links, where = split
    data = _yaml(rest)
    assert isinstance(data, dict)
    data["links"] = links
    assert data == _yaml(text)
    assert len(rest.split("\n")) == len(text.split("\n"))
    lines = text.split("\n")
    assert all(lines[w - 1].lstrip().startswith("- {") for w in where if w)
    m = parse_manifest(text, "p.yaml")
    assert m.where_link(3) == f"p.yaml:{where[3]}"


@pytest.mark.parametrize("line", [
    "- {a: 'x:1', b: 'y:2', cable: yes}",  # YAML 1.1 reads yes as a boolean
    "- {a: 'x:1', b: 'y:2', cable: 00123}",  # a number
    "- {a: 'x:1', b: 'y:2', cable: 'it''s'}",  # a quote escape
    '- {a: "x:\\t1", b: y}',  # a backslash escape
    "- {a: x:1, b: 'y:2'}",  # a plain scalar with a colon
    "- {a: 'x:1', b: 'y:2'} # comment",
    "-   {a: 'x:1', b: 'y:2'}",
    "- a: 'x:1'",
])
def test_lines_outside_the_fast_form_leave_it_to_yaml(line: str) -> None:
    text = f"version: 1\ndevices: []\nlinks:\n- {{a: 'h:mlx5_0', b: 's:1'}}\n{line}\n"
    assert split_links(text) is None


def test_a_later_top_level_key_ends_the_links_block() -> None:
    text = "links:\n  - {a: 'h:mlx5_0', b: 's:1', cable: C1}\n\n  # note\n  - {b: \"s:2\", a: h:mlx5_1}\n"
    assert split_links(text) is None  # h:mlx5_1 unquoted has a colon
    text = "links:\n  - {a: 'h:mlx5_0', b: 's:1', cable: C1}\n  - {b: \"s:2\", a: 'h:mlx5_1'}\nversion: 1\n"
    split = split_links(text)
    assert split is not None
    rest, links, where = split
    assert links == [{"a": "h:mlx5_0", "b": "s:1", "cable": "C1"}, {"b": "s:2", "a": "h:mlx5_1"}]
    assert where == [2, 3]
    assert _yaml(rest) == {"links": [], "version": 1}


def test_a_bad_link_still_gets_its_file_line() -> None:
    text = dump_manifest(plan_fat_tree(PlanSpec(hosts=16, hcas=4, radix=8)))
    lines = text.split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith("- {a:")) + 5
    lines[k] = lines[k].replace("a: '", "a: 'nocolon", 1).replace(":mlx5", "mlx5", 1)
    with pytest.raises(CablingInputError, match=rf"p.yaml:{k + 1}: \[links.5.a\]"):
        parse_manifest("\n".join(lines), "p.yaml")


def test_as_built_links_with_widths_take_the_fast_path() -> None:
    text = ("version: 1\ndevices: []\nlinks:\n- {a: 'r1-l1:1', b: 'gpu1:mlx5_0', speed: NDR, width: 4x}\n"
            "- {a: 'r1-l1:2', b: 'gpu2:mlx5_0', speed: HDR, width: 2x, length_m: '3'}\n")
    split = split_links(text)
    assert split is not None
    assert split[1][0] == {"a": "r1-l1:1", "b": "gpu1:mlx5_0", "speed": "NDR", "width": "4x"}
    data = _yaml(split[0])
    assert isinstance(data, dict)
    data["links"] = split[1]
    assert data == _yaml(text)


@pytest.mark.parametrize("value", ["12", "0x1f", "1.5", "2026-01-02", "on", "Off", "NULL", "017", "1_000"])
def test_values_yaml_types_as_non_text_step_aside(value: str) -> None:
    text = f"links:\n- {{a: 'x:1', b: 'y:2', cable: {value}}}\n"
    assert not isinstance(_yaml(text)["links"][0]["cable"], str)  # type: ignore[index]
    assert split_links(text) is None


def test_devices_of_a_plan_are_read_as_yaml_reads_them_with_their_lines() -> None:
    from cabling.manifest import _item_lines, _Loader
    from cabling.model import Manifest
    from cabling.yamlfast import split_devices

    text = dump_manifest(plan_fat_tree(PlanSpec(hosts=64, hcas=4, radix=16, tiers=3)))
    rest, links, _where = split_links(text)  # type: ignore[misc]
    split = split_devices(rest)
    assert split is not None
    rest2, devices, lines = split
    data = _yaml(rest2)
    assert isinstance(data, dict)
    data.update(links=links, devices=devices)
    assert data == _yaml(text)
    loader = _Loader(text)
    assert lines == _item_lines(loader.get_single_node(), "devices", "name")
    m = parse_manifest(text, "p.yaml")
    assert m.model_dump() == Manifest.model_validate(_yaml(text)).model_dump()
    assert m.where_device("gpu003") == f"p.yaml:{lines['gpu003']}"


@pytest.mark.parametrize("line", [
    "  location: {rack: r1, u: 017}",  # YAML 1.1 octal
    "  location:\n    rack: r1",  # a nested block
    "  model: Quantum 2",  # a plain scalar with a space
    "  speed: NDR # fast",
    "  hcas: [mlx5_0,\n    mlx5_1]",  # a wrapped flow sequence, as dump_manifest writes long ones
    "  name: again",  # a key twice
])
def test_device_lines_outside_the_fast_form_leave_it_to_yaml(line: str) -> None:
    from cabling.yamlfast import split_devices

    text = f"devices:\n- name: gpu1\n  kind: host\n{line}\nlinks: []\n"
    assert split_devices(text) is None
