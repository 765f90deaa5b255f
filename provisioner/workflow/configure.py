"""Running the site playbook on freshly deployed hosts and reading its recap per host."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from provisioner.events import Event, emit
from provisioner.exceptions import NotReady
from provisioner.inventory.loader import load_site
from provisioner.inventory.model import Site
from provisioner.workflow.ansible_lines import parse_line
from provisioner.workflow.ansible_logs import HostLogSplitter, host_log_dir

CONNECT_TIMEOUT_S = 60

RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)"
)


@dataclass(frozen=True)
class HostRecap:
    """One host's line of Ansible's PLAY RECAP."""

    host: str
    ok: int
    changed: int
    unreachable: int
    failed: int

    @property
    def success(self) -> bool:
        return self.unreachable == 0 and self.failed == 0


def parse_recap(output: str) -> dict[str, HostRecap]:
    """Per-host recap from ansible-playbook's output."""
    recaps: dict[str, HostRecap] = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            m = RECAP_RE.match(line.strip())
            if m:
                recaps[m["host"]] = HostRecap(
                    m["host"],
                    int(m["ok"]),
                    int(m["changed"]),
                    int(m["unreachable"]),
                    int(m["failed"]),
                )
    return recaps


def repo_root() -> Path:
    """The checkout holding playbooks/ and ansible.cfg."""
    return Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class KeyTarget:
    """Where Ansible (and `provision health`) reach one host over SSH."""

    host: str
    address: str
    port: int = 22

    @property
    def known_hosts_name(self) -> str:
        """The host's name as ssh writes it in known_hosts."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"


def known_hosts_file(site: Site) -> Path:
    """The known_hosts file the site's SSH clients share (settings.health.known_hosts)."""
    known = site.settings.health.get("known_hosts") if site.settings.health else None
    return site.resolve_path(str(known)) if known else Path.home() / ".ssh" / "known_hosts"


def key_targets(site: Site, hosts: Sequence[str]) -> list[KeyTarget]:
    """The SSH address and port of each named host, as the inventory plugin hands them to Ansible."""
    targets = []
    for name in hosts:
        host = site.host(name)
        address = host.vars.get("ansible_host") or host.addresses.get("provisioning")
        if address is None:
            continue  # Ansible will use the name itself; nothing to pin by address
        port = int(host.vars.get("ansible_port") or 22)
        targets.append(KeyTarget(name, str(address), port))
    return targets


def _entry_names(field: str, name: str) -> bool:
    """Whether the host field of a known_hosts line names ``name`` (plain or hashed)."""
    for item in field.split(","):
        if item.startswith("|1|"):
            try:
                _, _, salt, digest = item.split("|")
                mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            except ValueError:
                continue
            if hmac.compare_digest(base64.b64encode(mac).decode(), digest):
                return True
        elif item == name:
            return True
    return False


def replace_known_hosts(path: Path, scanned: dict[str, list[str]]) -> None:
    """Drop every line for the scanned names from ``path`` and add the scanned keys.

    Other hosts' lines (and comments) stay as they are; the file is locked while it changes,
    since parallel runs may pin their hosts into the same file.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        kept = []
        for line in fh.read().splitlines():
            fields = line.split()
            host_field = (
                fields[1]
                if fields and fields[0].startswith("@") and len(fields) > 1
                else (fields[0] if fields else "")
            )
            if host_field and any(_entry_names(host_field, n) for n in scanned):
                continue
            kept.append(line)
        for lines in scanned.values():
            kept.extend(lines)
        fh.seek(0)
        fh.truncate()
        fh.write("".join(f"{line}\n" for line in kept))


# ssh-keyscan's deadline per attempt, and attempts: a host that accepts the connection but never
# answers costs at most 2 x 10 s, in its own worker (hosts are pinned in parallel).
KEYSCAN_TIMEOUT_S = 10
KEYSCAN_ATTEMPTS = 2


def scan_host_key(
    target: KeyTarget, *, timeout_s: int = KEYSCAN_TIMEOUT_S, attempts: int = KEYSCAN_ATTEMPTS
) -> list[str]:
    """The host's public keys as known_hosts lines (ssh-keyscan), or [] when it gives none.

    A host in its first minutes (cloud-init still running, a slow or emulated machine) can
    miss ssh-keyscan's deadline once, although SSH just answered: hence one retry.
    """
    argv = ["ssh-keyscan", "-T", str(timeout_s), "-p", str(target.port), target.address]
    for _ in range(attempts):
        res = subprocess.run(argv, capture_output=True, text=True, check=False,
                             stdin=subprocess.DEVNULL)  # fmt: skip
        lines = [
            line for line in res.stdout.splitlines() if line.strip() and not line.startswith("#")
        ]
        if lines:
            return lines
    return []


def pin_host_key(
    known_hosts: Path, target: KeyTarget, *, timeout_s: int = KEYSCAN_TIMEOUT_S
) -> str | None:
    """Replace the host's entry in ``known_hosts`` by the keys it offers now; return why not
    (None when pinned).

    A fresh install generates new host keys, so the old entry for the address is stale by
    construction. The keys are read right after the workflow reached the host over its
    provisioning network (which it already trusted to install the host), and Ansible then
    runs with strict checking against them: a host that changes keys mid-run is refused.
    """
    lines = scan_host_key(target, timeout_s=timeout_s)
    if not lines:
        return (
            f"ssh-keyscan {target.known_hosts_name} gave no host key within "
            f"{timeout_s} s ({KEYSCAN_ATTEMPTS} attempts): SSH accepts connections "
            "but does not answer"
        )
    replace_known_hosts(known_hosts, {target.known_hosts_name: lines})
    return None


def pin_host_keys(
    known_hosts: Path, targets: Sequence[KeyTarget], *, parallel: int = 32
) -> list[str]:
    """Pin every target's current keys at once; return one line per host without a key."""
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(parallel, len(targets))) as pool:
        why = list(pool.map(lambda t: pin_host_key(known_hosts, t), targets))
    return [f"{t.host}: {w}" for t, w in zip(targets, why, strict=True) if w]


def strict_key_args(known_hosts: Path) -> list[str]:
    """ansible-playbook arguments that check hosts against the pinned keys only."""
    return [
        "--ssh-extra-args",
        f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes",
    ]


def run_playbook(
    site_path: Path,
    hosts: list[str],
    *,
    playbook: str | Sequence[str] = "playbooks/site.yml",
    log_file: Path | None = None,
    extra_args: tuple[str, ...] = (),
    pin_keys: bool = True,
    strict_keys: bool | None = None,
) -> tuple[int, dict[str, HostRecap], str]:
    """Run ``playbook`` (or several, in order) against ``hosts``; return exit code, recaps, output.

    With ``pin_keys`` (the hosts were just installed) their new SSH host keys replace the old
    ones in the site's known_hosts file first (all hosts at once). With ``strict_keys`` (by
    default when pinning) Ansible checks the hosts against that file only: a caller that
    pinned each host as it came up passes ``pin_keys=False, strict_keys=True``.
    """
    root = repo_root()
    exe = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or shutil.which(
        "ansible-playbook"
    )
    if exe is None:
        raise NotReady("ansible-playbook not found", hint="run ./scripts/install-deps")
    books = [playbook] if isinstance(playbook, str) else list(playbook)
    argv = [exe, "-i", str(site_path.parent), *(str(root / b) for b in books)]
    argv += ["--limit", ",".join(hosts)]
    notes = ""
    if pin_keys or strict_keys:
        site = load_site(site_path)
        known = known_hosts_file(site)
        if pin_keys:
            missing = pin_host_keys(known, key_targets(site, hosts))
            notes = "".join(f"host key not pinned: {m}\n" for m in missing)
        if strict_keys is not False:
            argv += strict_key_args(known)
    argv += list(extra_args)
    env = {**os.environ, "ANSIBLE_CONFIG": str(root / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    # Hosts seconds out of their first boot answer slowly (sudo took over Ansible's default
    # 10 s on a fresh lab VM while cloud-init was finishing): allow a minute unless told.
    env.setdefault("ANSIBLE_TIMEOUT", str(CONNECT_TIMEOUT_S))
    # line by line into the log as it comes, not in blocks when a pipe buffer fills
    env["PYTHONUNBUFFERED"] = "1"
    # the recap and the progress are read from the default callback's lines: a callback set in
    # the caller's environment (json, yaml...) would leave both blind
    env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    code, output = stream_command(argv, cwd=root, env=env, log_file=log_file, preamble=notes)
    return code, parse_recap(output), output


def stream_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log_file: Path | None,
    preamble: str = "",
) -> tuple[int, str]:
    """Run ansible-playbook (or alike), writing each output line to ``log_file`` as it comes
    and emitting progress events for plays, tasks and per-host results; return (exit, output)."""
    lines: list[str] = [preamble] if preamble else []
    log = None
    split = None
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log = log_file.open("w", encoding="utf-8")
        split = HostLogSplitter(log_file)
        emit(
            Event(
                "log",
                "ansible-playbook output",
                data={"path": str(log_file), "hosts_dir": str(host_log_dir(log_file))},
            )
        )
        log.write(preamble)
        log.flush()
    task = ""
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            bufsize=1,
        )
        assert proc.stdout is not None
        with proc:
            for line in proc.stdout:
                lines.append(line)
                if log is not None:
                    log.write(line)
                    log.flush()
                if split is not None:
                    split.feed(line)
                task = _emit_line(line, task)
            code = proc.wait()
    finally:
        if log is not None:
            log.close()
    return code, "".join(lines)


def _emit_line(line: str, task: str) -> str:
    """Emit the event one output line carries; return the task now running."""
    parsed = parse_line(line)
    if parsed is None:
        return task
    if parsed.kind == "play":
        emit(Event("stage", f"play: {parsed.name}", phase="configure"))
    elif parsed.kind == "task":
        emit(Event("task", parsed.name, phase="configure"))
        return parsed.name
    elif parsed.kind == "result":
        emit(
            Event(
                "result",
                task,
                host=parsed.host,
                phase="configure",
                data={"status": parsed.status},
            )
        )
    elif parsed.kind == "recap":
        emit(Event("stage", "play recap", phase="configure"))
        return ""
    return task
