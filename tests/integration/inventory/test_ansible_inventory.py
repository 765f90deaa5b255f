"""The site file is Ansible's inventory: real ansible-inventory and ansible-playbook read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def ansible(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, check=False)


def test_ansible_inventory_list_shows_hosts_groups_and_vars() -> None:
    res = ansible(str(BIN / "ansible-inventory"), "-i", "inventory/example", "--list")
    assert res.returncode == 0, res.stderr
    inv = json.loads(res.stdout)
    assert len(inv["site_example"]["hosts"]) == 32
    assert len(inv["rack_r01"]["hosts"]) == 16 and len(inv["rack_r02"]["hosts"]) == 16
    assert len(inv["profile_hgx_h100"]["hosts"]) == 32
    assert "gpu-r01-u03" in inv["gpu_hosts"]["hosts"]
    hv = inv["_meta"]["hostvars"]["gpu-r02-u33"]
    assert hv["ansible_host"] == "10.10.0.160"
    assert hv["provisioner_rack"] == "r02" and hv["provisioner_u"] == 33
    assert hv["provisioner_gpus"] == 8
    assert hv["nvidia_driver_branch"] == "550"  # profile vars reach the hosts
    assert "Unable to parse" not in res.stderr


def test_playbook_sees_the_same_hosts(tmp_path: Path) -> None:
    play = tmp_path / "list.yml"
    play.write_text(
        "- hosts: rack_r02\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug: {msg: '{{ inventory_hostname }} U{{ provisioner_u }}'}\n"
    )
    res = ansible(
        str(BIN / "ansible-playbook"), "-i", "inventory/example", "--list-hosts", str(play)
    )
    assert res.returncode == 0, res.stderr
    assert "hosts (16)" in res.stdout and "gpu-r02-u03" in res.stdout


def test_invalid_site_fails_ansible_with_the_loader_message(tmp_path: Path) -> None:
    site = tmp_path / "bad"
    site.mkdir()
    text = (REPO / "inventory/example/site.yml").read_text().replace("      - u: 5\n", "      - u: 4\n")
    (site / "site.yml").write_text(text)
    res = ansible(
        str(BIN / "ansible-inventory"), "-i", str(site), "--list",
    )
    combined = res.stdout + res.stderr
    assert "overlaps host 'gpu-r01-u03'" in combined
