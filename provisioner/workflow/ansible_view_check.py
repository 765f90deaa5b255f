"""``ansible-inventory`` over a site folder: what Ansible itself makes of it.

Ansible reads every file and folder in ``-i inventory/<site>`` as an inventory source (only
names starting with a dot, ``group_vars``, ``host_vars`` and ``vars_plugins`` are skipped), and
with this repository's ansible.cfg (``any_unparsed_is_failed``) one source it cannot parse
fails the whole run. ``provision inventory check`` runs it so such a site fails there, naming
the source, instead of every later ``rack`` failing with "the playbook did not reach the host".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from provisioner.exceptions import InventoryError
from provisioner.workflow.configure import repo_root

# Where the provisioner writes its own site artefacts (topology manifests): Ansible never
# reads a dot-folder of an inventory directory, whatever the ansible.cfg.
ARTEFACT_DIR = ".provisioner"
TIMEOUT_S = 120.0
_FAILED_SOURCE = re.compile(r"(?:Completely failed to parse|Unable to parse) inventory source (?P<src>\S+?)[.:]?$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class AnsibleView:
    """The outcome of one ``ansible-inventory --list`` over a site folder."""

    ran: bool  # False when ansible-inventory is not installed here
    note: str = ""


def _executable() -> str | None:
    return shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which(
        "ansible-inventory")


def _unwrap(text: str) -> list[str]:
    """Ansible wraps its messages at the terminal width: join continuation lines."""
    out: list[str] = []
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.rstrip()
        if not line:
            continue
        starts = line.startswith(("ERROR", "[WARNING]", "[ERROR]", "[DEPRECATION", " * ", "[WARNING"))
        if out and not starts:
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line.strip())
    return out


def _hint(site_dir: Path, source: str | None) -> str:
    if source is None:
        return "run: ansible-inventory -i " + str(site_dir) + " --list"
    path = Path(source)
    legacy = site_dir / "topology"
    if path == legacy or legacy in path.parents:
        return (f"topology manifests now live in {site_dir / ARTEFACT_DIR / 'topology'}: "
                f"git mv {legacy} {site_dir / ARTEFACT_DIR / 'topology'}")
    if site_dir in path.parents and path.name not in ("site.yml", "site.yaml"):
        return (f"Ansible reads every file and folder in {site_dir} as inventory: move "
                f"{path} out of it, or into a folder whose name starts with a dot")
    return "fix the source Ansible names, then re-run provision inventory check"


def check_ansible_view(site_dir: Path, *, timeout_s: float = TIMEOUT_S) -> AnsibleView:
    """Run ``ansible-inventory -i SITE_DIR --list`` as ``provision rack`` runs Ansible (this
    repository's ansible.cfg); raise InventoryError naming the source Ansible cannot parse."""
    exe = _executable()
    if exe is None:
        return AnsibleView(False, "ansible-inventory is not installed here: Ansible's view of "
                           "the site was not checked (./scripts/install-deps installs it)")
    # it runs in the repository (its ansible.cfg): a site named relative to the caller's folder
    # (pre-commit passes inventory/dc1/site.yml) would be looked up in the repository instead
    site_dir = site_dir.absolute()
    root = repo_root()
    env = {**os.environ, "ANSIBLE_CONFIG": str(root / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_FORCE_COLOR": "0"}
    try:
        proc = subprocess.run([exe, "-i", str(site_dir), "--list"], cwd=root, env=env,
                              capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise InventoryError(f"ansible-inventory did not finish within {timeout_s:g}s",
                             file=str(site_dir), hint="run it by hand to see where it hangs: "
                             f"ansible-inventory -i {site_dir} --list") from None
    if proc.returncode == 0:
        return AnsibleView(True)
    lines = _unwrap(proc.stderr)
    errors = [ln for ln in lines if "ERROR" in ln[:10]] or lines[-1:] or [f"exit {proc.returncode}"]
    source = next((m.group("src") for ln in errors if (m := _FAILED_SOURCE.search(ln))), None)
    why = [ln for ln in lines if ln.startswith(" * ") and (source is None or source in ln)]
    detail = "; ".join([errors[0].removeprefix("ERROR! ").removeprefix("[ERROR]: "), *why[:2]])
    raise InventoryError(f"Ansible cannot use this site as its inventory: {detail[:600]}",
                         file=source or str(site_dir), hint=_hint(site_dir, source))
