"""Per-host deploy sessions: what the HTTP server hands out, and the callbacks it has received.

Each deploy attempt gets fresh random tokens. The callback token authenticates the ramdisk's (or
installer's) reports; it is accepted once per report kind and revoked by the final report
(finished or failed), so a replayed or forged report is refused. Tokens never appear in logs,
reprs or exceptions.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

from provisioner.secrets import Secret

START = "started"
FINISHED = "finished"
FAILED = "failed"
BOOTED = "booted"
KINDS = (START, FINISHED, FAILED)
TERMINAL = (FINISHED, FAILED)
MAX_LOG = 1 << 20


class CallbackRefused(Exception):
    """A callback was not accepted; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Report:
    """One received callback."""

    kind: str
    at: float
    log: str


@dataclass
class HostSession:
    """Everything the server serves for one host's deploy attempt, and what came back."""

    host: str
    mac: str
    method: str
    ipxe_script: str
    config_env: str = ""  # the ramdisk's one-time configuration (contains the token)
    seed: dict[str, str] = field(default_factory=dict)  # NoCloud documents by name
    autoinstall: dict[str, str] = field(default_factory=dict)  # NoCloud docs for the installer
    token: Secret = field(default_factory=lambda: Secret(secrets.token_urlsafe(32)))
    boot_token: Secret = field(default_factory=lambda: Secret(secrets.token_urlsafe(32)))
    config_served: bool = False
    revoked: bool = False
    reports: dict[str, Report] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def __repr__(self) -> str:
        return f"HostSession(host={self.host!r}, mac={self.mac!r}, reports={list(self.reports)})"

    @property
    def installed(self) -> bool:
        """The image is written (or the installer finished): iPXE must now boot the disk."""
        return FINISHED in self.reports

    def take_config(self) -> str:
        """The one-time configuration; a second request is refused (410)."""
        with self.changed:
            if self.config_served:
                raise CallbackRefused(410, "configuration already handed out for this attempt")
            self.config_served = True
            return self.config_env

    def check_token(self, presented: str | None) -> None:
        """Authenticate a request carrying the callback token (constant-time compare)."""
        if not presented or not hmac.compare_digest(
            presented.encode(), self.token.reveal().encode()
        ):
            raise CallbackRefused(403, "bad or missing token")
        if self.revoked:
            raise CallbackRefused(409, "token already used up by a final report")

    def report(self, kind: str, presented: str | None, log: str) -> None:
        """Record a callback; refuses bad tokens, unknown kinds and replays."""
        if kind not in KINDS:
            raise CallbackRefused(404, f"unknown callback {kind!r}")
        with self.changed:
            self.check_token(presented)
            if kind in self.reports:
                raise CallbackRefused(409, f"{kind!r} was already reported")
            self.reports[kind] = Report(kind, time.monotonic(), log[-MAX_LOG:])
            if kind in TERMINAL:
                self.revoked = True
            self.changed.notify_all()

    def phone_home(self, presented: str) -> None:
        """cloud-init's phone-home from the installed OS (its own one-time token, in the URL)."""
        with self.changed:
            if not hmac.compare_digest(presented.encode(), self.boot_token.reveal().encode()):
                raise CallbackRefused(403, "bad token")
            if BOOTED in self.reports:
                raise CallbackRefused(409, "'booted' was already reported")
            self.reports[BOOTED] = Report(BOOTED, time.monotonic(), "")
            self.changed.notify_all()

    def wait_for(self, kinds: tuple[str, ...], timeout_s: float) -> Report | None:
        """Block until one of ``kinds`` is reported; None on timeout."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                for k in kinds:
                    if k in self.reports:
                        return self.reports[k]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(min(left, 1.0))
