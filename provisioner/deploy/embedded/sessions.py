"""Per-host deploy sessions: what the HTTP server hands out, and the callbacks it has received.

Each deploy attempt gets fresh random tokens. The callback token authenticates the ramdisk's (or
installer's) reports; it is accepted once per report kind and revoked by the final report
(finished or failed), so a replayed or forged report is refused. Tokens never appear in logs,
reprs or exceptions.

Anything on the provisioning network can send requests (docs/deploy-embedded.md, threat model),
so a host's secrets reach only that host: every per-host request must come from the address
dnsmasq reserves for the host's MAC, and the first secret (the one-time configuration, or the
autoinstall data) also needs the boot key that only the iPXE script served to that address holds.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass, field

from provisioner.secrets import Secret

START = "started"
VERIFIED = "verified"  # the image's sha256 checked out (before the disk is grown and seeded)
FINISHED = "finished"
FAILED = "failed"
BOOTED = "booted"
KINDS = (START, VERIFIED, FINISHED, FAILED)
TERMINAL = (FINISHED, FAILED)
MAX_LOG = 1 << 20
# How the host boots its installed OS after "finished" (the report's ?next=)
REBOOT = "reboot"  # it powers off; the orchestrator boots it from disk (a firmware POST)
KEXEC = "kexec"  # it starts the installed kernel itself
NEXT_BOOTS = (REBOOT, KEXEC)


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
    next_boot: str = REBOOT  # "finished" only: what the host does next (NEXT_BOOTS)


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
    # In the iPXE script only: opens the one-time configuration / the autoinstall data.
    boot_key: Secret = field(default_factory=lambda: Secret(secrets.token_urlsafe(32)))
    address: str | None = None  # the host's DHCP reservation; None: any client (loopback only)
    config_served: bool = False
    revoked: bool = False
    reports: dict[str, Report] = field(default_factory=dict)
    # when the server finished sending this attempt's whole image (time.monotonic()); None: not
    # yet. From then on the host has all it needs to report within the callback timeout.
    image_sent_at: float | None = None
    image_streams: int = 0  # image streams admitted for this attempt (the ramdisk may re-stream)
    locality: str | None = None  # the host's rack: a peer of the same rack serves it first
    # peer serving: the key a peer's ramdisk checks download tickets with, and its port
    peer_key: Secret | None = None
    peer_port: int = 0
    peer_url: str | None = None  # where it serves its image, once it offered to (verified)
    changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def __repr__(self) -> str:
        return f"HostSession(host={self.host!r}, mac={self.mac!r}, reports={list(self.reports)})"

    @property
    def installed(self) -> bool:
        """The image is written (or the installer finished): iPXE must now boot the disk."""
        return FINISHED in self.reports

    def is_client(self, remote: str | None) -> bool:
        """Whether a request comes from this host's reserved address (any, when unset)."""
        return self.address is None or plain_ip(remote) == plain_ip(self.address)

    def peer_ticket(self, client: str | None) -> str:
        """The ticket this host's ramdisk accepts for a download by ``client``: bound to that
        address (the ramdisk hashes its key with the address it sees)."""
        assert self.peer_key is not None
        return hashlib.sha256(f"{self.peer_key.reveal()}:{plain_ip(client)}".encode()).hexdigest()

    def check_client(self, remote: str | None) -> None:
        """Refuse (403) a request for this host's data from any address but its reservation."""
        if not self.is_client(remote):
            raise CallbackRefused(
                403, f"{self.host}'s deploy data is served only to its reserved address "
                f"{self.address}, not to {remote}")

    def check_boot_key(self, presented: str | None) -> None:
        """Authenticate a request carrying the key of this host's iPXE script (403)."""
        if not presented or not hmac.compare_digest(
            presented.encode(), self.boot_key.reveal().encode()
        ):
            raise CallbackRefused(403, "bad or missing boot key")

    def take_config(self, presented_key: str | None) -> str:
        """The one-time configuration, for the boot key; a second request is refused (410)."""
        self.check_boot_key(presented_key)
        with self.changed:
            if self.config_served:
                raise CallbackRefused(410, "configuration already handed out for this attempt")
            self.config_served = True
            return self.config_env

    def autoinstall_doc(self, presented_key: str | None, doc: str) -> str | None:
        """A NoCloud document for the installer, for the boot key, until it reports (410)."""
        self.check_boot_key(presented_key)
        with self.changed:
            if self.reports:
                raise CallbackRefused(410, "the installer already started; data withdrawn")
            return self.autoinstall.get(doc)

    def check_token(self, presented: str | None) -> None:
        """Authenticate a request carrying the callback token (constant-time compare)."""
        if not presented or not hmac.compare_digest(
            presented.encode(), self.token.reveal().encode()
        ):
            raise CallbackRefused(403, "bad or missing token")
        if self.revoked:
            raise CallbackRefused(409, "token already used up by a final report")

    def report(self, kind: str, presented: str | None, log: str, *,
               next_boot: str = REBOOT) -> None:
        """Record a callback; refuses bad tokens, unknown kinds and replays."""
        if kind not in KINDS:
            raise CallbackRefused(404, f"unknown callback {kind!r}")
        if next_boot not in NEXT_BOOTS:
            raise CallbackRefused(400, f"unknown next boot {next_boot[:20]!r}: "
                                  f"{' or '.join(NEXT_BOOTS)}")
        with self.changed:
            self.check_token(presented)
            if kind in self.reports:
                raise CallbackRefused(409, f"{kind!r} was already reported")
            self.reports[kind] = Report(kind, time.monotonic(), log[-MAX_LOG:], next_boot)
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

    def image_admitted(self) -> None:
        """A stream of the image begins for this host: until it is sent, no image is."""
        with self.changed:
            self.image_streams += 1
            self.image_sent_at = None
            self.changed.notify_all()

    def image_sent(self) -> None:
        """The host has its whole image: the server sent it (a complete 200, not a range), or
        the host verified one a peer sent."""
        with self.changed:
            if self.image_sent_at is None:
                self.image_sent_at = time.monotonic()
            self.changed.notify_all()

    def wait_for(
        self, kinds: tuple[str, ...], timeout_s: float, *, after_image_s: float | None = None
    ) -> Report | None:
        """Block until one of ``kinds`` is reported; None on timeout, or, with
        ``after_image_s``, once that long has passed since the whole image was sent."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                for k in kinds:
                    if k in self.reports:
                        return self.reports[k]
                until = deadline
                if after_image_s is not None and self.image_sent_at is not None:
                    until = min(deadline, self.image_sent_at + after_image_s)
                left = until - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(min(left, 1.0))


def plain_ip(value: str | None) -> str:
    """An address in one spelling (IPv4-mapped IPv6 as IPv4) for comparison."""
    try:
        ip = ipaddress.ip_address((value or "").split("%", 1)[0])
    except ValueError:
        return value or ""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
