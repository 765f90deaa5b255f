"""The site loader: the example is valid; each kind of broken copy gives one clear error."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from provisioner.exceptions import InventoryError
from provisioner.inventory import load_site
from provisioner.inventory.yamlsrc import load_yaml
from tests.support.site_files import EXAMPLE, broken_copy, line_of


def test_example_is_valid() -> None:
    site = load_site("example")
    assert site.name == "example"
    assert len(site.racks) == 2
    assert len(site.hosts) == 32
    assert {h.rack for h in site.hosts} == {"r01", "r02"}
    assert all(h.profile.gpus == 8 and h.profile.ib_hcas == 8 for h in site.hosts)
    first = site.host("gpu-r01-u03")
    assert first.bmc.vendor == "dell" and first.bmc.credentials == "idrac"
    assert first.bmc.ca_bundle == EXAMPLE.parent / "bmc-ca.pem"
    assert first.root_disk is not None and first.root_disk.model == "Dell BOSS-N1"


def test_duplicate_hostname(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      - u: 5\n", "      - u: 5\n        name: gpu-r01-u03\n")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, '- u: 5')}" in msg
    assert "racks[0].hosts[1]" in msg
    assert "duplicate hostname 'gpu-r01-u03'" in msg


def test_overlapping_subnets(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "cidr: 10.12.0.0/20", "cidr: 10.10.4.0/22")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, 'cidr: 10.10.4.0/22')}" in msg
    assert "networks.ipoib.cidr" in msg
    assert "overlaps network 'provisioning'" in msg


def test_two_hosts_in_one_u(tmp_path: Path) -> None:
    # hosts are 2U: one at U4 overlaps the one at U3
    path = broken_copy(tmp_path, "      - u: 5\n", "      - u: 4\n")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, '- u: 4')}" in msg
    assert "racks[0].hosts[1].u" in msg
    assert "overlaps host 'gpu-r01-u03'" in msg


def test_yaml_syntax_error(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "  uplink_gbps: 100\n", "  uplink_gbps: [100\n")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert re.search(rf"{re.escape(str(path))}:\d+", msg)
    assert "YAML syntax error" in msg


def test_missing_credentials_reference(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "credentials: idrac}", "credentials: idrac-typo}", count=2)
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, 'credentials: idrac-typo')}" in msg
    assert "racks[0].defaults.bmc.credentials" in msg
    assert "unknown credentials reference 'idrac-typo'" in msg
    assert "known: idrac" in msg


def test_host_without_credentials(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "{vendor: dell, credentials: idrac}", "{vendor: dell}")
    with pytest.raises(InventoryError, match="has no BMC credentials reference"):
        load_site(path)


def test_unknown_profile(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      profile: hgx-h100\n", "      profile: hgx-h200\n")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert "unknown profile 'hgx-h200'" in msg and "known: hgx-h100" in msg
    assert f"{path}:{line_of(path, 'profile: hgx-h200')}" in msg


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "  uplink_gbps: 100\n", "  uplink_gpbs: 100\n")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, 'uplink_gpbs')}" in msg
    assert "unknown key 'uplink_gpbs'" in msg


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "  uplink_gbps: 100\n", "  uplink_gbps: 100\n  uplink_gbps: 40\n")
    with pytest.raises(InventoryError, match="duplicate key 'uplink_gbps'"):
        load_site(path)


def test_duplicate_bmc_address(tmp_path: Path) -> None:
    path = broken_copy(
        tmp_path,
        "      - u: 3\n      - u: 5\n",
        "      - u: 3\n        bmc: {address: 10.11.0.200}\n      - u: 5\n        bmc: {address: 10.11.0.200}\n",
    )
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert "already used by host 'gpu-r01-u03'" in msg
    assert f"{path}:{line_of(path, 'address: 10.11.0.200', 2)}" in msg


def test_one_bmc_serving_two_nodes_names_each_nodes_system(tmp_path: Path) -> None:
    shared = "10.11.0.200"
    path = broken_copy(
        tmp_path, "      - u: 3\n      - u: 5\n",
        f"      - u: 3\n        bmc: {{address: {shared}, system: Node0}}\n"
        f"      - u: 5\n        bmc: {{address: {shared}, system: Node1}}\n",
    )
    hosts = {h.name: h for h in load_site(path).hosts}
    assert hosts["gpu-r01-u03"].bmc.system == "Node0"
    assert hosts["gpu-r01-u05"].bmc.system == "Node1"
    assert hosts["gpu-r01-u03"].bmc.url == hosts["gpu-r01-u05"].bmc.url
    # the same node twice, or one of the two without its node: still one BMC for two hosts
    for first, second in (("Node0", "Node0"), ("Node0", None)):
        own = f", system: {second}" if second else ""
        (tmp_path / f"{first}-{second}").mkdir()
        path = broken_copy(
            tmp_path / f"{first}-{second}", "      - u: 3\n      - u: 5\n",
            f"      - u: 3\n        bmc: {{address: {shared}, system: {first}}}\n"
            f"      - u: 5\n        bmc: {{address: {shared}{own}}}\n",
        )
        with pytest.raises(InventoryError, match="already used by host 'gpu-r01-u03'") as e:
            load_site(path)
        assert "bmc.system" in str(e.value.hint)


def test_bmc_system_must_be_an_id(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      - u: 3\n", "      - u: 3\n        bmc: {system: 'a/../b'}\n")
    with pytest.raises(InventoryError) as e:
        load_site(path)
    assert "system" in str(e.value)


def test_one_bmc_address_on_two_ports_is_two_bmcs(tmp_path: Path) -> None:
    # a BMC is its address and port: two behind one forwarding address are not a collision
    path = broken_copy(
        tmp_path,
        "      - u: 3\n      - u: 5\n",
        "      - u: 3\n        bmc: {address: 10.11.0.200, port: 8443}\n"
        "      - u: 5\n        bmc: {address: 10.11.0.200, port: 8444}\n",
    )
    site = load_site(path)
    first, second = site.host("gpu-r01-u03"), site.host("gpu-r01-u05")
    assert (first.bmc.address, first.bmc.port) == ("10.11.0.200", 8443)
    assert (second.bmc.address, second.bmc.port) == ("10.11.0.200", 8444)


def test_duplicate_provisioning_mac(tmp_path: Path) -> None:
    path = broken_copy(
        tmp_path,
        "      - u: 3\n      - u: 5\n",
        "      - u: 3\n        provisioning_mac: aa:bb:cc:dd:ee:01\n"
        "      - u: 5\n        provisioning_mac: aa:bb:cc:dd:ee:01\n",
    )
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, 'provisioning_mac', 2)}" in msg
    assert "racks[0].hosts[1].provisioning_mac" in msg
    assert ("MAC aa:bb:cc:dd:ee:01 of host 'gpu-r01-u05' is already the provisioning MAC of "
            "host 'gpu-r01-u03'") in msg


def test_pinned_address_taken_by_a_planned_one(tmp_path: Path) -> None:
    planned = load_site(EXAMPLE).host("gpu-r01-u03").addresses["provisioning"]
    path = broken_copy(
        tmp_path,
        "      - u: 5\n",
        f"      - u: 5\n        addresses: {{provisioning: {planned}}}\n",
    )
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert f"{path}:{line_of(path, '- u: 5')}" in msg
    assert "racks[0].hosts[1]" in msg
    assert (
        f"host 'gpu-r01-u05' and host 'gpu-r01-u03' both get {planned} on network 'provisioning'"
        in msg
    )


def test_too_small_subnet_is_reported_as_exhaustion(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "cidr: 10.12.0.0/20", "cidr: 10.12.0.0/26")
    with pytest.raises(InventoryError) as exc:
        load_site(path)
    msg = str(exc.value)
    assert "network 'ipoib' (10.12.0.0/26) is exhausted" in msg
    assert "widen the CIDR" in msg


def test_bad_cidr_and_host_bits(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "cidr: 10.12.0.0/20", "cidr: 10.12.0.1/20")
    with pytest.raises(InventoryError, match=r"has host bits set.*\n.*did you mean 10\.12\.0\.0/20"):
        load_site(path)


def test_site_not_found_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="provision lab up"):
        load_site("lab", inventory_dir=tmp_path)


def test_select_by_glob_and_rack() -> None:
    site = load_site("example")
    assert [h.name for h in site.select(["gpu-r02-u0*"])] == [
        "gpu-r02-u03",
        "gpu-r02-u05",
        "gpu-r02-u07",
        "gpu-r02-u09",
    ]
    assert len(site.select(None, "r01")) == 16
    with pytest.raises(InventoryError.__mro__[1], match="no host matches"):
        site.select(["nope-*"])


def test_copy_of_example_in_other_dir_loads(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE.parent, tmp_path / "mysite")
    assert len(load_site(tmp_path / "mysite").hosts) == 32


def _alias_bomb(levels: int = 9) -> str:
    """Nine lists of nine aliases of the list before: 9^9 values from ten lines."""
    out = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    out += [f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(out) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_built(tmp_path: Path) -> None:
    site = tmp_path / "site.yml"
    site.write_text("site: bomb\n" + _alias_bomb() + "racks: *l9\n")
    with pytest.raises(InventoryError, match=r"aliases \(\*name\) expand to more than 1,000,000") as e:
        load_site(site)
    assert e.value.file == str(site)


def test_aliases_that_repeat_a_block_are_fine(tmp_path: Path) -> None:
    import yaml

    from provisioner.inventory.yamlsrc import alias_expansion

    node = yaml.compose("a: &a {x: 1, y: [1, 2]}\nb: *a\nc: *a\n")
    assert alias_expansion(node) == 2 * 7  # two more copies of a 7-node mapping
    assert alias_expansion(yaml.compose("a: [1, 2, 3]\n")) == 0
    # levels of 10, 91, 820 and 7,381 nodes (list + 9 items) written as 10 + 3 list nodes
    assert alias_expansion(yaml.compose(_alias_bomb(3))) == (91 - 1) + (820 - 1) + (7381 - 1)


def test_a_recursive_alias_is_an_error_not_a_hang(tmp_path: Path) -> None:
    site = tmp_path / "site.yml"
    site.write_text("site: loop\nracks: &r [*r]\n")
    with pytest.raises(InventoryError):
        load_site(site)


@pytest.mark.parametrize("address", [
    '"a b/c@d"', '"https://10.11.0.200:1/x"', '"evil.example@10.11.0.200"', '""',
    '"10.11.0.200\\nHost: x"', '"::1]:9/x"', "bmc." + "x" * 64 + ".example"])
def test_a_bmc_address_that_is_no_ip_or_host_name_is_refused(tmp_path: Path, address: str
                                                             ) -> None:
    # Each would have been pasted into the BMC's URL (and the user@host form hands the
    # credentials' request to another host).
    path = broken_copy(tmp_path, "      - u: 5\n",
                       f"      - u: 5\n        bmc: {{address: {address}}}\n")
    with pytest.raises(InventoryError, match="neither an IP address nor a host name") as exc:
        load_site(path)
    assert f"{path}:{line_of(path, 'bmc: {address:')}" in str(exc.value)
    assert "bmc.address" in str(exc.value)


def test_a_bmc_host_name_is_fine(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "      - u: 5\n",
                       "      - u: 5\n        bmc: {address: gpu-r01-u05-bmc.mgmt.example}\n")
    assert load_site(path).host("gpu-r01-u05").bmc.address == "gpu-r01-u05-bmc.mgmt.example"


@pytest.mark.parametrize("kind", ["dev-zero", "huge"])
def test_a_site_path_that_is_no_small_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    site = tmp_path / "site.yml"
    if kind == "dev-zero":
        site.symlink_to("/dev/zero")
    else:
        site.write_bytes(b"# padding\n" * (2 * 1024 * 1024))  # 20 MiB of comments
    want = "not a regular file" if kind == "dev-zero" else "over 16 MiB"
    with pytest.raises(InventoryError, match=want):
        load_yaml(site)  # load_site looks only for regular files; any other YAML read is here
    if kind == "huge":
        with pytest.raises(InventoryError, match=want):
            load_site(site)
