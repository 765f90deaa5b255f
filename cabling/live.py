"""``validate --live``: run ibnetdiscover, iblinkinfo and ibqueryerrors on a fabric-attached host
(this one, or one reached over SSH) and keep what they printed for audit.

Each tool's output streams into a file of the capture folder (never more than the fabric-dump cap,
never longer than the deadline), next to ``run.json``: the command lines, where they ran, when,
how long and how they exited. The report is made from those files, so what it says can be checked
against exactly what the tools printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shlex
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cabling.errors import CablingInputError, DiscoveryUnavailable
from cabling.limits import FABRIC_DUMP

# Every error counter at threshold 0: ibqueryerrors lists every port that counts any, and the
# fabric's median is judged here (a site's /etc/infiniband-diags/error_thresholds must not hide them).
_THRESHOLDS = "".join(f"{name}=0\n" for name in (
    "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
    "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
    "PortRcvConstraintErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors", "VL15Dropped"))
_STDERR_KEEP = 64 * 1024


@dataclass(frozen=True)
class LiveTarget:
    """Where and how the tools run: locally or over SSH, on which HCA port, through what wrapper."""

    via: str | None = None  # an SSH destination: host, user@host, or a Host of the ssh config
    ssh_config: Path | None = None
    ca: str | None = None  # -C: the HCA the tools use (mlx5_0)
    ca_port: int | None = None  # -P: its port
    run_with: tuple[str, ...] = ()  # words in front of each tool: sudo -n
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.via is not None and (not self.via or self.via.startswith("-") or any(c.isspace() for c in self.via)):
            raise CablingInputError(f"--via {self.via!r} is not an SSH destination",
                                    hint="give host, user@host, or a Host name of your ssh config")
        if self.ca is not None and (not self.ca or self.ca.startswith("-")):
            raise CablingInputError(f"--ca {self.ca!r} is not an HCA name", hint="e.g. --ca mlx5_0 (see ibstat)")

    def argv(self, tool: list[str]) -> list[str]:
        """The command line that runs ``tool`` there."""
        words = [*self.run_with, *tool]
        if self.ca:
            words += ["-C", self.ca]
        if self.ca_port is not None:
            words += ["-P", str(self.ca_port)]
        if self.via is None:
            return words
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "ServerAliveInterval=15"]
        if self.ssh_config is not None:
            ssh += ["-F", str(self.ssh_config)]
        return [*ssh, "--", self.via, shlex.join(words)]

    def where(self) -> str:
        """Where the tools run, for messages."""
        return f"on {self.via}" if self.via else "on this host"


@dataclass
class Command:
    """One tool run, as run.json records it."""

    tool: str
    argv: list[str]
    output: str
    started: str
    seconds: float
    exit_code: int
    bytes: int
    stderr: str = ""


@dataclass
class Capture:
    """The files one sweep of the tools wrote, and how each ran."""

    folder: Path
    ibnetdiscover: Path
    iblinkinfo: Path
    ibqueryerrors: Path | None
    commands: list[Command] = field(default_factory=list)
    at: float = 0.0


_VIA_DOC = "docs/cabling.md, 'Live'"


def capture(target: LiveTarget, folder: Path, *, counters: bool = True) -> Capture:
    """Run the tools once; their outputs are files in ``folder`` (kept for audit)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CablingInputError(f"cannot create the capture folder: {exc.strerror or exc}", file=str(folder)) from None
    at = time.time()
    commands = [
        _run(target, "ibnetdiscover", [], folder / "ibnetdiscover.txt"),
        _run(target, "iblinkinfo", [], folder / "iblinkinfo.txt"),
    ]
    errors = None
    if counters:
        errors = folder / "ibqueryerrors.txt"
        commands.append(_run(target, "ibqueryerrors", ["--skip-sl", "--threshold-file", "/dev/stdin"], errors,
                             stdin=_THRESHOLDS, ok=(0, 1)))  # 1: ports with errors were found
    out = Capture(folder, folder / "ibnetdiscover.txt", folder / "iblinkinfo.txt", errors, commands, at)
    # Written last and whole (renamed into place): run.json present means the sweep's files are.
    tmp = folder / ".run.json.tmp"
    tmp.write_text(json.dumps(
        {"where": target.where(), "via": target.via, "ca": target.ca, "ca_port": target.ca_port,
         "commands": [asdict(c) for c in commands]}, indent=2) + "\n")
    tmp.replace(folder / "run.json")
    return out


def _run(target: LiveTarget, tool: str, args: list[str], output: Path, *, stdin: str = "",
         ok: tuple[int, ...] = (0,)) -> Command:
    """Run one tool with its output streamed into ``output`` (capped, under the deadline)."""
    argv = target.argv([tool, *args])
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        raise DiscoveryUnavailable(f"cannot run {argv[0]} {target.where()}: {exc.strerror or exc}",
                                   hint="install infiniband-diags (and openssh-client for --via)") from None
    size, err = _drain(proc, output, stdin, t0 + target.timeout_s, tool, target)
    code = proc.wait()
    cmd = Command(tool, argv, output.name, started, round(time.monotonic() - t0, 3), code, size,
                  err.decode(errors="replace")[-_STDERR_KEEP:])
    if code not in ok:
        why = cmd.stderr.strip().splitlines()[-1] if cmd.stderr.strip() else f"exit {code}"
        hint = (f"check the SSH destination and that the tools are installed there: --via takes what ssh takes "
                f"(host, user@host, a Host of --ssh-config), not a site host name ssh cannot resolve; "
                f"'provision inventory show --site SITE' lists each host's address ({_VIA_DOC})"
                if target.via and code == 255
                else "check the HCA (--ca), that the port is up ('ibstat') and that the tools may open it "
                     "(root, or --run-with 'sudo -n')")
        raise DiscoveryUnavailable(f"{tool} failed {target.where()} (exit {code}): {why[:300]}", hint=hint)
    return cmd


def _drain(proc: subprocess.Popen[bytes], output: Path, stdin: str, deadline: float, tool: str,
           target: LiveTarget) -> tuple[int, bytes]:
    """Copy the tool's stdout into ``output`` until it ends; stop it past the cap or the deadline."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the tool does not read its input
    size, err = 0, b""
    with output.open("wb") as fh, selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _stop(proc)
                raise DiscoveryUnavailable(f"{tool} did not finish {target.where()} within {target.timeout_s:g} s",
                                           hint="a large fabric needs more: --tool-timeout")
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.fileobj is proc.stdout:
                    size += len(chunk)
                    if size > FABRIC_DUMP.limit:
                        _stop(proc)
                        raise DiscoveryUnavailable(f"{tool} printed more than {FABRIC_DUMP.describe()} "
                                                   f"{target.where()}; stopped it")
                    fh.write(chunk)
                else:
                    err = (err + chunk)[-_STDERR_KEEP:]
    return size, err


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a tool this capture started (its own process group: ssh and what it runs)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def default_folder(output: Path | None, now: datetime | None = None) -> Path:
    """Where raw outputs go: beside the report (``report.json`` -> ``report.live/``), else a
    time-stamped folder here."""
    if output is not None:
        return output.with_name(output.stem + ".live")
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return Path(f"cabling-live-{stamp}")
