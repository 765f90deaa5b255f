"""Guards of the GPU-fabric roles that need more than one host, which a one-instance molecule
scenario cannot show: pcie_switch_firmware refuses to flash several hosts at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

PLAY = """\
- name: Flash without serial
  hosts: all
  gather_facts: false
  tasks:
    - name: Run the flash stage of the role
      ansible.builtin.include_role:
        name: pcie_switch_firmware
        tasks_from: flash.yml
      vars:
        pcie_switch_firmware_outdated: [{device: "0000:1c:00.0", version: "0.21.2.0"}]
"""


def test_switch_firmware_flash_refuses_more_than_one_host_at_once(tmp_path: Path) -> None:
    playbook_bin = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent))
    assert playbook_bin is not None, "ansible-playbook is not installed: ./scripts/install-deps"
    # Two local hosts: the guard is the first task of flash.yml, so nothing else runs.
    (tmp_path / "hosts").write_text(
        f"node-a ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        f"node-b ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOST_KEY_CHECKING": "0", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")}
    proc = subprocess.run([playbook_bin, "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert out.count("Refusing to flash PCIe switch firmware on 2 hosts at once") == 2, out
    assert "Create the image folder" not in out, out
