"""Running a script on a host with the system ``ssh`` client (non-interactive, key-based)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from provisioner.health.errors import SshUnavailable

SSH_UNREACHABLE = 255  # what ssh returns when it cannot connect or authenticate
# OpenSSH 9.x's default key exchange, sntrup761x25519, costs about 70 ms of CPU per session on
# each end (measured: 81 ms of ssh client CPU per session with it, 11 ms with curve25519): at
# 512 hosts that alone is 36 s of a laptop's CPU per health run. Removing it from the default
# list leaves mlkem768x25519 first where the client has it (post-quantum and fast, 9.9+) and
# curve25519 before. A site that wants sntrup anyway names KexAlgorithms in ssh_options.
KEX_WITHOUT_SNTRUP = "KexAlgorithms=-sntrup761x25519-sha512@openssh.com,sntrup761x25519-sha512"


@dataclass(frozen=True)
class SshTarget:
    """Where and as whom to log in; the key is a path, never key material."""

    name: str
    address: str
    user: str
    port: int = 22
    key: Path | None = None
    known_hosts: Path | None = None  # default: the user's ~/.ssh/known_hosts


@dataclass(frozen=True)
class SshResult:
    """Exit status and output of one remote command."""

    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def unreachable(self) -> bool:
        """ssh itself failed (connect, host key, auth) or the command hung past the timeout."""
        return self.rc == SSH_UNREACHABLE or self.timed_out


class SshClient:
    """Runs commands on hosts; one instance is shared by the runner's worker threads."""

    def __init__(
        self, *, connect_timeout_s: int = 10, command_timeout_s: float = 600.0,
        options: list[str] | None = None,
    ) -> None:
        exe = shutil.which("ssh")
        if exe is None:
            raise SshUnavailable(
                "the ssh client is not installed on this machine",
                hint="install openssh-client (apt-get install openssh-client)",
            )
        self.exe = exe
        self.connect_timeout_s = connect_timeout_s
        self.command_timeout_s = command_timeout_s
        self.options = list(options or [])  # site-wide -o options (ProxyJump, Ciphers...)

    def argv(self, target: SshTarget, remote: str) -> list[str]:
        """The ssh command line for ``remote`` on ``target``."""
        argv = [
            self.exe, "-T",
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={self.connect_timeout_s}",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
            "-o", "LogLevel=ERROR",
            "-p", str(target.port),
        ]
        if target.key is not None:
            argv += ["-i", str(target.key), "-o", "IdentitiesOnly=yes"]
        if target.known_hosts is not None:
            argv += ["-o", f"UserKnownHostsFile={target.known_hosts}"]
        for opt in self.options:
            argv += ["-o", opt]
        if not any(o.replace(" ", "=").lower().startswith("kexalgorithms=") for o in self.options):
            argv += ["-o", KEX_WITHOUT_SNTRUP]
        return [*argv, f"{target.user}@{target.address}", remote]

    def run(self, target: SshTarget, remote: str, stdin: str = "") -> SshResult:
        """Run ``remote`` (a shell command line) with ``stdin``; never raises on remote failure."""
        try:
            proc = subprocess.run(
                self.argv(target, remote), input=stdin, capture_output=True, text=True,
                errors="replace",  # a host's output is not always UTF-8 (dmesg, firmware strings)
                timeout=self.command_timeout_s, check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return SshResult(SSH_UNREACHABLE, out, f"timed out after {self.command_timeout_s:g}s",
                             timed_out=True)
        return SshResult(proc.returncode, proc.stdout, proc.stderr)

    def run_script(self, target: SshTarget, script: str) -> SshResult:
        """Run a bash script fed on stdin (no temp file left on the host)."""
        return self.run(target, "bash -s", stdin=script)
